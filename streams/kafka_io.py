"""Small aiokafka helpers shared by the ``publish`` and ``tail`` commands (and the worker benchmark).

Topic existence is checked with an all-topics metadata request: asking for one named topic lets a broker
auto-create it (with the broker's default partition count, 4 on the embedded broker), which would break the
co-partitioning of the events topic and the worker's changelog.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from streams.decode import scope_key_of
from streams.kafka_security import KafkaSecurity


async def partition_counts(
    bootstrap: str, *, timeout: float = 15.0, security: KafkaSecurity | None = None
) -> dict[str, int]:
    """``{topic: partitions}`` of every topic in the cluster (never creates one)."""
    from aiokafka.admin import AIOKafkaAdminClient

    auth = security.aiokafka_kwargs() if security is not None else {}
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), client_id="loopwatch-cli", **auth
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        described: list[dict[str, Any]] = await asyncio.wait_for(admin.describe_topics(None), timeout)
    finally:
        await admin.close()
    return {t["topic"]: len(t["partitions"]) for t in described if not t.get("error_code")}


def scope_key_from_raw(raw: bytes) -> bytes | None:
    """The scope key of a record that may not be a valid event, when it can be derived; else None.

    Used by ``publish --raw`` so that deliberately bad records still land in their run's partition.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    session = obj.get("session_id")
    run = obj.get("run_id")
    if not isinstance(session, str) or not session:
        return None
    return scope_key_of(run if isinstance(run, str) else None, session).encode("utf-8")


def tls_handshake_problem(bootstrap: str, security: KafkaSecurity, *, timeout: float = 5.0) -> str | None:
    """Why a TLS handshake with the first bootstrap server fails (certificate, host name…), else None.

    Kafka clients report a failed handshake as "Unable to bootstrap"; this names the cause. Never raises.
    """
    import socket
    import ssl

    if not security.uses_tls:
        return None
    first = bootstrap.split(",")[0].strip()
    host, _, port_text = first.rpartition(":")
    try:
        port = int(port_text)
        context = security.ssl_context()
        assert context is not None
        with (
            socket.create_connection((host.strip("[]"), port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host.strip("[]")),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        return f"TLS handshake with {first} failed: {exc.verify_message or exc.reason}"
    except ssl.SSLError as exc:
        return f"TLS handshake with {first} failed: {exc.reason or exc}"
    except (OSError, ValueError, AssertionError) as exc:
        return f"cannot reach {first}: {getattr(exc, 'strerror', None) or exc}"


def describe_failure(exc: BaseException, bootstrap: str, security: KafkaSecurity) -> str:
    """``Type: message`` for a failed Kafka operation, with the TLS cause when there is one; secrets redacted."""
    text = f"{type(exc).__name__}: {exc}"
    if security.uses_tls and "KafkaConnectionError" in text:
        problem = tls_handshake_problem(bootstrap, security)
        if problem:
            text = f"{text} ({problem})"
    return security.redact(text)
