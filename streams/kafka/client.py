"""Small aiokafka helpers shared by the ``publish`` and ``tail`` commands (and the worker benchmark).

Topic existence is checked with an all-topics metadata request: asking for one named topic lets a broker
auto-create it (with the broker's default partition count, 4 on the embedded broker), which would break the
co-partitioning of the events topic and the worker's changelog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final

import orjson

from streams.decode import scope_key_of
from streams.errors import EXIT_UNAVAILABLE, CommandError
from streams.kafka.security import KafkaSecurity

log = logging.getLogger(__name__)


async def partition_counts(
    bootstrap: str, *, timeout: float = 15.0, security: KafkaSecurity | None = None
) -> dict[str, int]:
    """``{topic: partitions}`` of every topic in the cluster (never creates one)."""
    admin = _admin(bootstrap, timeout, security)
    async with started(admin, timeout):
        described: list[dict[str, Any]] = await asyncio.wait_for(admin.describe_topics(None), timeout)
    return {t["topic"]: len(t["partitions"]) for t in described if not t.get("error_code")}


async def broker_count(bootstrap: str, *, timeout: float = 15.0, security: KafkaSecurity | None = None) -> int:
    """Brokers in the cluster's metadata (1 for the embedded broker)."""
    admin = _admin(bootstrap, timeout, security)
    async with started(admin, timeout):
        cluster: dict[str, Any] = await asyncio.wait_for(admin.describe_cluster(), timeout)
    return len(cluster.get("brokers") or ())


async def describe_topic_configs(
    bootstrap: str, topics: Sequence[str], *, timeout: float = 15.0, security: KafkaSecurity | None = None
) -> dict[str, dict[str, str] | None]:
    """``{topic: {config: value}}`` of existing ``topics`` as the broker lists them (Tansu lists only what was
    set; Kafka lists every config), None for a topic it refused to describe (no DescribeConfigs permission)."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    if not topics:
        return {}
    admin = _admin(bootstrap, timeout, security)
    wanted = [ConfigResource(ConfigResourceType.TOPIC, name) for name in topics]
    async with started(admin, timeout):
        responses = await asyncio.wait_for(admin.describe_configs(wanted), timeout)
    configs: dict[str, dict[str, str] | None] = {}
    for response in responses:
        for resource in response.to_object()["resources"]:
            entries = {e["config_names"]: e["config_value"] for e in resource["config_entries"] or ()}
            configs[resource["resource_name"]] = None if resource["error_code"] != 0 else entries
    return configs


def _admin(bootstrap: str, timeout: float, security: KafkaSecurity | None) -> Any:
    """The commands' short-lived admin client (start it with :func:`started`)."""
    from aiokafka.admin import AIOKafkaAdminClient

    auth = security.aiokafka_kwargs() if security is not None else {}
    return AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), client_id="loopwatch-cli", **auth
    )


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


def parse_bootstrap(bootstrap: str) -> list[tuple[str, str, int]]:
    """``[(as written, host, port)]`` of a bootstrap list; ``ValueError`` says why it is not one. The one rule of
    every ``--bootstrap`` flag, ``LOOPWATCH_BOOTSTRAP`` and the pre-flight check."""
    servers = []
    entries = [part.strip() for part in bootstrap.split(",")]
    for entry in entries:
        which = "" if len(entries) == 1 else f", at {entry!r}"
        scheme, url, _ = entry.partition("://")
        if url:  # a URL's host would go to DNS and fail as if Kafka were down
            raise ValueError(f"not HOST:PORT[,HOST:PORT]{which}: Kafka addresses take no scheme, drop '{scheme}://'")
        host, sep, port_text = entry.rpartition(":")
        if not entry or not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"not HOST:PORT[,HOST:PORT]{which}")
        servers.append((entry, host.strip("[]"), int(port_text)))
    return servers


def _servers(bootstrap: str) -> list[tuple[str, str, int]]:
    """:func:`parse_bootstrap`, a malformed list a usage error (the commands' flags refuse one before)."""
    try:
        return parse_bootstrap(bootstrap)
    except ValueError as exc:
        raise CommandError("bad bootstrap address", bootstrap, str(exc)) from None


_RETRY_EVERY: Final = 0.5  # seconds between connection attempts while nothing listens


class _NotListening(CommandError):
    """The connection was refused: the one problem that waiting can cure."""


