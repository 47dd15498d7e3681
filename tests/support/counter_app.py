"""A minimal Faust app proving table recovery on the embedded broker: a per-key counter.

Run as ``python -m faust -A tests.support.counter_app worker -l warn --web-port PORT --web-bind 127.0.0.1``.
Configured by environment (read at import):

- ``COUNTER_BOOTSTRAP`` broker ``host:port`` (default 127.0.0.1:9092)
- ``COUNTER_APP_ID`` app / group id; topics are ``<id>-in``, ``<id>-out``, ``<id>-counts-changelog``
- ``COUNTER_PARTITIONS`` partitions of every topic (default 4)
- ``COUNTER_STORE`` table store URL, ``rocksdb://`` (default) or ``memory://``
- ``COUNTER_DATADIR`` Faust data directory (RocksDB files); one per worker
- ``COUNTER_COMPAT`` ``all`` remedies (default), ``no-end-offsets`` / ``no-rewind`` /
  ``no-pause-changelogs`` (all but that one, to show what it guards) or ``none``
- ``COUNTER_LINGER`` producer linger in seconds (default 0.05): batches changelog writes, as under load
- ``COUNTER_STATUS`` file receiving one JSON line per completed rebalance: pid, time, assigned partitions
- ``COUNTER_FETCHING`` file receiving, every 0.2 s, one JSON line of the changelog partitions assigned, active in
  Faust and paused in aiokafka (what the consumer fetches)
- ``COUNTER_TRACE`` file receiving one line per event seen: partition, offset, key, state before, time
  (for diagnosing lost or repeated events)

Each event on ``<id>-in`` (key: the counter name) increments that key's counter once: the table value
remembers the source offset last applied, so a redelivered event is skipped (at-least-once input, exactly-once
state, the way loopwatch's RunState works). The new count goes to ``<id>-out`` as ASCII text.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import faust

from streams.kafka.compat import apply_kafka_compat, faust_settings_for

BOOTSTRAP = os.environ.get("COUNTER_BOOTSTRAP", "127.0.0.1:9092")
APP_ID = os.environ.get("COUNTER_APP_ID", "counter")
PARTITIONS = int(os.environ.get("COUNTER_PARTITIONS", "4"))
STORE = os.environ.get("COUNTER_STORE", "rocksdb://")
DATADIR = os.environ.get("COUNTER_DATADIR", f"/tmp/{APP_ID}-data")
COMPAT = os.environ.get("COUNTER_COMPAT", "all")
STATUS = os.environ.get("COUNTER_STATUS")
FETCHING = os.environ.get("COUNTER_FETCHING")
TRACE = open(os.environ["COUNTER_TRACE"], "a") if os.environ.get("COUNTER_TRACE") else None  # noqa: SIM115
LINGER = float(os.environ.get("COUNTER_LINGER", "0.05"))


def topics_for(app_id: str, partitions: int) -> dict[str, int]:
    """Every topic the app uses, with partition counts, for explicit creation before a worker starts."""
    return {
        f"{app_id}-in": partitions,
        f"{app_id}-out": partitions,
        f"{app_id}-counts-changelog": partitions,
        f"{app_id}-__assignor-__leader": 1,
    }


app = faust.App(
    APP_ID,
    **faust_settings_for(BOOTSTRAP, embedded=True),
    store=STORE,
    datadir=DATADIR,
    topic_partitions=PARTITIONS,
    topic_allow_declare=True,
    web_bind="127.0.0.1",
    web_host="127.0.0.1",
    key_serializer="raw",
    value_serializer="raw",
    producer_linger=LINGER,
)
if COMPAT != "none":
    apply_kafka_compat(
        app,
        fix_end_offsets=COMPAT != "no-end-offsets",
        rewind_uncommitted=COMPAT != "no-rewind",
        pause_changelogs=COMPAT != "no-pause-changelogs",
    )

in_topic = app.topic(f"{APP_ID}-in", partitions=PARTITIONS, key_type=bytes, value_type=bytes)
out_topic = app.topic(f"{APP_ID}-out", partitions=PARTITIONS, key_type=bytes, value_type=bytes)
counts = app.Table(
    "counts",
    default=None,
    partitions=PARTITIONS,
    # JSON keys and values: both stores give back ``str`` keys and ``dict`` values after recovery.
    schema=faust.Schema(key_serializer="json", value_serializer="json"),
)


@app.agent(in_topic)
async def count(stream: Any) -> None:
    async for event in stream.events():
        key = event.key.decode()
        offset = event.message.offset
        state = counts.get(key) or {"n": 0, "off": -1}
        if TRACE:
            TRACE.write(f"{event.message.partition} {offset} {key} {state['n']} {state['off']} {time.time():.3f}\n")
            TRACE.flush()
        if offset <= state["off"]:
            continue  # already applied before a crash or rebalance
        state = {"n": state["n"] + 1, "off": offset}
        counts[key] = state
        await out_topic.send(key=event.key, value=str(state["n"]).encode(), partition=event.message.partition)


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # mode types receivers narrowly
async def _report_ready(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
    if not STATUS:
        return
    assigned = sorted(tp.partition for tp in app.consumer.assignment() if tp.topic == in_topic.get_topic_name())
    line = {"pid": os.getpid(), "time": time.time(), "assigned": assigned}
    with open(STATUS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


@app.timer(0.2)
async def _report_fetching() -> None:
    thread = getattr(app.consumer, "_thread", None)
    aiokafka = getattr(thread, "_consumer", None)
    if not FETCHING or aiokafka is None:
        return
    changelog = counts.changelog_topic.get_topic_name()
    paused = await thread.call_thread(aiokafka.paused)  # on the consumer thread, like every aiokafka call

    def ours(tps: Any) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == changelog)

    active = app.consumer._get_active_partitions()
    line = {"time": time.time(), "assigned": ours(app.consumer.assignment()), "active": ours(active)}
    line["paused"] = ours(paused)
    with open(FETCHING, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    app.main()
