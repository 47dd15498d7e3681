"""deploy/metrics.txt is exactly the set of worker metrics the rules and the dashboard rely on, and
the scrape check in metric_names.py works on real exposition output."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from tests.deploy.metric_names import (
    KNOWN_LABEL_VALUES,
    LABELLED_COUNTERS,
    METRICS_LIST,
    assert_all_exported,
    assert_labels_initialised,
    dashboard_expressions,
    label_matchers_in,
    listed_metric_names,
    metric_names_in,
    referenced_metric_names,
    rule_expressions,
    unlisted_metric_names,
)

# The worker's metric contract (streams/worker/metrics.py).
CONTRACT = {
    "loopwatch_events_total",
    "loopwatch_verdicts_total",
    "loopwatch_invalid_events_total",
    "loopwatch_duplicate_events_total",
    "loopwatch_redelivered_events_total",
    "loopwatch_event_to_verdict_seconds",
    "loopwatch_batch_wait_seconds",
    "loopwatch_event_loop_lag_seconds",
    "loopwatch_active_runs",
    "loopwatch_state_bytes",
    "loopwatch_consumer_lag",
    "loopwatch_fleet_alerts_total",
    "loopwatch_skipped_offsets_total",
    "loopwatch_consumer_rereads_total",
    "loopwatch_rebalances_total",
    "loopwatch_loop_tokens_total",
    "loopwatch_loop_cost_usd_total",
    "loopwatch_saved_tokens_estimate_total",
    "loopwatch_saved_cost_usd_estimate_total",
}


def test_metrics_list_format() -> None:
    lines = METRICS_LIST.read_text(encoding="utf-8").splitlines()
    assert lines == sorted(set(lines), key=lines.index), "duplicates"
    assert all(line and line == line.strip() and not line.startswith("#") for line in lines)
    assert all(line.startswith("loopwatch_") for line in lines)


def test_every_referenced_metric_is_listed() -> None:
    assert unlisted_metric_names(referenced_metric_names(), listed_metric_names()) == set()


def test_every_listed_metric_is_used() -> None:
    used = {name.removesuffix("_bucket") for name in referenced_metric_names()}
    assert listed_metric_names() - used == set(), "listed in deploy/metrics.txt but used nowhere"


def test_contract_metrics_are_listed() -> None:
    assert listed_metric_names() == CONTRACT


def test_label_matchers_use_known_values() -> None:
    for where, expr in [*rule_expressions().items(), *dashboard_expressions().items()]:
        for label, op, value in label_matchers_in(expr):
            if label not in KNOWN_LABEL_VALUES:
                continue
            values = value.split("|") if op in ("=~", "!~") else [value]
            unknown = set(values) - KNOWN_LABEL_VALUES[label]
            assert not unknown, f"{where}: {label}{op}{value!r} uses unknown {sorted(unknown)}"


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(a_bucket{x="y"}[5m] offset 1h)) > 3 * on (job) group_left b', {"a_bucket", "b"}),
        ('absent(up{job="loopwatch"} == 1)', {"up"}),
        ("count(c) > 0 unless on () count(d_total) and e > bool 1e3", {"c", "d_total", "e"}),
        (
            'histogram_quantile(0.99, sum by (le) (rate(h_bucket{i=~"$instance"}[$__rate_interval])))',
            {"h_bucket"},
        ),
    ],
)
def test_metric_name_scanner(expr: str, names: set[str]) -> None:
    assert metric_names_in(expr) == names


# ------------------------------------------------------------------------------------------- scrape check


def _worker_like_registry(*, skip: str = "", initialise: bool = True) -> CollectorRegistry:
    """A registry shaped like the worker's: what a correct worker's /metrics looks like."""
    registry = CollectorRegistry()
    counters = {
        "loopwatch_events": ("type",),
        "loopwatch_verdicts": ("decision", "detector"),
        "loopwatch_invalid_events": ("reason",),
        "loopwatch_duplicate_events": (),
        "loopwatch_redelivered_events": (),
        "loopwatch_fleet_alerts": ("kind", "detector"),
        "loopwatch_skipped_offsets": (),
        "loopwatch_consumer_rereads": ("cause",),
        "loopwatch_rebalances": (),
        "loopwatch_loop_tokens": ("decision", "detector"),
        "loopwatch_loop_cost_usd": ("decision", "detector"),
        "loopwatch_saved_tokens_estimate": ("decision", "detector"),
        "loopwatch_saved_cost_usd_estimate": ("decision", "detector"),
    }
    for name, labels in counters.items():
        if f"{name}_total" == skip:
            continue
        counter = Counter(name, "test", labels, registry=registry)
        if initialise and labels and f"{name}_total" in LABELLED_COUNTERS:
            for label in labels:
                for value in KNOWN_LABEL_VALUES[label]:
                    other = {o: sorted(KNOWN_LABEL_VALUES[o])[0] for o in labels if o != label}
                    counter.labels(**{label: value, **other})
    for name in (
        "loopwatch_event_to_verdict_seconds",
        "loopwatch_batch_wait_seconds",
        "loopwatch_event_loop_lag_seconds",
    ):
        if name != skip:
            Histogram(name, "test", registry=registry)
    for name in ("loopwatch_active_runs", "loopwatch_state_bytes"):
        if name != skip:
            Gauge(name, "test", registry=registry)
    if skip != "loopwatch_consumer_lag":
        Gauge("loopwatch_consumer_lag", "test", ["partition"], registry=registry)  # no partition yet
    return registry


@pytest.mark.parametrize("render", [generate_latest, generate_openmetrics], ids=["text", "openmetrics"])
def test_assert_all_exported_accepts_a_complete_worker(render: object) -> None:
    assert callable(render)
    text = render(_worker_like_registry()).decode()
    assert_all_exported(text, listed_metric_names())
    assert_all_exported(text, referenced_metric_names())  # up is Prometheus' own; _bucket via the histogram
    assert_labels_initialised(text)


def test_the_real_worker_registry_exports_everything_deploy_uses() -> None:
    from streams.worker.metrics import WorkerMetrics

    text = generate_latest(WorkerMetrics(process=False).registry).decode()
    assert_all_exported(text, listed_metric_names())
    assert_labels_initialised(text)


@pytest.mark.parametrize("missing", sorted(CONTRACT))
def test_assert_all_exported_names_what_is_missing(missing: str) -> None:
    text = generate_latest(_worker_like_registry(skip=missing)).decode()
    with pytest.raises(AssertionError, match=missing):
        assert_all_exported(text, listed_metric_names())


def test_assert_labels_initialised_flags_lazy_counters() -> None:
    text = generate_latest(_worker_like_registry(initialise=False)).decode()
    with pytest.raises(AssertionError, match="loopwatch_verdicts_total"):
        assert_labels_initialised(text)
