"""What-if reports as an aligned terminal table and as one self-contained HTML file (inline CSS and SVG)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from typing import Final

from streams.whatif.analysis import DECISIONS, Comparison, RunChange, Tally
from streams.whatif.charts import Series, line_chart
from streams.whatif.report import ConfigInfo, Report
from streams.whatif.sweep import SweepResult

CONFIG_COLORS = {"current": "#1f77b4", "candidate": "#d62728"}
DECISION_COLORS = {"warning": "#e69f00", "block": "#d62728", "abort": "#6a3d9a"}
_SHORT = {"warning": "WARN", "block": "BLOCK", "abort": "ABORT"}


def _cell(current: int, candidate: int) -> str:
    return str(current) if current == candidate else f"{current}→{candidate}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right_from: int) -> list[str]:
    """Aligned columns; columns from ``right_from`` on are right-aligned (numbers)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if i >= right_from else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _tally_cells(current: Tally, candidate: Tally) -> list[str]:
    cells = []
    for decision in DECISIONS:
        cells.append(_cell(current.runs[decision], candidate.runs[decision]))
        cells.append(_cell(current.calls[decision], candidate.calls[decision]))
    return cells


_TALLY_HEADERS = [f"{_SHORT[d]} {what}" for d in DECISIONS for what in ("RUNS", "CALLS")]


def _describe_config(info: ConfigInfo) -> str:
    return f"{info.label} (config {info.config_hash[:12]}; {info.profiles})"


def _run_title(rc: RunChange) -> str:
    run = rc.run
    if run.run_id is None or not run.run_id.strip():  # the session is the scope key
        return f"session {run.session_id} (no run id; agent {run.agent_id}, gateway {run.gateway_id})"
    return f"run {run.run_id} (session {run.session_id}, agent {run.agent_id}, gateway {run.gateway_id})"


def _tally_delta(current: Tally, candidate: Tally) -> str:
    parts = []
    for decision in DECISIONS:
        a, b = current.calls[decision], candidate.calls[decision]
        if a != b:
            parts.append(f"{decision} calls {a}→{b}")
    return ", ".join(parts) or "same counts, different decisions"


#: Changed runs the terminal report lists (``whatif --limit``); the JSON lists all of them.
TABLE_LIMIT: Final = 20


def render_table(report: Report, *, limit: int = TABLE_LIMIT, changes_per_run: int = 10) -> str:
    """The terminal report: inputs, per-detector/agent/tool table, changed runs, sweep table."""
    counting = "every decision" if report.include_all else "published decisions"
    lines = [
        "loopwatch what-if",
        f"  events     {report.source}: {report.events} events, {report.invalid} invalid skipped, "
        f"{report.runs} runs; counting {counting}",
        f"  current    {_describe_config(report.current)}",
    ]
    if report.candidate is not None:
        lines.append(f"  candidate  {_describe_config(report.candidate)}")
    comparison = report.comparison
    if comparison is not None:
        lines += ["", "Per detector, agent and tool (current→candidate where they differ):"]
        rows = [[r.detector, r.agent_id, r.tool, *_tally_cells(r.current, r.candidate)] for r in comparison.rows]
        rows.append(["TOTAL", "", "", *_tally_cells(*comparison.totals)])
        lines += _table(["DETECTOR", "AGENT", "TOOL", *_TALLY_HEADERS], rows, right_from=3)
        lines += ["", "Loop cost (model usage since each loop's first decision; savings are estimates):"]
        for name, totals in zip(("current", "candidate"), comparison.costs, strict=True):
            lines.append(f"  {name:<10} {totals.text()}")
        lines += _not_applied_lines(comparison)
        changed = comparison.changed_runs
        lines += ["", f"Runs that change: {len(changed)}"]
        for rc in changed[:limit]:
            lines.append(f"  {_run_title(rc)}: {_tally_delta(rc.current, rc.candidate)}")
            for ch in rc.changes[:changes_per_run]:
                lines.append(f"    {ch.describe(show_published=comparison.include_all)}")
            if len(rc.changes) > changes_per_run:
                lines.append(f"    … and {len(rc.changes) - changes_per_run} more changes")
        if len(changed) > limit:
            lines.append(f"  … and {len(changed) - limit} more runs (--limit, or --format json for all)")
    if report.sweep is not None:
        lines += ["", *_sweep_table(report.sweep)]
    return "\n".join(lines) + "\n"


