"""Kafka administration without a client's state: the raw readiness probe, explicit topic creation, and
telling the embedded broker from a real cluster (by the cluster id it is started with).

Topics are always created explicitly with their partition counts: a broker that auto-creates an unknown topic
picks its own default (4 on the embedded broker), which would break the co-partitioning of the events topic and
the worker's changelog.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from streams.kafka.security import KafkaSecurity

__all__ = [
    "EMBEDDED_CLUSTER_ID",
    "TopicError",
    "TopicMismatchError",
    "api_versions_request",
    "create_topics",
    "ensure_topics",
    "is_embedded_broker",
    "kafka_ready",
    "read_response",
]

#: The cluster id ``loopwatch broker`` starts Tansu with: how a worker knows it talks to the embedded broker.
EMBEDDED_CLUSTER_ID: Final = "loopwatch-embedded"

_ERR_TOPIC_ALREADY_EXISTS = 36


class TopicError(RuntimeError):
    """The broker refused to create a topic."""


class TopicMismatchError(TopicError):
    """A topic exists with a different partition count than required (co-partitioning would break)."""


# --- readiness probe: raw Kafka requests, so no event loop and no client library state is needed ---------


def _request(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"loopwatch-probe"
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def _roundtrip(sock: socket.socket, request: bytes, correlation_id: int) -> bytes:
    sock.sendall(request)
    return read_response(sock, correlation_id)


def api_versions_request() -> bytes:
    """An ApiVersions v0 request (correlation id 1): what every Kafka listener answers before anything else."""
    return _request(18, 0, 1, b"")


def read_response(sock: socket.socket, correlation_id: int = 1) -> bytes:
    """The body of the next response on ``sock``; ``ConnectionError`` if it is closed or out of step."""
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    response = _recv_exact(sock, size)
    (got,) = struct.unpack(">i", response[:4])
    if got != correlation_id:
        raise ConnectionError(f"unexpected correlation id {got}")
    return response[4:]


def kafka_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the broker answers ApiVersions without error and Metadata lists at least one broker.

    Metadata is what every client asks first; a listening socket alone is not enough.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            body = _roundtrip(sock, api_versions_request(), 1)
            (error_code,) = struct.unpack(">h", body[:2])
            if error_code != 0:
                return False
            body = _roundtrip(sock, _request(3, 0, 2, struct.pack(">i", 0)), 2)  # Metadata v0, all topics
            (brokers,) = struct.unpack(">i", body[:4])
            return bool(brokers >= 1)
    except (OSError, struct.error):
        return False


# --- topics -----------------------------------------------------------------------------------------------


async def ensure_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    *,
    replication: int = 1,
    configs: Mapping[str, Mapping[str, str]] | None = None,
    timeout: float = 15.0,
    security: KafkaSecurity | None = None,
) -> dict[str, bool]:
    """Create each topic with its partition count unless it exists; returns ``{name: created}``.

    Explicit creation matters: Tansu auto-creates unknown topics with 4 partitions, and source, repartition
    and changelog topics must agree on partition counts. An existing topic with a different count raises
    :class:`TopicMismatchError` instead of being silently used.
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    if not topics:
        return {}
    if any(partitions < 1 for partitions in topics.values()):
        raise ValueError(f"every topic needs at least one partition: {dict(topics)}")  # Tansu would create it empty
    auth = security.aiokafka_kwargs() if security is not None else {}
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), client_id="loopwatch-admin", **auth
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        new = [
            NewTopic(name, partitions, replication, topic_configs=dict((configs or {}).get(name, {})))
            for name, partitions in topics.items()
        ]
        response = await asyncio.wait_for(admin.create_topics(new, timeout_ms=int(timeout * 1000)), timeout)
        created: dict[str, bool] = {}
        for entry in response.topic_errors:
            name, code = entry[0], entry[1]
            message = entry[2] if len(entry) > 2 else None
            if code == 0:
                created[name] = True
            elif code == _ERR_TOPIC_ALREADY_EXISTS:
                created[name] = False
            else:
                raise TopicError(f"creating topic {name!r} failed: error {code} {message or ''}".strip())
        existing = [name for name, was_created in created.items() if not was_created]
        if existing:
            described = await asyncio.wait_for(admin.describe_topics(existing), timeout)
            for topic in described:
                have = len(topic["partitions"])
                want = topics[topic["topic"]]
                if have != want:
                    raise TopicMismatchError(
                        f"topic {topic['topic']!r} has {have} partitions, {want} required; "
                        "delete it or use a matching partition count"
                    )
        return created
    finally:
        await admin.close()


def create_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    *,
    replication: int = 1,
    configs: Mapping[str, Mapping[str, str]] | None = None,
    timeout: float = 15.0,
    security: KafkaSecurity | None = None,
) -> dict[str, bool]:
    """Blocking :func:`ensure_topics` for scripts, CLIs and tests (not from inside a running event loop)."""
    return asyncio.run(
        ensure_topics(bootstrap, topics, replication=replication, configs=configs, timeout=timeout, security=security)
    )


async def is_embedded_broker(bootstrap: str, security: KafkaSecurity | None = None, timeout: float = 5.0) -> bool:
    """Whether the cluster at ``bootstrap`` reports :data:`EMBEDDED_CLUSTER_ID` in its metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    from streams.kafka.client import started

    auth = security.aiokafka_kwargs() if security is not None else {}
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), client_id="loopwatch-admin", **auth
    )
    async with started(admin, timeout):
        cluster: dict[str, Any] = await asyncio.wait_for(admin.describe_cluster(), timeout)
    return cluster.get("cluster_id") == EMBEDDED_CLUSTER_ID
