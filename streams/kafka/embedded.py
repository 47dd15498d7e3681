"""Embedded-broker remedy: short fetch waits, so events reach the worker in milliseconds, not seconds.

The embedded broker (Tansu 0.6.0) holds a Fetch for about the full ``fetch.max.wait.ms`` even when records
arrive meanwhile (real Kafka answers as soon as ``fetch.min.bytes`` are there). Faust fixes its consumer's
wait at 1500 ms, which made the event-to-verdict latency about a second on the embedded broker. With
``--embedded`` the worker's consumer waits at most :data:`FETCH_MAX_WAIT_MS` per fetch; on real Kafka the
setting stays Faust's (a long wait costs nothing there).

Why 50 ms and not less: every Fetch makes Tansu's memory storage list every record batch stored in each
requested partition, so the broker's CPU grows with the fetch rate times the batches stored. A 10 ms wait
meant about 30 fetches/s of 13 partitions from a bulk worker at 800 events/s. Over 210 s soaks at that rate
(two runs each), 50 ms brought the verdict p99 at 140-210 s from about 1.4 s to 0.44 s and the broker's CPU
from about 35 % to 28 % of a core. Short latency runs of ``bench/worker_bench.py`` (500 and 1,000 events/s)
show no difference beyond their noise (p99 120-290 ms with either wait).

Installed through the transport's consumer class (the same seam :mod:`streams.kafka.compat` uses), for this
app only, so it sits beside the other broker remedies (:mod:`streams.kafka.compat`) but is not one of them:
it is installed only with ``--embedded``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from streams.kafka.compat import CompatConsumer, CompatConsumerThread

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS: Final = 50


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