def _not_applied(comparison: Comparison) -> list[tuple[str, str]]:
    """(config, what it could not apply) for each config that skips events (the worker dead-letters them)."""
    return [
        (name, text)
        for name, evaluation in (("current", comparison.current), ("candidate", comparison.candidate))
        if (text := evaluation.not_applied_text())
    ]


def _not_applied_lines(comparison: Comparison) -> list[str]:
    said = [f"  {name:<10} {text}" for name, text in _not_applied(comparison)]
    return ["", "Events not applied (--format json lists them):", *said] if said else []


def _resolved_triplet(resolved: dict[str, int]) -> str:
    return f"{resolved['warningThreshold']}/{resolved['criticalThreshold']}/{resolved['globalCircuitBreakerThreshold']}"


def _sweep_rows(sweep: SweepResult) -> tuple[bool, list[list[str]]]:
    """The sweep's cells per value, with a not-applied column only when some value skips events (and whether)."""
    skips = any(p.not_applied for p in sweep.points)
    rows = []
    for p in sweep.points:
        cells = [str(p.value), _resolved_triplet(p.resolved)]
        for decision in DECISIONS:
            cells += [str(p.tally.runs[decision]), str(p.tally.calls[decision])]
        rows.append(cells + ([str(p.not_applied)] if skips else []))
    return skips, rows


def _sweep_table(sweep: SweepResult) -> list[str]:
    skips, rows = _sweep_rows(sweep)
    title = (
        f"Sweep of {sweep.key} on the current config (current value {sweep.current_value}; "
        "W/C/G = resolved warning/critical/global thresholds"
        + ("; NOT APPLIED = events the worker would dead-letter" if skips else "")
        + "):"
    )
    headers = ["VALUE", "W/C/G", *_TALLY_HEADERS, *(["NOT APPLIED"] if skips else [])]
    return [title, *_table(headers, rows, right_from=0)]


