"""Runs the bridge plugin's Node test suite (``node --test deploy/openclaw-plugin/test/*.test.mjs``) under pytest.

The Node tests cover the hashing vectors, buffering while the broker is down, the enforcement mapping and the
hook handlers; ``make test`` runs them through this wrapper.
"""

from __future__ import annotations

import subprocess

from tests.openclaw.conftest import PLUGIN_DIR


def test_node_test_suite_passes(node: str) -> None:
    # The files by name and the TAP reporter by flag: Node 24 refuses a directory here and reports to a pipe
    # in its "spec" format unless told (Node 20 took both as defaults).
    files = sorted(str(path.relative_to(PLUGIN_DIR)) for path in (PLUGIN_DIR / "test").glob("*.test.mjs"))
    assert files
    done = subprocess.run(
        [node, "--test", "--test-reporter=tap", *files],
        cwd=PLUGIN_DIR,
        capture_output=True,
        text=True,
        timeout=240,
    )
    summary = [line for line in done.stdout.splitlines() if line.startswith("# ")]
    assert done.returncode == 0, "node --test failed:\n" + done.stdout[-20000:] + "\n" + done.stderr[-5000:]
    assert any(line.startswith("# pass ") and line != "# pass 0" for line in summary), summary
    assert "# fail 0" in summary, summary
