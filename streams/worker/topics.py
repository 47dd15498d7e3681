"""The worker's topic declarations: raw bytes in and out, because the worker decodes and validates itself."""

from __future__ import annotations

from typing import Any

import faust


def raw_topic(app: faust.App, name: str, partitions: int) -> Any:
    """A topic of raw bytes keys and values with ``partitions`` partitions."""
    return app.topic(
        name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw", partitions=partitions
    )
