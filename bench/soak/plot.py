"""Plots of a soak (matplotlib, Agg backend): one overview figure plus one PNG per panel."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

Panel = Callable[[Any, list[dict[str, Any]]], None]


def _series(rows: list[dict[str, Any]], name: str) -> list[float]:
    out = []
    for r in rows:
        v = r.get(name)
        out.append(float(v) if isinstance(v, int | float) else math.nan)
    return out


def plot(rows: list[dict[str, Any]], summary: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_s"] / 60 for r in rows]
    end = summary["traffic_seconds"] / 60
    steady = summary["steady_from_s"] / 60

    def marks(ax: Any, label: bool = True) -> None:
        ax.axvline(end, color="grey", linestyle="--", linewidth=0.8)
        ax.axvspan(0, steady, color="grey", alpha=0.08)
        if label:
            ax.set_xlabel("minutes since traffic start (shaded: table filling, first TTL; dashed: traffic ends)")
        ax.grid(alpha=0.3)

    def rates(ax: Any, rows: list[dict[str, Any]]) -> None:
        ax.plot(t, _series(rows, "produce_rate"), label="produced", linewidth=1)
        ax.plot(t, _series(rows, "apply_rate"), label="applied by the worker", linewidth=1)
        ax.set_ylabel("events/s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower left", fontsize=8)
        twin = ax.twinx()
        twin.plot(t, _series(rows, "worker_cpu_pct"), linewidth=0.8, color="tab:red", label="worker CPU")
        broker = _series(rows, "broker_cpu_pct")
        if any(not math.isnan(v) for v in broker):  # not sampled by older results
            twin.plot(t, broker, linewidth=0.8, color="tab:purple", label="broker CPU")
        twin.set_ylabel("CPU % of one core", color="tab:red")
        twin.legend(loc="lower right", fontsize=8)
        twin.set_ylim(0, 105)
        ax.set_title(f"Throughput (target {summary['rate_target']:.0f} events/s), worker and broker CPU")

    def rss(ax: Any, rows: list[dict[str, Any]]) -> None:
        ax.plot(t, _series(rows, "worker_rss_mb"), label="worker RSS (VmRSS)")
        ax.plot(t, _series(rows, "store_disk_mb"), label="RocksDB files on disk", linewidth=0.8)
        trend = summary["worker_rss_mb_trend"]
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
        ax.set_title(
            f"Worker memory: last-half slope {trend.get('slope_per_min', math.nan):+.2f} MB/min "
            f"({'plateau' if trend.get('plateau') else 'no plateau'})"
        )
        ax.legend(loc="lower right", fontsize=8)

    def state(ax: Any, rows: list[dict[str, Any]]) -> None:
        ax.plot(t, _series(rows, "active_runs"), label="active runs", color="tab:blue")
        ax.set_ylabel("active runs", color="tab:blue")
        ax.set_ylim(bottom=0)
        twin = ax.twinx()
        twin.plot(t, _series(rows, "state_mb"), label="state bytes", color="tab:orange")
        twin.set_ylabel("state MB", color="tab:orange")
        twin.set_ylim(bottom=0)
        ax.set_title(f"Run table (TTL {summary['ttl_s']:g} s): {summary['distinct_runs']:,} runs in total")

    def lag(ax: Any, rows: list[dict[str, Any]]) -> None:
        ax.plot(t, _series(rows, "lag_gauge"), label="loopwatch_consumer_lag (sum)")
        ax.plot(t, _series(rows, "backlog"), label="produced - applied", linewidth=0.8)
        ax.set_ylabel("records")
        ax.set_ylim(bottom=0)
        ax.set_title("Consumer lag")
        ax.legend(loc="upper right", fontsize=8)

    def latency(ax: Any, rows: list[dict[str, Any]]) -> None:
        ax.plot(t, _series(rows, "latency_p50_ms"), label="p50")
        ax.plot(t, _series(rows, "latency_p99_ms"), label="p99")
        ax.plot(t, _series(rows, "latency_max_ms"), label="max", linewidth=0.6, alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylabel("ms (event ts -> verdict record)")
        lat = summary["verdict_latency_ms"]
        ax.set_title(f"Verdict latency per {rows[1]['t_s'] - rows[0]['t_s'] if len(rows) > 1 else 0:.0f} s "
                     f"(overall p50 {lat['p50']:.0f} ms, p99 {lat['p99']:.0f} ms)")  # fmt: skip
        ax.legend(loc="upper right", fontsize=8)

    panels: list[tuple[str, Panel]] = [
        ("throughput", rates),
        ("rss", rss),
        ("state", state),
        ("lag", lag),
        ("latency", latency),
    ]
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.1 * len(panels)), sharex=True)
    for n, (ax, (_, draw)) in enumerate(zip(axes, panels, strict=True)):
        draw(ax, rows)
        marks(ax, label=n == len(panels) - 1)
    fig.suptitle(
        f"loopwatch soak: {summary['events_per_s']:.0f} events/s for {summary['traffic_seconds'] / 60:.1f} min, "
        f"{summary['distinct_runs']:,} runs, 1 worker ({summary['store']}, {summary['partitions']} partitions), "
        f"verdicts lost: {summary['comparison']['lost']}"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    path = out / "soak.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)
    for name, draw in panels:
        fig, ax = plt.subplots(figsize=(10, 3.4))
        draw(ax, rows)
        marks(ax)
        fig.tight_layout()
        path = out / f"soak-{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Redraw the plots of a results directory from its ``samples.csv`` and ``summary.json``."""
    import csv
    import json
    import sys

    out = Path((argv if argv is not None else sys.argv[1:])[0])
    summary = json.loads((out / "summary.json").read_text())
    rows: list[dict[str, Any]] = []
    with (out / "samples.csv").open() as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                try:
                    row[key] = float(value) if value not in ("", None) else math.nan
                except ValueError:
                    row[key] = value
            rows.append(row)
    for path in plot(rows, summary, out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
