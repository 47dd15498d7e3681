"""The alert rules, the Alertmanager routing and the dashboard, run for real.

A real worker (with its fleet-storm agents) on the embedded broker is scraped every second by Debian's real
``prometheus`` server, which loads ``deploy/prometheus/alerts.yml`` and notifies Debian's real Alertmanager
running ``deploy/alertmanager/alertmanager.yml``; its two receivers are webhook servers on 127.0.0.1 here.

Time is compressed 60-fold where a test cannot wait: the rules are a rendered copy whose every ``for:`` of N
minutes becomes N seconds (expressions, ranges and labels unchanged), and the Alertmanager's group timers are
seconds. Two phases, one stack:

1. a quiet fleet (runs that progress): nothing goes pending, nothing fires, nobody is notified;
2. a fleet storm (4 runs of different agents blocked on the same call, each then aborted after a compaction)
   and a dead-letter burst: the block spike and dead-letter alerts go pending and fire, the storm, abort and
   future-version alerts fire, the storm pages, the warnings reach the chat receiver, and the block spike of
   the storm's detector is inhibited by the storm. Then every dashboard query returns data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import yaml

from tests.deploy.metric_names import ALERT_RULES, DEPLOY, as_promql, dashboard_expressions
from tests.deploy.tools import ToolUnavailable, ensure_prometheus_stack
from tests.support.prometheus_stack import (
    Alertmanager,
    Prometheus,
    WebhookReceiver,
    compressed_rules,
    local_alertmanager_config,
)
from tests.support.worker import WorkerProcess, bootstrap_of, keyed, new_names, produce, wait_for, write_config

pytestmark = pytest.mark.integration

ALERTMANAGER_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}}}
STORM_RUNS = 4  # > the storm threshold of 3 distinct runs
LOOP_CALLS = 10  # identical calls per storm run: a warning at 3, blocks from 5 on (6 per run, 24 in all > 15)
#: What phase 2 must fire (alertname -> severity); nothing else may.
EXPECTED_FIRING = {
    "LoopwatchFleetLoopStorm": "critical",
    "LoopwatchBlockRateSpike": "warning",
    "LoopwatchAbortVerdicts": "warning",
    "LoopwatchDeadLetterRateHigh": "warning",
    "LoopwatchFutureVersionEvents": "warning",
}
WITH_FOR = {"LoopwatchBlockRateSpike", "LoopwatchDeadLetterRateHigh"}  # these go pending first
INHIBITED = "LoopwatchBlockRateSpike"  # by the storm of the same detector


# --------------------------------------------------------------------------------------------- traffic


def _event(run: str, agent: str, i: int, ts: int, **fields: Any) -> dict[str, Any]:
    return {
        "gateway_id": f"gw-{run}",
        "agent_id": agent,
        "session_id": f"sess-{run}",
        "run_id": run,
        "ts": ts + i,
        "event_id": f"{run}-{i}",
        **fields,
    }


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def quiet_fleet(tag: str, runs: int, calls: int) -> list[dict[str, Any]]:
    """Runs that progress: every call reads another file and gets another answer."""
    ts = int(time.time() * 1000)
    return [
        _event(f"{tag}-{r}", "main", i, ts, type="tool_call", tool="read", call_id=f"c{i}",
               args={"path": f"/repo/{tag}/{r}/file{i}.py"}, result=_text(f"contents {r}/{i}"))
        for r in range(runs)
        for i in range(calls)
    ]  # fmt: skip


def model_call(run: str, agent: str, i: int, ts: int) -> dict[str, Any]:
    """The usage of the model call before call ``i``: 20k tokens at $0.01."""
    return {**_event(run, agent, i, ts, type="model_usage", model="m"), "event_id": f"{run}-u{i}",
            "input_tokens": 19_000, "output_tokens": 1_000, "cost_usd": 0.01}  # fmt: skip


def storm(tag: str) -> list[dict[str, Any]]:
    """STORM_RUNS runs on different gateways and agents, all looping on the same failing exec (a signature
    storm of generic_repeat), then each aborted by the post-compaction guard on a file of its own. Each
    call comes after its model call's usage, so the loops have a cost."""
    ts = int(time.time() * 1000)
    events: list[dict[str, Any]] = []
    for r in range(STORM_RUNS):
        run, agent = f"{tag}-{r}", f"agent-{tag}-{r}"
        failing = {"tool": "exec", "args": {"command": "npm test"}, "result": _text("Error: registry unreachable")}
        unchanged = {"tool": "read", "args": {"path": f"/repo/{run}/CHANGELOG.md"}, "result": _text(f"same {run}")}
        for i in range(LOOP_CALLS):
            events.append(model_call(run, agent, i, ts))
            events.append(_event(run, agent, i, ts, type="tool_call", call_id=f"c{i}", **failing))
        events.append(_event(run, agent, LOOP_CALLS, ts, type="compaction_retry"))
        for i in range(LOOP_CALLS + 1, LOOP_CALLS + 4):
            events.append(model_call(run, agent, i, ts))
            events.append(_event(run, agent, i, ts, type="tool_call", call_id=f"c{i}", **unchanged))
    return events


