"""Development only: the embedded Tansu broker and the TLS front that lets it serve TLS.

Production connects to a real Kafka cluster; nothing outside ``loopwatch broker``, the demo and the tests
starts these.
"""

from streams.devbroker.tansu import (
    BrokerError,
    BrokerFileError,
    EmbeddedBroker,
    PortInUseError,
    cpu_seconds,
    free_port,
    terminate,
)

__all__ = [
    "BrokerError",
    "BrokerFileError",
    "EmbeddedBroker",
    "PortInUseError",
    "cpu_seconds",
    "free_port",
    "terminate",
]
