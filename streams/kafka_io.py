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


async def partition_counts(bootstrap: str, *, timeout: float = 15.0) -> dict[str, int]:
    """``{topic: partitions}`` of every topic in the cluster (never creates one)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), client_id="loopwatch-cli"
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