def dead_letter_burst(tag: str, truncated: int, future: int) -> list[tuple[bytes | None, bytes]]:
    ts = int(time.time() * 1000)
    good = _event(f"{tag}-dl", "main", 0, ts, type="tool_call", tool="read", call_id="c0", args={"path": "/x"})
    key = f"{tag}-dl".encode()
    records: list[tuple[bytes | None, bytes]] = [(key, orjson.dumps(good)[:40]) for _ in range(truncated)]
    records += [(key, orjson.dumps({**good, "event_id": f"v{i}", "version": 2})) for i in range(future)]
    return records


# --------------------------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    prometheus: Prometheus
    alertmanager: Alertmanager
    pager: WebhookReceiver
    chat: WebhookReceiver
    worker: WorkerProcess
    bootstrap: str
    events_topic: str
    produced: int = 0
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)

    def send(self, records: list[tuple[bytes | None, bytes]], valid: int) -> None:
        produce(self.bootstrap, self.events_topic, records)
        self.produced += valid

    def wait_scraped(self, what: str, expr: str, want: float, timeout: float = 60.0) -> None:
        """Until Prometheus' latest sample of ``expr`` is ``want``: the worker applied it and it was scraped."""

        def seen() -> bool:
            result = self.prometheus.query(expr)
            return bool(result) and float(result[0]["value"][1]) == want

        wait_for(seen, timeout, f"{what} ({expr} == {want})", interval=0.5)


