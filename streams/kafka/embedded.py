"""Embedded-broker remedy: short fetch waits, so events reach the worker in milliseconds, not seconds.

The embedded broker (Tansu 0.6.0) holds a Fetch for about the full ``fetch.max.wait.ms`` even when records
arrive meanwhile (real Kafka answers as soon as ``fetch.min.bytes`` are there). Faust fixes its consumer's
wait at 1500 ms, which made the event-to-verdict latency about a second on the embedded broker. With
``--embedded`` the worker's consumer waits at most :data:`FETCH_MAX_WAIT_MS` per fetch; on real Kafka the
setting stays Faust's (a long wait costs nothing there).

Why 10 ms, though a longer wait costs the broker less (every Fetch makes Tansu list every stored record batch
of each requested partition) and an idle worker less (it polls the broker every wait): 50 ms made the broker's
group that never forms again frequent in the chaos test. The measurements on both sides are in
docs/performance.md and docs/embedded-broker.md.

Installed through the transport's consumer class (the same seam :mod:`streams.kafka.compat` uses), for this
app only, so it sits beside the other broker remedies (:mod:`streams.kafka.compat`) but is not one of them:
it is installed only with ``--embedded``, which the worker turns on by itself when the broker reports the
embedded broker's cluster id (:func:`streams.kafka.admin.is_embedded_broker`).
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
