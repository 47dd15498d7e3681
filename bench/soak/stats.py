"""Small statistics for the soak: percentiles, histogram quantiles, slopes, plateau judgement."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

_LE = re.compile(r'le="([^"]+)"')


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))])


def metric_sum(metrics: Mapping[str, float], name: str) -> float:
    """Sum of every sample of ``name`` (any labels)."""
    total = 0.0
    for key, value in metrics.items():
        base = key.partition("{")[0]
        if base == name:
            total += value
    return total


def histogram_buckets(metrics: Mapping[str, float], name: str) -> dict[float, float]:
    """Cumulative bucket counts of histogram ``name`` by upper bound (``+Inf`` included)."""
    out: dict[float, float] = {}
    prefix = f"{name}_bucket{{"
    for key, value in metrics.items():
        if key.startswith(prefix):
            match = _LE.search(key)
            if match:
                out[float(match.group(1))] = value
    return out


def histogram_quantile(
    before: Mapping[float, float], after: Mapping[float, float], q: float, *, interpolate: bool = False
) -> float:
    """Quantile ``q`` of the observations between two scrapes (NaN if none): the upper bound of the bucket
    holding it, or with ``interpolate`` a linear estimate inside that bucket, as Prometheus's own function."""
    bounds = sorted(after)
    if not bounds:
        return math.nan
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    if total <= 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        count = after[bound] - before.get(bound, 0.0)
        if count >= rank:
            if not interpolate:
                return bound
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = bound, count
    return bounds[-1]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (NaN with fewer than two points)."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 2:
        return math.nan
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    if sxx == 0:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx


def mean(values: Sequence[float]) -> float:
    clean = [v for v in values if not math.isnan(v)]
    return sum(clean) / len(clean) if clean else math.nan


def plateau(ts: Sequence[float], ys: Sequence[float], *, tolerance: float = 0.05) -> dict[str, float | bool]:
    """Growth figures of one series over the traffic phase.

    ``first_half_mean`` / ``last_half_mean``, ``slope_per_min`` over the last half (units of ``ys`` per minute),
    ``last_half_growth`` = slope x last-half length / last-half mean (the relative drift across the last half),
    ``growth_per_10min`` = slope x 10 min / last-half mean, and ``plateau`` = that projected drift is below
    ``tolerance`` (a short run cannot pass by being short).
    """
    if not ts:
        return {"plateau": False}
    end = ts[-1]
    start = ts[0]
    mid = start + (end - start) / 2
    first = [y for t, y in zip(ts, ys, strict=True) if t < mid]
    last_t = [t for t in ts if t >= mid]
    last = [y for t, y in zip(ts, ys, strict=True) if t >= mid]
    per_s = slope(last_t, last)
    level = mean(last)
    span = (last_t[-1] - last_t[0]) if len(last_t) > 1 else 0.0
    growth = per_s * span / level if level and not math.isnan(per_s) else math.nan
    per_10min = per_s * 600 / level if level and not math.isnan(per_s) else math.nan
    return {
        "first_half_mean": mean(first),
        "last_half_mean": level,
        "last_half_max": max(last) if last else math.nan,
        "slope_per_min": per_s * 60 if not math.isnan(per_s) else math.nan,
        "last_half_growth": growth,
        "growth_per_10min": per_10min,
        "plateau": bool(not math.isnan(per_10min) and abs(per_10min) < tolerance),
    }