def preflight(
    bootstrap: str,
    security: KafkaSecurity,
    *,
    timeout: float = 5.0,
    wait: float = 0.0,
    waiting: Callable[[str], None] | None = None,
) -> None:
    """Check, before any Kafka client starts, that a bootstrap server answers Kafka with these settings.

    Kafka clients report a refused port, a TLS client on a plaintext listener (it waits for the rest of a
    "request" that never comes) and a plaintext client on a TLS listener (the connection is closed) alike,
    late and without the address; this names the problem within ``timeout`` seconds. While nothing listens at
    any server (a broker still starting: compose, or the quick start's second terminal) it tries again for up
    to ``wait`` seconds, calling ``waiting`` once with a line saying so; every other problem ends it at once.
    Raises :class:`CommandError` (exit status 3) with the first server's problem when no server is usable.
    """
    servers = _servers(bootstrap)
    deadline = time.monotonic() + wait
    while True:
        problem = _first_problem(servers, security, timeout)
        if problem is None:
            return
        if not isinstance(problem, _NotListening) or time.monotonic() + _RETRY_EVERY > deadline:
            raise problem
        if waiting is not None:
            waiting(f"nothing listens at {bootstrap} yet; waiting up to {wait:g} s for Kafka")
            waiting = None
        time.sleep(_RETRY_EVERY)


def kafka_problem(bootstrap: str, security: KafkaSecurity, *, timeout: float = 5.0) -> CommandError | None:
    """None while a bootstrap server answers Kafka with these settings, else the first server's problem (one try,
    no wait): how a long-running command such as ``tail`` finds out that its broker went away, which its Kafka
    client only logs, again and again."""
    return _first_problem(_servers(bootstrap), security, timeout)


def _first_problem(servers: list[tuple[str, str, int]], security: KafkaSecurity, timeout: float) -> CommandError | None:
    """None once a server answers; else the first server's problem (the others are tried in turn)."""
    first = None
    for entry, host, port in servers:
        problem = _probe(entry, host, port, security, timeout)
        if problem is None:
            return None
        first = first or problem
    return first