@pytest.fixture(scope="module")
def stack(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        binaries = ensure_prometheus_stack()
    except ToolUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("live-alerts")
    names = new_names("live-alerts", partitions=2)
    extra = ["--storm-runs", "3", "--storm-agent-runs", "4", "--storm-window", "3600"]
    worker = WorkerProcess(
        bootstrap_of(broker), names, workdir, config=write_config(workdir, CONFIG), store="memory", extra=extra
    )
    pager, chat = WebhookReceiver("pager"), WebhookReceiver("chat")
    alertmanager = Alertmanager(workdir)
    prometheus = Prometheus(workdir)
    try:
        worker.start()
        am_config = local_alertmanager_config(
            ALERTMANAGER_CONFIG, workdir / "alertmanager.yml", {"pager": pager, "chat": chat}
        )
        alertmanager.start(binaries["alertmanager"], am_config)
        rules = compressed_rules(ALERT_RULES, workdir / "alerts.yml")
        prometheus.start(
            binaries["prometheus"],
            targets=[f"127.0.0.1:{worker.metrics_port}"],
            rules=rules,
            alertmanager=alertmanager,
        )
        worker.wait_ready()
        stack = Stack(prometheus, alertmanager, pager, chat, worker, bootstrap_of(broker), names.events)
        # Scraped, with its pre-initialised zeros, and owning its partitions, before any traffic.
        stack.wait_scraped("worker up", 'up{job="loopwatch"}', 1)
        stack.wait_scraped("lag reported", 'count(loopwatch_consumer_lag{job="loopwatch"})', names.partitions)
        stack.wait_scraped("zeros", 'sum(loopwatch_fleet_alerts_total{job="loopwatch"})', 0)
        time.sleep(3)  # a few evaluations on a fully scraped target: start-up states have resolved
        yield stack
    finally:
        prometheus.stop()
        alertmanager.stop()
        worker.stop()
        pager.close()
        chat.close()


@pytest.fixture(scope="module")
def quiet(stack: Stack) -> Stack:
    """Phase 1: 20 progressing runs of 8 calls, then long enough for the longest shortened ``for:`` (15 s)."""
    start = time.time()
    events = quiet_fleet("quiet", runs=20, calls=8)
    stack.send(keyed(events), len(events))
    stack.wait_scraped("quiet fleet applied", 'sum(loopwatch_events_total{job="loopwatch"})', stack.produced)
    time.sleep(17)
    stack.phases["quiet"] = (start, time.time())
    return stack


@pytest.fixture(scope="module")
def stormy(quiet: Stack) -> Stack:
    """Phase 2: the storm and the dead-letter burst, amid more quiet traffic; until every expected notification
    has arrived (bounded)."""
    stack = quiet
    start = time.time()
    events = [*quiet_fleet("busy", runs=10, calls=8), *storm("storm")]
    stack.send(keyed(events), len(events))
    stack.send(dead_letter_burst("burst", truncated=30, future=5), 0)
    stack.wait_scraped("storm applied", 'sum(loopwatch_events_total{job="loopwatch"})', stack.produced)

    def notified() -> bool:
        warnings = {name for name, severity in EXPECTED_FIRING.items() if severity == "warning"} - {INHIBITED}
        return "LoopwatchFleetLoopStorm" in stack.pager.alertnames() and warnings <= stack.chat.alertnames()

    try:
        wait_for(notified, 90, "pager and chat notifications", interval=0.5)
    except TimeoutError as exc:
        seen = {(a["labels"]["alertname"], a["state"]) for a in stack.prometheus.alerts()}
        raise AssertionError(
            f"{exc}: pager {stack.pager.alertnames()}, chat {stack.chat.alertnames()}, Prometheus {sorted(seen)}\n"
            f"{stack.alertmanager.log()[-2000:]}\n{stack.prometheus.log()[-2000:]}"
        ) from None
    time.sleep(4)  # a few more group intervals: anything that should not arrive has had its chance
    stack.phases["storm"] = (start, time.time())
    return stack


# --------------------------------------------------------------------------------------------- tests


def test_a_quiet_fleet_fires_no_alert(quiet: Stack) -> None:
    start, end = quiet.phases["quiet"]
    assert quiet.prometheus.alert_states(start, end) == {}, "alerts pending or firing on a quiet fleet"
    assert quiet.prometheus.alerts() == []
    assert quiet.pager.notifications == [] and quiet.chat.notifications == []
    loaded = [rule for group in quiet.prometheus.api("rules")["groups"] for rule in group["rules"]]
    shipped = [rule for group in yaml.safe_load(ALERT_RULES.read_text())["groups"] for rule in group["rules"]]
    assert sorted(rule["name"] for rule in loaded) == sorted(rule["alert"] for rule in shipped), "not every rule loaded"
    assert all(rule["health"] == "ok" for rule in loaded), loaded


def test_storm_and_dead_letter_burst_alerts_go_pending_and_fire(stormy: Stack) -> None:
    start, end = stormy.phases["storm"]
    states = stormy.prometheus.alert_states(start, end)
    firing = {name for name, state in states if state == "firing"}
    pending = {name for name, state in states if state == "pending"}
    assert firing == set(EXPECTED_FIRING), f"fired {sorted(firing)}"
    assert pending >= WITH_FOR, f"went pending: {sorted(pending)}"
    assert pending <= WITH_FOR, f"alerts without for: never pend: {sorted(pending)}"
    assert states[("LoopwatchFleetLoopStorm", "firing")] == {"generic_repeat"}
    assert states[("LoopwatchBlockRateSpike", "firing")] == {"generic_repeat"}
    assert states[("LoopwatchAbortVerdicts", "firing")] == {"compaction_loop_persisted"}
    live = {(a["labels"]["alertname"], a["state"]) for a in stormy.prometheus.alerts()}
    assert {(name, "firing") for name in EXPECTED_FIRING} <= live
    stormy.worker.assert_no_errors()


def test_alertmanager_pages_criticals_chats_warnings_and_inhibits_storm_symptoms(stormy: Stack) -> None:
    assert stormy.pager.alertnames() == {"LoopwatchFleetLoopStorm"}
    warnings = {name for name, severity in EXPECTED_FIRING.items() if severity == "warning"}
    assert stormy.chat.alertnames() == warnings - {INHIBITED}
    for note in stormy.pager.notifications + stormy.chat.notifications:
        # Grouped by alert name and deployment; every alert carries its runbook.
        assert set(note["groupLabels"]) == {"alertname", "deployment", "service"}, note["groupLabels"]
        assert note["commonLabels"]["deployment"] == "loopwatch-test"
        assert all(a["annotations"]["runbook_url"].startswith("deploy/RUNBOOK.md#") for a in note["alerts"])
    by_name = {a["labels"]["alertname"]: a for a in stormy.alertmanager.alerts()}
    assert set(by_name) == set(EXPECTED_FIRING)
    inhibited = by_name[INHIBITED]["status"]
    assert inhibited["state"] == "suppressed" and inhibited["inhibitedBy"], inhibited
    assert all(by_name[name]["status"]["state"] == "active" for name in set(EXPECTED_FIRING) - {INHIBITED})


def test_every_dashboard_query_returns_data(stormy: Stack) -> None:
    empty = []
    for where, expr in dashboard_expressions().items():
        result = stormy.prometheus.query(as_promql(expr))
        values = [float(sample["value"][1]) for sample in result]
        if not any(not math.isnan(value) for value in values):
            empty.append(f"{where}: {expr} -> {result}")
    assert not empty, "dashboard queries without data:\n" + "\n".join(empty)


def test_loop_cost_reaches_prometheus(stormy: Stack) -> None:
    """Each storm run's loop is priced from its first decision (the warning on call 3) to its last (the block
    on call 9): the 6 model calls in between, 20k tokens and $0.01 each (streams/loop_cost.py)."""

    def total(metric: str) -> float:
        return float(stormy.prometheus.query(f'sum({metric}{{job="loopwatch"}})')[0]["value"][1])

    assert total("loopwatch_loop_tokens_total") == STORM_RUNS * 6 * 20_000
    assert total("loopwatch_loop_cost_usd_total") == pytest.approx(STORM_RUNS * 6 * 0.01)
    # Every block saves one call at the loop's mean (20k tokens); each abort 5 (criticalThreshold) at the run's.
    assert total("loopwatch_saved_tokens_estimate_total") == STORM_RUNS * (5 * 20_000 + 5 * 20_000)
    assert total("loopwatch_saved_cost_usd_estimate_total") == pytest.approx(STORM_RUNS * (5 + 5) * 0.01)
