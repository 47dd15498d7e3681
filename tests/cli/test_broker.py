"""``loopwatch broker``: its note when its memory storage starts to cost (the watch is pure: no waiting here), and
its input files (log, TLS), each refused in one line naming the file and its flag before any port is bound."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streams.cli.broker import BusyWatch
from tests.support.certs import Pki, make_pki
from tests.support.procs import free_port, start_process, stop_process, wait_until


def test_a_busy_minute_is_told_once() -> None:
    watch = BusyWatch(window=60.0, share=0.5)
    assert watch.sample(0.0, 10.0) is None  # the first sample only starts the window
    assert watch.sample(30.0, 40.0) is None  # a full core, but half a window
    assert watch.sample(60.0, 20.0 + 10.0) is None  # 20 s of CPU in 60 s: a third of a core
    assert watch.sample(120.0, 30.0 + 36.0) == 0.6  # 36 s in the next 60 s
    assert watch.told
    assert watch.sample(180.0, 66.0 + 60.0) is None  # once is enough


def test_no_reading_or_a_restarted_process_starts_the_window_again() -> None:
    watch = BusyWatch(window=60.0, share=0.5)
    assert watch.sample(0.0, None) is None  # no /proc: never a note
    assert watch.sample(1.0, 50.0) is None
    assert watch.sample(30.0, 5.0) is None  # the CPU went down: another process, start over
    assert watch.sample(61.0, 35.0) is None  # 30 s over 31 s, but not a full window yet
    assert watch.sample(90.0, 50.0) == 0.75


# --- its input files, checked before anything is bound: the real executable, from an empty directory -------------

LOOPWATCH = str(Path(sys.executable).parent / "loopwatch")


@dataclass(frozen=True)
class Done:
    code: int
    err: str


def clean_env() -> dict[str, str]:
    """The caller's environment without LOOPWATCH_* settings: the command's own defaults are tested."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_") and k != "PYTHONPATH"}


def broker(cwd: Path, *args: str) -> Done:
    """``loopwatch broker ARGS`` as typed in ``cwd``; these all fail before starting anything, so 60 s is ample."""
    done = subprocess.run(
        [LOOPWATCH, "broker", *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return Done(done.returncode, done.stderr)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something listens on: a file error must still be told as such, not as "port in use"."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture
def pki(empty: Path) -> Pki:
    """The test PKI in the user's directory, so flags name files as a user types them (server.pem, not a path)."""
    made = make_pki(empty)
    (empty / "garbage.pem").write_text("not a PEM file\n")
    (empty / "somedir").mkdir()
    return made


@pytest.mark.parametrize(
    ("log_file", "reason"),
    [("somedir", "Is a directory"), ("/proc/nope/x.log", "No such file or directory")],
    ids=["a-directory", "no-such-place"],
)
def test_an_unwritable_log_file_is_a_bad_value(empty: Path, busy_port: int, log_file: str, reason: str) -> None:
    (empty / "somedir").mkdir()
    done = broker(empty, "--port", str(busy_port), "--log-file", log_file)
    assert (done.code, done.err) == (2, f"loopwatch broker: cannot write the log file ({log_file}): {reason}\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--cert", "missing.pem", "--key", "missing.pem"],
            "cannot read the TLS certificate (--cert missing.pem): No such file or directory",
        ),
        (
            ["--cert", "server.pem", "--key", "missing.key"],
            "cannot read the TLS key (--key missing.key): No such file or directory",
        ),
        (
            ["--cert", "somedir", "--key", "server.key"],
            "cannot read the TLS certificate (--cert somedir): Is a directory",
        ),
        (
            ["--cert", "server.key", "--key", "server.key"],
            "cannot load the TLS certificate (--cert server.key): no PEM certificate in it",
        ),
        (
            ["--cert", "server.pem", "--key", "garbage.pem"],
            "cannot load the TLS key (--key garbage.pem): no PEM private key in it",
        ),
        (
            ["--cert", "server.pem", "--key", "foreign.key"],
            "the TLS key does not match the certificate (--key foreign.key): it is not the key of server.pem",
        ),
        (
            ["--cert", "server.pem", "--key", "client.key"],  # would otherwise ask for a pass phrase on the terminal
            "cannot load the TLS key (--key client.key): it is encrypted; give an unencrypted PEM key",
        ),
        (
            ["--cert", "server.pem", "--key", "server.key", "--client-ca", "missing-ca.pem"],
            "cannot read the client CA (--client-ca missing-ca.pem): No such file or directory",
        ),
        (
            ["--cert", "server.pem", "--key", "server.key", "--client-ca", "garbage.pem"],
            "cannot load the client CA (--client-ca garbage.pem): no PEM certificate in it",
        ),
    ],
    ids=["cert-missing", "key-missing", "cert-a-directory", "cert-not-pem", "key-not-pem", "key-of-another",
         "key-encrypted", "ca-missing", "ca-not-pem"],
)  # fmt: skip
def test_an_unusable_tls_file_is_named_with_its_flag(
    empty: Path, pki: Pki, busy_port: int, args: list[str], line: str
) -> None:
    done = broker(empty, "--port", str(busy_port), *args)
    assert (done.code, done.err) == (2, f"loopwatch broker: {line}\n")


def test_usable_tls_files_pass_the_check_and_a_busy_port_is_still_told(empty: Path, pki: Pki, busy_port: int) -> None:
    done = broker(
        empty, "--port", str(busy_port), "--cert", "server.pem", "--key", "server.key", "--client-ca", "ca.pem"
    )
    assert done.code == 3
    assert done.err.startswith(f"loopwatch broker: port in use (127.0.0.1:{busy_port}): "), done.err


@pytest.mark.integration
def test_usable_tls_files_and_a_new_log_file_start_the_broker(empty: Path, pki: Pki) -> None:
    """The checks let a good TLS setup through (client CA included) and create the log file where it was asked."""
    port = free_port()
    args = ["--port", str(port), "--cert", "server.pem", "--key", "server.key", "--client-ca", "ca.pem"]
    out = empty.parent / "out"
    proc = start_process([LOOPWATCH, "broker", *args, "--log-file", "logs/broker.log"], clean_env(), out, cwd=empty)
    try:
        wait_until(lambda: "broker ready" in out.read_text(), 60, 0.1, message="the ready line")
        assert (empty / "logs" / "broker.log").is_file()
        code = stop_process(proc, timeout=15)
    finally:
        if proc.returncode is None:  # whatever failed above, the broker goes
            stop_process(proc)
    text = out.read_text()
    assert code == 0 and "Traceback" not in text, text
    assert f"broker ready on 127.0.0.1:{port} TLS with client certificates" in text
