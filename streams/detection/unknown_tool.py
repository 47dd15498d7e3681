"""Which missing tool an error message names, for the unknown-tool streak.

The patterns are ASCII-case-insensitive and use JavaScript's ``\\s``, so ``re.ASCII``
keeps Python from folding non-ASCII look-alikes and the whitespace class is spelled out.
"""

from __future__ import annotations

import re
from typing import Final

from streams.detection.canonical import JS_WHITESPACE, sha256_hex

_WS: Final = "[" + JS_WHITESPACE + "]"
_QUOTE: Final = "[\"']?"  # straight quotes only: OpenClaw 2026.7.35 does not strip backticks
_NAME: Final = "([a-z0-9_.-]+)"
_FLAGS: Final = re.ASCII | re.IGNORECASE
# Names travel in state, warning keys and verdict messages; a hostile megabyte-long "name" must not.
MAX_NAME_LENGTH: Final = 128

_PATTERNS: Final = (
    re.compile("unknown tool[:" + JS_WHITESPACE + "]+" + _QUOTE + _NAME, _FLAGS),
    re.compile("tool" + _WS + "+" + _QUOTE + _NAME + _QUOTE + _WS + "+(?:not found|is not available)", _FLAGS),
)


def unknown_tool_name(message: str) -> str | None:
    """The lower-cased tool name an "unknown tool" / "tool X not found|is not available" error names."""
    if "tool" not in message.lower():  # cheap filter: both patterns need the ASCII word "tool"
        return None
    for pattern in _PATTERNS:
        match = pattern.search(message)
        if match is not None:
            name = match.group(1).lower()
            # Longer names are replaced by their digest: equal names still match, sizes stay bounded.
            return name if len(name) <= MAX_NAME_LENGTH else "sha256:" + sha256_hex(name)
    return None
