"""Every relative link and image in the README and docs/ points at a file of this repository.

Links are resolved from the file that holds them, as a Markdown renderer does; two had gone stale when the
performance figures moved from the README to docs/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(path: Path) -> list[str]:
    targets = [m.group(1).split("#", 1)[0] for m in _LINK.finditer(path.read_text(encoding="utf-8"))]
    return [t for t in targets if t and not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    missing = [t for t in relative_links(doc) if not (doc.parent / t).exists()]
    assert not missing, f"{doc.relative_to(REPO)} links to missing files: {missing}"


def test_the_check_sees_links() -> None:
    assert "docs/performance.md" in relative_links(REPO / "README.md")
