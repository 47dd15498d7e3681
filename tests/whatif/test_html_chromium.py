"""The HTML report renders with its charts in a real headless Chromium (Debian chromium, chromium-driver).

Chromium is installed by ``tests/support/ensure-chromium.sh`` when missing; if it cannot be obtained the test
fails rather than skips. Two runs: ``--dump-dom`` of a copy with a measuring script appended (layout facts
from the browser: chart sizes, path lengths and boxes), and a ``--screenshot`` of the report itself whose
pixels must show the series colours.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams.config_file import LoadedConfig
from streams.decode import decode_event
from streams.simulate import simulate
from streams.whatif import IndexedEvent, build_report, parse_sweep, render_html, to_json
from tests.whatif.png import read_png

CHROMIUM = Path("/usr/bin/chromium")
ENSURE = Path(__file__).resolve().parents[1] / "support" / "ensure-chromium.sh"
RUN_TIMEOUT = 45.0

MEASURE = """
<script>
(function () {
  const charts = Array.from(document.querySelectorAll('svg.chart')).map(function (svg) {
    const box = svg.getBoundingClientRect();
    return {
      cls: svg.getAttribute('class'),
      detector: svg.getAttribute('data-detector'),
      title: svg.querySelector('title').textContent,
      width: box.width, height: box.height,
      points: svg.querySelectorAll('circle.point').length,
      series: Array.from(svg.querySelectorAll('path.series')).map(function (p) {
        const b = p.getBBox();
        return {name: p.getAttribute('data-series'), length: p.getTotalLength(), width: b.width,
                stroke: getComputedStyle(p).stroke};
      })
    };
  });
  const pre = document.createElement('pre');
  pre.id = 'measure';
  pre.textContent = JSON.stringify({title: document.title, charts: charts});
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        proc = subprocess.run(["bash", str(ENSURE)], capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0 or not CHROMIUM.exists():
            pytest.fail(f"cannot obtain Chromium via {ENSURE}: {proc.stdout[-1000:]}{proc.stderr[-2000:]}")
    return CHROMIUM


def _chromium(binary: Path, profile: Path, *args: str) -> bytes:
    """Run headless Chromium in its own process group; kill that group (by pid) on timeout or failure."""
    command = [
        str(binary),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {RUN_TIMEOUT} s: {command}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # helpers share the group; none may outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A report over simulated traffic: a candidate with other thresholds and a warningThreshold sweep."""
    events = [
        IndexedEvent(i, decode_event(v)) for i, (_, v) in enumerate(simulate(gateways=4, rate=100, duration=20, seed=3))
    ]
    current = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True}}})
    candidate = LoadedConfig.from_document(
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 6, "criticalThreshold": 12}}}
    )
    built = build_report(events, current, candidate, sweep=parse_sweep("warningThreshold=5..15:2"), source="simulated")
    page = tmp_path_factory.mktemp("html") / "report.html"
    page.write_text(render_html(built), encoding="utf-8")
    return page, to_json(built)


def test_report_renders_its_charts_in_chromium(
    chromium: Path, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, data = report
    detectors = sorted(data["timeline"]["series"])
    assert {"generic_repeat", "ping_pong", "compaction_loop_persisted"} <= set(detectors)
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = _chromium(chromium, tmp_path / "profile-dom", "--dump-dom", probe.as_uri()).decode()
    match = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.DOTALL)
    assert match, dom[-2000:]
    measured = json.loads(html.unescape(match.group(1)))
    assert measured["title"] == "loopwatch what-if report"
    charts = measured["charts"]
    time_charts = [c for c in charts if "chart-time" in c["cls"]]
    assert sorted(c["detector"] for c in time_charts) == detectors
    for chart in charts:  # 560 × 270 plus a 1 px border
        assert 560 <= chart["width"] <= 562 and 270 <= chart["height"] <= 272, chart
    for chart in time_charts:
        assert chart["title"] == chart["detector"]
        assert [s["name"] for s in chart["series"]] == ["current", "candidate"]
        for s in chart["series"]:
            assert s["length"] > 400 and s["width"] > 400, (chart["detector"], s)  # spans the plot
    (sweep,) = [c for c in charts if "chart-sweep" in c["cls"]]
    assert sweep["title"] == "Runs flagged versus warningThreshold"
    assert [s["name"] for s in sweep["series"]] == ["warning", "block", "abort"]
    assert sweep["points"] == 3 * len(data["sweep"]["points"]) == 18
    assert all(s["length"] > 400 for s in sweep["series"])
    assert {s["stroke"] for s in sweep["series"]} == {
        "rgb(230, 159, 0)",
        "rgb(214, 39, 40)",
        "rgb(106, 61, 154)",
    }


def test_screenshot_shows_the_charts(chromium: Path, report: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    page, _ = report
    shot = tmp_path / "shot.png"
    _chromium(chromium, tmp_path / "profile-shot", "--window-size=1200,640", f"--screenshot={shot}", page.as_uri())
    image = read_png(shot.read_bytes())
    assert (image.width, image.height) == (1200, 640)
    colours = Counter(image.pixels())
    white = colours[(255, 255, 255)]
    assert white < 0.97 * image.width * image.height  # not blank
    # The first row of timeline charts is in view: both series colours are drawn (current, candidate).
    assert colours[(31, 119, 180)] > 200, colours.most_common(10)
    assert colours[(214, 39, 40)] > 200, colours.most_common(10)
