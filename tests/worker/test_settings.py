"""Worker settings that reach Faust: what the flag says is what the app is built with."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from streams.cli.worker import register, settings_from_args
from streams.worker.settings import SettingsError, WorkerSettings


def settings(monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str]) -> WorkerSettings:
    """What ``loopwatch worker ARGV`` would run with under ``env``: the CLI's own parser and resolution."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    monkeypatch.delenv("LOOPWATCH_STANDBY_REPLICAS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return settings_from_args(parser.parse_args(["worker", *argv]))


def test_standby_replicas_default_to_fausts_one_and_come_from_the_flag_or_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert settings(monkeypatch, [], {}).standby_replicas == 1
    assert settings(monkeypatch, [], {"LOOPWATCH_STANDBY_REPLICAS": "0"}).standby_replicas == 0
    flag_wins = settings(monkeypatch, ["--standby-replicas", "2"], {"LOOPWATCH_STANDBY_REPLICAS": "0"})
    assert flag_wins.standby_replicas == 2


@pytest.mark.parametrize("count", [-1, 9])
def test_standby_replicas_out_of_range_is_a_settings_error(count: int) -> None:
    with pytest.raises(SettingsError, match=r"must be between 0 and 8 \(standby_replicas\)"):
        WorkerSettings(standby_replicas=count)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_the_app_keeps_as_many_standby_copies_as_configured(tmp_path: Path, count: int) -> None:
    from streams.config_file import LoadedConfig
    from streams.worker.app import LoopwatchWorker
    from streams.worker.metrics import WorkerMetrics

    chosen = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), standby_replicas=count)
    worker = LoopwatchWorker(chosen, LoadedConfig.default(), WorkerMetrics(process=False))
    assert worker.app.conf.table_standby_replicas == count
    # the assignor reads the same setting when it hands out standby partitions
    assert worker.app.assignor.replicas == count


def test_the_batch_budget_comes_from_the_flag_or_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPWATCH_BATCH_BUDGET", raising=False)
    assert settings(monkeypatch, [], {}).batch_budget == 0.008
    assert settings(monkeypatch, [], {"LOOPWATCH_BATCH_BUDGET": "0"}).batch_budget == 0.0
    assert settings(monkeypatch, ["--batch-budget", "0.02"], {"LOOPWATCH_BATCH_BUDGET": "0"}).batch_budget == 0.02


@pytest.mark.parametrize("budget", [-0.001, 1.5])
def test_a_batch_budget_out_of_range_is_a_settings_error(budget: float) -> None:
    with pytest.raises(SettingsError, match=r"must be between 0 and 1 second \(batch_budget\)"):
        WorkerSettings(batch_budget=budget)


def test_the_state_cache_size_comes_from_the_flag_or_the_variable_and_reaches_the_worker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from prometheus_client import generate_latest

    from streams.config_file import LoadedConfig
    from streams.worker.app import LoopwatchWorker
    from streams.worker.metrics import WorkerMetrics

    monkeypatch.delenv("LOOPWATCH_STATE_CACHE_RUNS", raising=False)
    assert settings(monkeypatch, [], {}).state_cache_runs == 1024
    assert settings(monkeypatch, [], {"LOOPWATCH_STATE_CACHE_RUNS": "0"}).state_cache_runs == 0
    chosen = settings(monkeypatch, ["--state-cache-runs", "7"], {"LOOPWATCH_STATE_CACHE_RUNS": "0"})
    assert chosen.state_cache_runs == 7
    chosen = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), state_cache_runs=7)
    metrics = WorkerMetrics(process=False)
    worker = LoopwatchWorker(chosen, LoadedConfig.default(), metrics)
    assert worker.processor._cache_size == 7
    assert "loopwatch_state_decodes_total 0.0" in generate_latest(metrics.registry).decode()
    worker.processor.decodes = 3  # read at the scrape, not pushed per event
    assert "loopwatch_state_decodes_total 3.0" in generate_latest(metrics.registry).decode()
    exported = generate_latest(metrics.registry).decode()  # the consumer's re-reads, every cause from the start
    assert 'loopwatch_consumer_rereads_total{cause="gap"} 0.0' in exported
    assert 'loopwatch_consumer_rereads_total{cause="seek_again"} 0.0' in exported
    worker.app.consumer.rereads["seek_again"] += 1
    assert 'loopwatch_consumer_rereads_total{cause="seek_again"} 1.0' in generate_latest(metrics.registry).decode()


@pytest.mark.parametrize("runs", [-1, 1_000_001])
def test_a_state_cache_size_out_of_range_is_a_settings_error(runs: int) -> None:
    with pytest.raises(SettingsError, match=r"must be between 0 and 1000000 runs \(state_cache_runs\)"):
        WorkerSettings(state_cache_runs=runs)


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({"dead_letter_topic": "loopwatch.events"}, ("events_topic", "dead_letter_topic")),
        ({"verdicts_topic": "loopwatch.fleet-alerts"}, ("verdicts_topic", "fleet_alerts_topic")),
        ({"events_topic": "g-runs-changelog", "group": "g"}, ("events_topic", "group")),
        ({"fleet_alerts_topic": "loopwatch-storm-signals"}, ("fleet_alerts_topic", "group")),
        ({"dead_letter_topic": "loopwatch-__assignor-__leader"}, ("dead_letter_topic", "group")),
    ],
)
def test_two_of_the_worker_s_topics_with_one_name_are_refused(kwargs: dict[str, str], fields: tuple[str, ...]) -> None:
    """A worker writing to a topic it reads fed its dead letters back into itself, without end."""
    with pytest.raises(SettingsError) as refused:
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
    assert refused.value.fields == fields
    assert "own name" in (refused.value.hint or "")


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"events_topic": ""}, "a topic name cannot be empty"),
        ({"verdicts_topic": "bad name!"}, "'bad name!' has characters a topic name cannot have (' ', '!')"),
        ({"dead_letter_topic": ".."}, "'..' cannot be a topic name"),
        ({"fleet_alerts_topic": "x" * 250}, "a topic name has at most 249 characters, not 250"),
        ({"group": ""}, "must not be empty"),
        ({"group": "g" * 230}, "cannot name the worker's leader-election topic: a topic name has at most 249"),
    ],
)
def test_topic_names_kafka_refuses_are_settings_errors(kwargs: dict[str, str], what: str) -> None:
    with pytest.raises(SettingsError) as refused:
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
    assert refused.value.what.startswith(what)
    assert refused.value.fields == tuple(kwargs)


def test_the_longest_group_and_a_249_character_topic_are_accepted() -> None:
    chosen = WorkerSettings(group="g" * 229, events_topic="e" * 249)
    assert all(len(name) <= 249 for name, _ in chosen.worker_topics().values())


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({"web_port": 7000, "metrics_port": 7000}, True),
        ({"web_port": 7000, "metrics_port": 7000, "metrics_host": "0.0.0.0"}, True),  # binds 127.0.0.1 too
        ({"web_port": 7000, "metrics_port": 7000, "metrics_host": "localhost"}, True),
        ({"web_port": 7000, "metrics_port": 7000, "metrics_host": "10.1.2.3"}, False),  # another address
        ({"web_port": 0, "metrics_port": 0}, False),  # 0: no server at all
        ({"web_port": 7000, "metrics_port": 7001}, False),
    ],
)
def test_the_web_and_metrics_servers_need_their_own_ports(kwargs: dict[str, object], refused: bool) -> None:
    if not refused:
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
        return
    with pytest.raises(SettingsError) as error:
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
    assert error.value.fields == ("web_port", "metrics_port")
