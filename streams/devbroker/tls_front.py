"""A TLS listener in front of the embedded broker (Tansu 0.6.0 cannot serve TLS itself).

Tansu 0.6.0 lists ``--cert`` and ``--key`` but rejects them together ("the argument '--cert <CERT>' cannot be
used with '--key <KEY>'"), and either one alone leaves the listener plain TCP. So the embedded broker gets
TLS the way many Kafka deployments terminate it: this front accepts TLS connections (server certificate and
key; optionally requiring client certificates signed by a given CA) and relays the bytes to Tansu's plain
listener on 127.0.0.1, while Tansu advertises the front's address in its metadata, so clients only ever talk
TLS. Clients do a real TLS handshake and certificate verification; only the hop inside 127.0.0.1 is plain.

It runs an asyncio loop in a daemon thread of the process that starts the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from pathlib import Path

__all__ = ["InputFileError", "TlsFileError", "TlsFront", "TlsFrontError", "server_context"]

log = logging.getLogger(__name__)

_CHUNK = 256 * 1024


class TlsFrontError(RuntimeError):
    """The TLS front could not start (bad certificate or key, port in use)."""


class InputFileError(Exception):
    """A file the operator gave cannot be used: their input, not the machine, so callers report it apart.

    ``role`` says which file, ``what`` what failed and ``reason`` why, so a command can name the file, its flag
    and the cause in one line.
    """

    def __init__(self, role: str, path: str, what: str, reason: str) -> None:
        super().__init__(f"{what} ({path}): {reason}")
        self.role = role
        self.path = path
        self.what = what
        self.reason = reason


class TlsFileError(InputFileError, TlsFrontError):
    """One TLS file cannot be used; ``role`` is ``"cert"``, ``"key"`` or ``"client_ca"``, as :class:`TlsFront`
    names them."""


_NAMES = {"cert": "the TLS certificate", "key": "the TLS key", "client_ca": "the client CA"}


class _Encrypted(Exception):
    """Raised by the password callback: an encrypted key would otherwise prompt on the terminal."""


def _no_password() -> bytes:
    raise _Encrypted


def _readable(role: str, path: str) -> None:
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        raise TlsFileError(role, path, f"cannot read {_NAMES[role]}", exc.strerror or str(exc)) from None


def _has_certificate(role: str, path: str) -> None:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        probe.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError):
        raise TlsFileError(role, path, f"cannot load {_NAMES[role]}", "no PEM certificate in it") from None


def server_context(
    certfile: str | Path, keyfile: str | Path, client_cafile: str | Path | None = None
) -> ssl.SSLContext:
    """Server TLS context (TLS 1.2+); with ``client_cafile`` clients must present a certificate it signed.

    Each file is checked on its own first (readable, holds what it should, the key matches the certificate), so
    a failure names the one file at fault (:class:`TlsFileError`) rather than OpenSSL's "PEM lib".
    """
    cert, key = str(certfile), str(keyfile)
    ca = str(client_cafile) if client_cafile is not None else None
    for role, path in (("cert", cert), ("key", key), ("client_ca", ca)):
        if path is not None:
            _readable(role, path)
    _has_certificate("cert", cert)
    if ca is not None:
        _has_certificate("client_ca", ca)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except _Encrypted:
        encrypted = "it is encrypted; give an unencrypted PEM key"
        raise TlsFileError("key", key, "cannot load the TLS key", encrypted) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TlsFileError(
                "key", key, "the TLS key does not match the certificate", f"it is not the key of {cert}"
            ) from None
        raise TlsFileError("key", key, "cannot load the TLS key", "no PEM private key in it") from None
    except OSError as exc:  # the file went away since it was read
        raise TlsFileError("key", key, "cannot read the TLS key", exc.strerror or str(exc)) from None
    if ca is not None:
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsFileError("client_ca", ca, "cannot load the client CA", str(exc)) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class TlsFront:
    """Relay TLS connections on ``host:port`` to the plain listener ``origin_host:origin_port``."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        origin_host: str,
        origin_port: int,
        certfile: str | Path,
        keyfile: str | Path,
        client_cafile: str | Path | None = None,
        handshake_timeout: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self.origin_host = origin_host
        self.origin_port = origin_port
        self.context = server_context(certfile, keyfile, client_cafile)
        self.handshake_timeout = handshake_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            origin_reader, origin_writer = await asyncio.wait_for(
                asyncio.open_connection(self.origin_host, self.origin_port), 10.0
            )
        except (OSError, TimeoutError):
            writer.close()
            return
        await asyncio.gather(_pump(reader, origin_writer), _pump(origin_reader, writer))

    def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self, timeout: float = 5.0) -> None:
        """Bind and serve in a daemon thread; raises :class:`TlsFrontError` if binding fails."""
        if self._thread is not None:
            raise TlsFrontError("TLS front already started")
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop

        def _ignore_handshake_noise(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
            exc = context.get("exception")
            if isinstance(exc, ssl.SSLError | ConnectionError | TimeoutError):
                log.debug("TLS front: %s", context.get("message"))
                return
            loop.default_exception_handler(context)

        async def _serve() -> None:
            self._server = await asyncio.start_server(
                self._track,
                self.host,
                self.port,
                ssl=self.context,
                ssl_handshake_timeout=self.handshake_timeout,
                reuse_address=True,
            )

        def _run() -> None:
            asyncio.set_event_loop(loop)
            loop.set_exception_handler(_ignore_handshake_noise)
            try:
                loop.run_until_complete(_serve())
            except BaseException as exc:  # bind errors
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=_run, name=f"tls-front-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TlsFrontError(f"TLS front on {self.host}:{self.port} did not start within {timeout:.1f}s")
        if failure:
            self._thread.join(timeout)
            self._thread = None
            raise TlsFrontError(f"TLS front cannot listen on {self.host}:{self.port}: {failure[0]}")

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every relayed connection; idempotent."""
        loop, thread = self._loop, self._thread
        self._thread = None
        if loop is None or thread is None:
            return

        async def _close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(RuntimeError):  # loop already closed
            future = asyncio.run_coroutine_threadsafe(_close(), loop)
            with contextlib.suppress(Exception):
                future.result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
