"""The bridge plugin against a real (embedded) broker, without OpenClaw: publish, then enforce a verdict.

The real hooks publish N identical ``exec`` calls through kafkajs; every record read back from the events
topic decodes as a wire event, carries its scope key as record key (so one run sits in one partition,
in order), and is attributed to the configured gateway. Then a block verdict for one of those calls is
produced to the verdict topic (plus one for another gateway, which must be ignored) and the plugin's
background consumer makes ``before_tool_call`` block the same call signature, but not other arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import Any

import pytest

from schemas.events import ToolCallEvent, ToolResultEvent
from schemas.verdict import Verdict, verdict_id
from streams.decode import decode_event, scope_key
from streams.devbroker import EmbeddedBroker
from streams.kafka.admin import create_topics
from tests.openclaw.conftest import PLUGIN_DIR
from tests.support.kafka import TopicReader, produce_batches

pytestmark = pytest.mark.integration

EVENTS = "loopwatch.events"
VERDICTS = "loopwatch.verdicts"
N = 25


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as running:
        create_topics(running.bootstrap, {EVENTS: 3, VERDICTS: 2})
        yield running


def _reader(stream: Any, queue: Queue[dict[str, Any]]) -> None:
    for line in stream:
        line = line.strip()
        if line:
            queue.put(json.loads(line))


def _next_phase(queue: Queue[dict[str, Any]], phase: str, timeout: float) -> dict[str, Any]:
    while True:
        try:
            message = queue.get(timeout=timeout)
        except Empty:
            raise TimeoutError(f"no {phase!r} from the node script within {timeout}s") from None
        if message.get("phase") == phase:
            return message


def _verdict(event: ToolCallEvent, gateway: str) -> bytes:
    record = Verdict(
        verdict_id=verdict_id(gateway, event.event_id, "block", "generic_repeat"),
        decision="block",
        detector="generic_repeat",
        count=20,
        threshold=20,
        gateway_id=gateway,
        agent_id=event.agent_id,
        session_id=event.session_id,
        run_id=event.run_id,
        tool=event.tool,
        call_id=event.call_id,
        event_id=event.event_id,
        message="CRITICAL: exec called 20 times with identical arguments and identical outcomes.",
        config_hash="test",
    )
    return record.model_dump_json().encode()


def test_publish_and_enforce_through_a_real_broker(node: str, broker: EmbeddedBroker) -> None:
    proc = subprocess.Popen(
        [node, "scripts/kafka-roundtrip.mjs", broker.bootstrap, EVENTS, VERDICTS, str(N)],
        cwd=PLUGIN_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    queue: Queue[dict[str, Any]] = Queue()
    threading.Thread(target=_reader, args=(proc.stdout, queue), daemon=True).start()
    try:
        published = _next_phase(queue, "published", 60)
        assert published["stats"]["publisher"]["published"] == 2 * N, published
        assert published["stats"]["publisher"]["dropped"] == 0

        with TopicReader(broker.bootstrap, EVENTS, 3) as reader:
            records = reader.poll_until(lambda r: len(r) >= 2 * N, 30, "all events")
        assert len(records) == 2 * N
        events = [decode_event(record.value or b"") for record in records]
        assert {record.partition for record in records} == {records[0].partition}, "one run, one partition"
        for record, event in zip(records, events, strict=True):
            assert record.key == scope_key(event).encode() == b"run-it"
            assert event.gateway_id == "gw-it"
        in_order = sorted(zip(records, events, strict=True), key=lambda pair: pair[0].offset)
        kinds = [type(event) for _, event in in_order]
        assert kinds == [ToolCallEvent, ToolResultEvent] * N, "each call's tool_call precedes its tool_result"
        tool_events = [e for _, e in in_order if isinstance(e, ToolCallEvent | ToolResultEvent)]
        assert [e.call_id for e in tool_events] == [f"call-{i // 2}" for i in range(2 * N)]
        hashes = {(e.args_hash, getattr(e, "result_hash", None)) for e in tool_events}
        assert len(hashes) == 2, "identical calls: one args hash, one result hash"

        target = next(e for _, e in in_order if isinstance(e, ToolCallEvent) and e.call_id == "call-20")
        assert isinstance(target, ToolCallEvent)
        produce_batches(
            broker.bootstrap,
            VERDICTS,
            0,
            [(b"run-it", _verdict(target, "gw-other")), (b"run-it", _verdict(target, "gw-it"))],
        )
        assert proc.stdin is not None
        proc.stdin.write("verdict-sent\n")
        proc.stdin.flush()
        enforced = _next_phase(queue, "enforced", 90)
        assert enforced["blocked"] == {
            "block": True,
            "blockReason": "CRITICAL: exec called 20 times with identical arguments and identical outcomes.",
        }, enforced
        assert enforced["other"] is None, "other arguments are not blocked"
        assert enforced["stats"]["enforcement"]["blocks"] == 1
        _next_phase(queue, "stopped", 30)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        assert "Unhandled" not in stderr, stderr
