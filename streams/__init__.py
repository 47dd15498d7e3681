"""loopwatch: fleet-wide tool-call loop detection on Kafka."""

__version__ = "0.1.0"