# --- HTML --------------------------------------------------------------------------------------------------

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; color: #222; margin: 24px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #555; margin: 2px 0; } code { font-size: 13px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: #fff; border: 1px solid #ddd; border-radius: 4px; }
svg .grid { stroke: #eee; } svg .axis { stroke: #888; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
svg .chart-title { font-size: 13px; font-weight: 600; fill: #222; }
svg .axis-label { font-size: 11px; fill: #666; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.changed { background: #fff3cd; font-weight: 600; }
ul.changes { margin: 2px 0 10px; } .note { color: #666; }
"""


def _time_label(start_ms: float) -> str:
    """The tick's UTC time of day; the raw milliseconds where no calendar holds them (a gateway sending
    microseconds lands past the year 9999), as the other commands print such a ``ts``."""
    try:
        return datetime.fromtimestamp(start_ms / 1000, tz=UTC).strftime("%H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return f"{start_ms:.0f}"


def _timeline_html(comparison: Comparison) -> str:
    tl = comparison.timeline
    if not tl.series:
        return '<p class="note">Neither config produced a verdict on these events.</p>'
    x = [tl.start_ms + (i + 0.5) * tl.width_ms for i in range(tl.buckets)]
    charts = []
    for detector, per_config in tl.series.items():
        series = [
            Series(name, name, per_config[name], CONFIG_COLORS[name], dashed=name == "candidate")
            for name in ("current", "candidate")
        ]
        charts.append(
            line_chart(
                css_class="chart-time",
                title=detector,
                x=x,
                series=series,
                x_label=f"event time (UTC), buckets of {tl.width_ms / 1000:g} s",
                y_label="verdicts",
                x_tick_label=_time_label,
                attrs=f' data-detector="{escape(detector)}"',
            )
        )
    return f'<div class="charts">{"".join(charts)}</div>'


def _sweep_html(sweep: SweepResult) -> str:
    x = [float(p.value) for p in sweep.points]
    series = [
        Series(d, f"runs with {d}", [float(p.tally.runs[d]) for p in sweep.points], DECISION_COLORS[d])
        for d in DECISIONS
    ]
    chart = line_chart(
        css_class="chart-sweep",
        title=f"Runs flagged versus {sweep.key}",
        x=x,
        series=series,
        x_label=sweep.key,
        y_label="runs flagged",
        marker_x=float(sweep.current_value),
        marker_label=f"current {sweep.current_value}",
        points=True,
        attrs=f' data-key="{escape(sweep.key)}"',
    )
    skips, rows = _sweep_rows(sweep)
    headers = ["value", "W/C/G", *_TALLY_HEADERS, *(["not applied"] if skips else [])]
    head = "".join(f'<th class="num">{escape(h)}</th>' for h in headers)
    body = ["<tr>" + "".join(f'<td class="num">{escape(c)}</td>' for c in cells) + "</tr>" for cells in rows]
    table = f'<table class="sweep"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="charts">{chart}</div>{table}'


def _summary_html(comparison: Comparison) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("detector", "agent", "tool"))
    head += "".join(f'<th class="num">{escape(h.lower())}</th>' for h in _TALLY_HEADERS)
    rows = []
    all_rows = [(r.detector, r.agent_id, r.tool, r.current, r.candidate) for r in comparison.rows]
    all_rows.append(("total", "", "", *comparison.totals))
    for detector, agent, tool, cur, cand in all_rows:
        cells = [f"<td>{escape(v)}</td>" for v in (detector, agent, tool)]
        for d in DECISIONS:
            for a, b in ((cur.runs[d], cand.runs[d]), (cur.calls[d], cand.calls[d])):
                cls = "num changed" if a != b else "num"
                cells.append(f'<td class="{cls}">{escape(_cell(a, b))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _changes_html(comparison: Comparison, limit: int) -> str:
    changed = comparison.changed_runs
    if not changed:
        return '<p class="note">No run changes.</p>'
    items = []
    for rc in changed[:limit]:
        lis = "".join(f"<li>{escape(ch.describe(show_published=comparison.include_all))}</li>" for ch in rc.changes)
        delta = escape(_tally_delta(rc.current, rc.candidate))
        items.append(f'<li class="run"><b>{escape(_run_title(rc))}</b>: {delta}<ul class="changes">{lis}</ul></li>')
    more = (
        f'<p class="note">… and {len(changed) - limit} more runs (JSON output lists all).</p>'
        if len(changed) > limit
        else ""
    )
    return f'<ul class="runs">{"".join(items)}</ul>{more}'


def render_html(report: Report, *, limit: int = 200) -> str:
    """One self-contained HTML document: no scripts, no external resources."""
    counting = "every decision" if report.include_all else "published decisions"
    meta = [
        f"Events: <code>{escape(report.source)}</code> — {report.events} events, {report.invalid} invalid "
        f"skipped, {report.runs} runs; counting {counting}.",
        f"Current config: <code>{escape(_describe_config(report.current))}</code>",
    ]
    if report.candidate is not None:
        meta.append(f"Candidate config: <code>{escape(_describe_config(report.candidate))}</code>")
    sections = []
    comparison = report.comparison
    if comparison is not None:
        meta += [escape(f"{name:<10} {text}") for name, text in _not_applied(comparison)]
        sections.append(
            '<section id="timeline"><h2>Verdicts over time per detector (current solid, candidate dashed)'
            f"</h2>{_timeline_html(comparison)}</section>"
        )
    if report.sweep is not None:
        sections.append(
            f'<section id="sweep"><h2>Sensitivity: runs flagged versus {escape(report.sweep.key)}</h2>'
            f"{_sweep_html(report.sweep)}</section>"
        )
    if comparison is not None:
        sections.append(
            '<section id="summary"><h2>Per detector, agent and tool (current→candidate)</h2>'
            f"{_summary_html(comparison)}</section>"
        )
        sections.append(
            f'<section id="changes"><h2>Runs that change ({len(comparison.changed_runs)})</h2>'
            f"{_changes_html(comparison, limit)}</section>"
        )
    meta_html = "".join(f'<p class="meta">{m}</p>' for m in meta)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>loopwatch what-if report</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>loopwatch what-if report</h1>{meta_html}{''.join(sections)}"
        "</body></html>\n"
    )
