"""Embedded-broker remedy: short fetch waits, so events reach the worker in milliseconds, not seconds.

The embedded broker (Tansu 0.6.0) holds a Fetch for about the full ``fetch.max.wait.ms`` even when records
arrive meanwhile (real Kafka answers as soon as ``fetch.min.bytes`` are there). Faust fixes its consumer's
wait at 1500 ms, which made the event-to-verdict latency about a second on the embedded broker. With
``--embedded`` the worker's consumer waits at most :data:`FETCH_MAX_WAIT_MS` per fetch; on real Kafka the
setting stays Faust's (a long wait costs nothing there).

Why 10 ms, though a longer wait costs the broker less: every Fetch makes Tansu's memory storage list every
record batch stored in each requested partition, so its CPU grows with the fetch rate times the batches
stored. 50 ms cut a bulk worker's fetch rate and, over 210 s soaks at 800 events/s, the verdict p99 from
about 1.4 s to 0.44 s; but it made the broker's group that never forms again (docs/embedded-broker.md)
frequent: chaos seed 1 hit it in 3 of 6 runs with 50 ms and in none of 5 with 10 ms. The price of 10 ms: an
idle worker polls five times as often (about 150-220 ms of CPU per second against 45-60 with 50 ms, in
bench/worker_bench.py) and the p99 at 1,000 events/s is higher (about 90-115 ms against 67-69).

Installed through the transport's consumer class (the same seam :mod:`streams.kafka.compat` uses), for this
app only, so it sits beside the other broker remedies (:mod:`streams.kafka.compat`) but is not one of them:
it is installed only with ``--embedded``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from streams.kafka.compat import CompatConsumer, CompatConsumerThread

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS: Final = 10


class ShortWaitConsumerThread(CompatConsumerThread):
    """The compat consumer thread whose aiokafka consumer waits at most ``FETCH_MAX_WAIT_MS`` per fetch."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        if hasattr(consumer, "_fetch_max_wait_ms"):
            consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read when the consumer starts its fetcher
        else:  # pragma: no cover - aiokafka internals changed
            log.warning("cannot shorten the fetch wait: aiokafka internals changed")
        return consumer


class ShortWaitConsumer(CompatConsumer):
    def _new_consumer_thread(self) -> ShortWaitConsumerThread:
        return ShortWaitConsumerThread(self, loop=self.loop, beacon=self.beacon)


def shorten_fetch_wait(app: Any) -> None:
    """Install on a Faust app after :func:`streams.kafka.compat.apply_kafka_compat`, before it starts."""
    transport = app.transport
    transport.Consumer = ShortWaitConsumer


__all__ = [
    "FETCH_MAX_WAIT_MS",
    "shorten_fetch_wait",
]