def _probe(entry: str, host: str, port: int, security: KafkaSecurity, timeout: float) -> CommandError | None:
    import socket
    import ssl

    from streams.kafka.admin import api_versions_request, read_response

    def unavailable(what: str, hint: str, kind: type[CommandError] = CommandError) -> CommandError:
        return kind(what, entry, hint, code=EXIT_UNAVAILABLE)

    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        return unavailable(
            "cannot connect to Kafka",
            "nothing listens there; start a broker (loopwatch broker) or point --bootstrap / LOOPWATCH_BOOTSTRAP "
            "at one",
            _NotListening,
        )
    except socket.gaierror as exc:
        return unavailable("cannot resolve the Kafka host", f"{exc.strerror}; check --bootstrap")
    except TimeoutError:
        return unavailable(f"no connection to Kafka within {timeout:g} s", "check the address and any firewall")
    except OSError as exc:
        return unavailable("cannot connect to Kafka", exc.strerror or str(exc))
    sock: socket.socket = raw
    try:
        raw.settimeout(timeout)
        if security.uses_tls:
            context = security.ssl_context()
            assert context is not None
            try:
                sock = context.wrap_socket(raw, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                return unavailable(
                    "the broker's TLS certificate is not accepted",
                    f"{exc.verify_message or exc.reason}; check --ssl-cafile (or --no-ssl-check-hostname for a "
                    "host name mismatch)",
                )
            except ssl.SSLError as exc:
                return unavailable(
                    "TLS handshake failed",
                    f"{exc.reason or exc}; is this a TLS listener? Without TLS use --security-protocol PLAINTEXT",
                )
            except TimeoutError:
                return unavailable(
                    f"no TLS handshake within {timeout:g} s",
                    "the listener does not speak TLS (a plaintext listener?); use the broker's TLS port or "
                    "--security-protocol PLAINTEXT",
                )
            except OSError:
                return unavailable(
                    "the broker closed the connection during the TLS handshake",
                    "it may want a client certificate (--ssl-certfile, --ssl-keyfile) or not speak TLS",
                )
        try:
            sock.sendall(api_versions_request())
            read_response(sock)
            if security.uses_sasl:
                sock.sendall(_sasl_handshake_request(security.sasl_mechanism or ""))
                refused = _sasl_refusal(read_response(sock, _SASL_CORRELATION), security.sasl_mechanism or "")
                if refused is not None:
                    return unavailable(*refused)
        except TimeoutError:
            return unavailable(f"no Kafka answer within {timeout:g} s", "is this a Kafka listener?")
        except (OSError, struct.error):
            if security.uses_tls:
                return unavailable(
                    "the broker closed the TLS connection",
                    "it may want a client certificate (--ssl-certfile, --ssl-keyfile)",
                )
            return unavailable(
                "the broker closed the connection without a Kafka answer",
                "the listener may expect TLS; use --security-protocol SSL (with --ssl-cafile CA)",
            )
        return None
    finally:
        sock.close()


_SASL_CORRELATION: Final = 2
_UNSUPPORTED_SASL_MECHANISM: Final = 33
_ILLEGAL_SASL_STATE: Final = 34  # Kafka's answer to a SASL handshake on a listener without SASL


def _sasl_handshake_request(mechanism: str) -> bytes:
    """A SaslHandshake v1 request: the first step of SASL, which names the mechanism the client will use."""
    from streams.kafka.admin import _request

    name = mechanism.encode("utf-8")
    return _request(17, 1, _SASL_CORRELATION, struct.pack(">h", len(name)) + name)


def _sasl_refusal(body: bytes, mechanism: str) -> tuple[str, str] | None:
    """``(what, hint)`` when the SaslHandshake answer refuses ``mechanism``; None when the listener takes it.

    Without this check aiokafka logs the refusal as a raw line and then fails with "Unable to bootstrap".
    """
    error_code, count = struct.unpack(">hi", body[:6])
    if error_code == 0:
        return None
    offered, at = [], 6
    for _ in range(max(0, count)):
        (size,) = struct.unpack(">h", body[at : at + 2])
        offered.append(body[at + 2 : at + 2 + size].decode("utf-8", "replace"))
        at += 2 + size
    others = [name for name in offered if name != mechanism]  # the embedded broker lists PLAIN, then refuses it
    if error_code == _UNSUPPORTED_SASL_MECHANISM and others:
        return (
            f"the listener does not offer SASL mechanism {mechanism}",
            f"it offers {', '.join(others)}; set --sasl-mechanism (LOOPWATCH_KAFKA_SASL_MECHANISM) to one of them",
        )
    if error_code in (_UNSUPPORTED_SASL_MECHANISM, _ILLEGAL_SASL_STATE):
        return (
            f"the listener does not offer SASL mechanism {mechanism}",
            "it refused the SASL handshake, as a listener without SASL does (the embedded broker has none); use "
            "--security-protocol PLAINTEXT (SSL on a TLS listener) or the broker's SASL listener",
        )
    return f"the SASL handshake failed (Kafka error {error_code})", f"mechanism {mechanism}; check the SASL settings"


def _described(exc: BaseException) -> str:
    """``Type: message`` once (Kafka errors often repeat their class name in the message)."""
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


def kafka_failure(exc: BaseException, action: str, bootstrap: str, security: KafkaSecurity) -> CommandError:
    """A failed Kafka operation as one error line: what was attempted, where, the client's reason; no secrets.

    Topics with the wrong partition count are a usage problem (exit 2); everything else makes Kafka
    unavailable to the command (exit 3).
    """
    from streams.kafka.admin import TopicMismatchError

    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, TopicMismatchError):
        return CommandError(action, bootstrap, security.redact(str(exc)))
    if isinstance(exc, asyncio.TimeoutError | TimeoutError) or type(exc).__name__ == "KafkaTimeoutError":
        reason = "no answer in time; the broker may be overloaded or unreachable"
    else:
        reason = _described(exc)
    return CommandError(action, bootstrap, security.redact(reason), code=EXIT_UNAVAILABLE)


@contextlib.asynccontextmanager
async def started(client: Any, timeout: float) -> AsyncIterator[Any]:
    """Start an aiokafka client and always stop (or close) it again, also when starting fails or times out."""
    try:
        await asyncio.wait_for(client.start(), timeout)
        yield client
    finally:
        stop = getattr(client, "stop", None) or client.close
        with contextlib.suppress(Exception):
            await stop_consumer(stop, client)


async def stop_consumer(stop: Callable[[], Awaitable[None]], consumer: Any) -> None:
    """Run ``stop`` (which stops ``consumer``, an ``AIOKafkaConsumer``), finishing what a fetch task's re-raised
    cancellation cut short (remedy 6 of :mod:`streams.kafka.compat`: aiokafka's ``Fetcher.close`` re-raises the
    cancellation of a fetch task sleeping out its retry backoff): the fetch tasks not reached yet, and the
    client's connections. Any client with a ``stop``/``close`` and an inner ``_client`` may pass through."""
    try:
        await stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if consumer is None or task is None or task.cancelling():
            raise  # this task is being cancelled: not the fetcher's doing
        log.info("the consumer's stop was cut short by a cancelled fetch (Kafka away); closing what it left")
        fetcher = getattr(consumer, "_fetcher", None)
        for pending in list(getattr(fetcher, "_pending_tasks", ())):
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending
        await consumer._client.close()


__all__ = [
    "broker_count",
    "describe_topic_configs",
    "kafka_failure",
    "kafka_problem",
    "parse_bootstrap",
    "partition_counts",
    "preflight",
    "scope_key_from_raw",
    "started",
    "stop_consumer",
]
