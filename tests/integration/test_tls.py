"""TLS for real: the embedded broker behind its TLS listener, the real ``loopwatch`` commands as processes.

A test CA, server and client certificates are made by the test (``tests.support.certs``) under ``tmp_path``.
Covered: publish -> tail round trip over TLS (flags and environment variables); a wrong CA, a plaintext client
and a host name mismatch fail fast with a clear message (and ``--no-ssl-check-hostname`` works); client
certificates with an encrypted key whose password comes from the environment; a worker over mutual TLS
producing exactly the verdicts replay predicts; and no secret ever reaches stdout, stderr, logs or the process
command line. SASL cannot run against the embedded broker (see docs/embedded-broker.md); its settings are
unit-tested in ``tests/kafka/test_security.py``, and here a SASL_SSL client is shown to reach the SASL handshake
over TLS without leaking.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from streams.devbroker import EmbeddedBroker
from tests.support.certs import Pki, make_pki
from tests.support.procs import python_env, start_process, stop_process, wait_until
from tests.support.scenarios import load_scenarios, wire_events, write_inputs
from tests.support.worker import WorkerProcess, new_names

pytestmark = pytest.mark.integration

SASL_SECRET = "sasl-S3cret-must-never-show"
CLI_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _start_broker(directory: Path, cert: Path, key: Path, client_ca: Path | None = None) -> EmbeddedBroker:
    broker = EmbeddedBroker(log_path=directory / "tansu.log", tls_cert=cert, tls_key=key, tls_client_ca=client_ca)
    broker.start()
    return broker


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = _start_broker(tmp_path_factory.mktemp("tls-broker"), pki.server_cert, pki.server_key)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def mtls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = _start_broker(tmp_path_factory.mktemp("mtls-broker"), pki.server_cert, pki.server_key, pki.ca)
    try:
        yield broker
    finally:
        broker.stop()


def cli(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=python_env(env),
        check=False,
    )


def events(count: int, tag: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "tool_call",
            "event_id": f"{tag}-{i}",
            "gateway_id": "gw-tls",
            "agent_id": "main",
            "session_id": f"{tag}-s{i % 3}",
            "run_id": None,
            "ts": 1_767_225_600_000 + i,
            "tool": "read",
            "call_id": f"c{i}",
            "args": {"path": f"/repo/{i}"},
        }
        for i in range(count)
    ]


def write_events(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def ssl_flags(ca: Path) -> list[str]:
    return ["--security-protocol", "SSL", "--ssl-cafile", str(ca)]


def mtls_flags(pki: Pki) -> list[str]:
    return [*ssl_flags(pki.ca), "--ssl-certfile", str(pki.client_cert), "--ssl-keyfile", str(pki.client_key)]


def assert_secret_free(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text


def test_publish_and_tail_round_trip_over_tls(tls_broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    topic = f"it-tls-{uuid.uuid4().hex[:8]}"
    sent = events(7, topic)
    path = write_events(tmp_path / "events.jsonl", sent)
    result = cli(["publish", str(path), "--bootstrap", tls_broker.bootstrap, "--topic", topic, "--partitions", "2",
                  *ssl_flags(pki.ca)])  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sent 7 events to {topic}"
    # tail configured by environment variables only (the Kafka property names)
    env = {"LOOPWATCH_KAFKA_SECURITY_PROTOCOL": "SSL", "LOOPWATCH_KAFKA_SSL_CA_LOCATION": str(pki.ca)}
    result = cli(["tail", "--bootstrap", tls_broker.bootstrap, "--topic", topic, "--from-beginning", "--json",
                  "--max", "7", "--timeout", "20"], env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["event_id"] for r in got) == sorted(r["event_id"] for r in sent)


def test_wrong_ca_fails_fast_and_says_why(tls_broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    path = write_events(tmp_path / "events.jsonl", events(1, "wrong-ca"))
    started = time.monotonic()
    result = cli(["publish", str(path), "--bootstrap", tls_broker.bootstrap, "--topic", "it-tls-wrong-ca",
                  *ssl_flags(pki.other_ca)])  # fmt: skip
    assert result.returncode == 3
    assert time.monotonic() - started < 30
    assert result.stderr == (
        f"loopwatch publish: the broker's TLS certificate is not accepted ({tls_broker.bootstrap}): unable to get "
        "local issuer certificate; check --ssl-cafile (or --no-ssl-check-hostname for a host name mismatch)\n"
    )


def test_plaintext_client_is_refused(tls_broker: EmbeddedBroker, tmp_path: Path) -> None:
    path = write_events(tmp_path / "events.jsonl", events(1, "plain"))
    result = cli(["publish", str(path), "--bootstrap", tls_broker.bootstrap, "--topic", "it-tls-plain"])
    assert result.returncode == 3
    assert result.stderr.startswith("loopwatch publish: the broker closed the connection without a Kafka answer")


def test_host_name_is_checked_unless_disabled(pki: Pki, tmp_path: Path) -> None:
    broker = _start_broker(tmp_path, pki.foreign_server_cert, pki.foreign_server_key)  # valid for kafka.invalid only
    try:
        path = write_events(tmp_path / "events.jsonl", events(2, "hostname"))
        base = ["publish", str(path), "--bootstrap", broker.bootstrap, "--topic", "it-tls-hostname", *ssl_flags(pki.ca)]
        result = cli(base)
        assert result.returncode == 3
        assert "IP address mismatch, certificate is not valid for '127.0.0.1'" in result.stderr.splitlines()[-1]
        result = cli([*base, "--no-ssl-check-hostname"])  # the chain is still verified
        assert result.returncode == 0, result.stderr
    finally:
        broker.stop()


def test_client_certificate_with_encrypted_key(mtls_broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    topic = f"it-mtls-{uuid.uuid4().hex[:8]}"
    path = write_events(tmp_path / "events.jsonl", events(4, topic))
    password = {"LOOPWATCH_KAFKA_SSL_KEY_PASSWORD": pki.client_key_password}
    base = ["publish", str(path), "--bootstrap", mtls_broker.bootstrap, "--topic", topic]
    refused = cli([*base, *ssl_flags(pki.ca)])  # no client certificate
    assert refused.returncode == 3, refused.stderr
    result = cli([*base, *mtls_flags(pki)], password)
    assert result.returncode == 0, result.stderr
    # a running tail: its command line (what `ps` shows) holds file names, never the key password. It asks for
    # one verdict more than there is, so it stays alive until its timeout (exit status 1) while we look.
    log = tmp_path / "tail.log"
    tail = start_process(
        [sys.executable, "-m", "streams.cli", "tail", "--bootstrap", mtls_broker.bootstrap, "--topic", topic,
         "--from-beginning", "--json", "--max", "5", "--timeout", "6", *mtls_flags(pki)],
        env=python_env(password),
        log_path=log,
    )  # fmt: skip
    try:
        cmdline = wait_until(
            lambda: Path(f"/proc/{tail.pid}/cmdline").read_bytes().decode("utf-8", "replace"), 5, message="cmdline"
        )
        tail.wait(CLI_TIMEOUT)
    finally:
        stop_process(tail)
    output = log.read_text()
    assert tail.returncode == 1, output
    assert len([line for line in output.splitlines() if line.startswith("{")]) == 4, output
    assert str(pki.client_key) in cmdline
    assert_secret_free(pki.client_key_password, cmdline, output, result.stdout, result.stderr)


def test_sasl_credentials_never_printed(tls_broker: EmbeddedBroker, pki: Pki, tmp_path: Path) -> None:
    """The embedded broker has no SASL: the client gets as far as the SASL handshake, over TLS, and fails."""
    path = write_events(tmp_path / "events.jsonl", events(1, "sasl"))
    env = {
        "LOOPWATCH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "LOOPWATCH_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "LOOPWATCH_KAFKA_SASL_USERNAME": "svc-loopwatch",
        "LOOPWATCH_KAFKA_SASL_PASSWORD": SASL_SECRET,
        "LOOPWATCH_KAFKA_SSL_CA_LOCATION": str(pki.ca),
    }
    result = cli(["publish", str(path), "--bootstrap", tls_broker.bootstrap, "--topic", "it-tls-sasl"], env)
    assert result.returncode == 3
    # reached the broker's SASL handshake over TLS, and says so in one line
    assert "the listener does not offer SASL mechanism SCRAM-SHA-512" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert_secret_free(SASL_SECRET, result.stdout, result.stderr)
    # a worker with the same settings stops at its pre-flight check: its whole log is free of the password too
    worker = cli(["worker", "--bootstrap", tls_broker.bootstrap, "--embedded", "--metrics-port", "0", "--web-port", "0",
                  "--data-dir", str(tmp_path / "data"), "--group", "it-tls-sasl"], env)  # fmt: skip
    assert worker.returncode == 3, worker.stderr
    assert worker.stderr.startswith("loopwatch worker: the listener does not offer SASL mechanism SCRAM-SHA-512")
    assert_secret_free(SASL_SECRET, worker.stdout, worker.stderr)


def test_worker_over_mutual_tls_publishes_replay_verdicts(
    mtls_broker: EmbeddedBroker, pki: Pki, tmp_path: Path
) -> None:
    scenario = load_scenarios()[3]  # generic repeat: a warning, then a block
    names = new_names("mtls", partitions=2)
    config, path = write_inputs(scenario, tmp_path, wire_events(scenario, session=f"sess-{names.prefix}"))
    want = [
        json.loads(line) for line in cli(["replay", "--events", str(path), "--config", str(config)]).stdout.splitlines()
    ]
    assert want, "the scenario must produce verdicts"
    key_password = tmp_path / "key-password"
    key_password.write_text(pki.client_key_password + "\n", encoding="utf-8")
    env = {"LOOPWATCH_KAFKA_SSL_KEY_PASSWORD_FILE": str(key_password)}
    worker = WorkerProcess(mtls_broker.bootstrap, names, tmp_path, config=config, extra=mtls_flags(pki))
    worker.proc = start_process(worker.cmd, env=python_env(env), log_path=worker.log_path)
    try:
        worker.wait_ready()
        flags = mtls_flags(pki)
        sent = cli(["publish", str(path), "--bootstrap", mtls_broker.bootstrap, "--topic", names.events,
                    "--partitions", str(names.partitions), *flags], env)  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        tail = cli(["tail", "--bootstrap", mtls_broker.bootstrap, "--topic", names.verdicts, "--from-beginning",
                    "--json", "--max", str(len(want)), "--timeout", "60", *flags], env)  # fmt: skip
        assert tail.returncode == 0, tail.stderr + worker.log()[-3000:]
        got = [json.loads(line) for line in tail.stdout.splitlines()]
        assert [v["verdict_id"] for v in got] == [v["verdict_id"] for v in want]
    finally:
        worker.stop()
    log = worker.log()
    assert "kafka SSL" in log  # the banner names the protocol and files, nothing secret
    assert_secret_free(pki.client_key_password, log, " ".join(worker.cmd))
    worker.assert_no_errors()


def test_broker_command_serves_tls_and_creates_topics_over_it(pki: Pki, tmp_path: Path) -> None:
    import asyncio

    from streams.kafka.client import partition_counts
    from streams.kafka.security import KafkaSecurity
    from tests.support.procs import free_port

    port = free_port()
    log = tmp_path / "broker.out"
    proc = start_process(
        [sys.executable, "-m", "streams.cli", "broker", "--port", str(port), "--log-file", str(tmp_path / "tansu.log"),
         "--cert", str(pki.server_cert), "--key", str(pki.server_key), "--topic", "it-tls-cmd:3"],
        env=python_env(),
        log_path=log,
    )  # fmt: skip
    try:
        wait_until(lambda: "broker ready on" in log.read_text() or proc.poll() is not None, 30, message="broker")
        assert proc.poll() is None, log.read_text()
        assert f"broker ready on 127.0.0.1:{port} TLS" in log.read_text()
        security = KafkaSecurity(security_protocol="SSL", ssl_cafile=str(pki.ca))
        counts = asyncio.run(partition_counts(f"127.0.0.1:{port}", timeout=10, security=security))
        assert counts.get("it-tls-cmd") == 3
    finally:
        assert stop_process(proc, 15) == 0, log.read_text()
