"""Settings ``loopwatch worker`` cannot run with, and ``broker --topic`` names Kafka refuses, as a user meets them.

Each was once accepted or ended in a traceback: a dead-letter topic equal to the events topic dead-lettered its
own dead letters without end, an empty group was Faust's ``App requires an id!``, the same port for the web and
metrics servers an ``OSError`` half-way up. Now each is one line naming the flag (and the variable it came from),
exit 2, before anything is created. The real executable runs from an empty directory; no broker is needed: the
settings are checked before any connection.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from streams.topics import TOPIC_NAME_RULE
from tests.support.cli import LOOPWATCH, Result, clean_env, lw
from tests.support.procs import free_port, start_process, stop_process, wait_until

HELP = "see 'loopwatch worker --help'"
OWN_NAMES = (
    "give each of the worker's topics its own name; a worker that writes to a topic it reads feeds its own output "
    "back into itself"
)


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    directory = tmp_path / "empty"
    directory.mkdir()
    return directory


def worker(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> Result:
    """``loopwatch worker`` against an address where nothing listens: a refused setting never gets that far."""
    wait = [] if "LOOPWATCH_KAFKA_WAIT" in (env or {}) else ["--kafka-wait", "0"]  # else the flag would win
    return lw(cwd, "worker", "--bootstrap", f"127.0.0.1:{free_port()}", *wait, *argv, env=env)


def refused(result: Result, cwd: Path, line: str) -> None:
    assert (result.code, result.out, result.err) == (2, "", f"loopwatch worker: {line}\n")
    assert list(cwd.iterdir()) == []  # not even the data directory


def test_a_dead_letter_topic_that_is_the_events_topic_is_refused(empty: Path) -> None:
    qa = ["--store", "memory", "--metrics-port", "0", "--web-port", "0", "--group", "dlt"]
    result = worker(empty, *qa, "--dead-letter-topic", "loopwatch.events")
    refused(
        result,
        empty,
        "the events topic and the dead-letter topic are both 'loopwatch.events' (--events-topic, "
        f"--dead-letter-topic): {OWN_NAMES}",
    )
    from_env = worker(empty, *qa, env={"LOOPWATCH_EVENTS_TOPIC": "dlt.out", "LOOPWATCH_VERDICTS_TOPIC": "dlt.out"})
    refused(
        from_env,
        empty,
        "the events topic and the verdicts topic are both 'dlt.out' (--events-topic via LOOPWATCH_EVENTS_TOPIC, "
        f"--verdicts-topic via LOOPWATCH_VERDICTS_TOPIC): {OWN_NAMES}",
    )


def test_a_topic_named_like_one_the_group_names_is_refused(empty: Path) -> None:
    result = worker(empty, "--group", "g", "--fleet-alerts-topic", "g-runs-changelog")
    refused(
        result,
        empty,
        "the fleet alerts topic and the run table's changelog are both 'g-runs-changelog' (--fleet-alerts-topic, "
        f"--group): {OWN_NAMES}",
    )


def test_an_empty_group_is_one_line_naming_the_flag(empty: Path) -> None:
    refused(
        worker(empty, "--group", ""),
        empty,
        "must not be empty (--group): it is the consumer group and the Faust app id, and names the worker's "
        "changelog topics",
    )


def test_an_empty_metrics_host_is_refused_before_kafka_as_other_bad_hosts_are(empty: Path) -> None:
    """It passed the port check (an empty host binds every interface), reached Kafka, and then failed with the
    resolver's words and status 3."""
    hint = "the address the metrics server binds: 127.0.0.1 (the default), or 0.0.0.0 for every interface"
    for value in ("", "  "):
        refused(worker(empty, "--metrics-host", value), empty, f"must not be empty (--metrics-host): {hint}")
    refused(
        worker(empty, env={"LOOPWATCH_METRICS_HOST": " "}),
        empty,
        f"LOOPWATCH_METRICS_HOST=' ' must not be empty (--metrics-host): {hint}",
    )
    off = worker(empty, "--metrics-port", "0", "--metrics-host", "", "--web-port", "0")  # no server: no host needed
    assert "metrics-host" not in off.err and off.code == 3, off  # it gets as far as Kafka (nothing listens)


@pytest.mark.parametrize(
    ("flag", "name", "what"),
    [
        ("--events-topic", "", "a topic name cannot be empty"),
        ("--verdicts-topic", "bad name!", "'bad name!' has characters a topic name cannot have (' ', '!')"),
        ("--dead-letter-topic", "..", "'..' cannot be a topic name"),
        ("--fleet-alerts-topic", "a" * 250, "a topic name has at most 249 characters, not 250"),
        ("--group", "my group", "cannot name the worker's storm signals topic: 'my group-storm-signals' has "
                                "characters a topic name cannot have (' ')"),
    ],
    ids=["empty", "characters", "dots", "long", "group"],
)  # fmt: skip
def test_every_topic_name_kafka_refuses_is_refused_by_its_flag(empty: Path, flag: str, name: str, what: str) -> None:
    refused(worker(empty, flag, name), empty, f"{what} ({flag}): {TOPIC_NAME_RULE}")


def test_the_broker_refuses_a_topic_name_kafka_refuses(empty: Path) -> None:
    result = lw(empty, "broker", "--port", "0", "--topic", "bad name!:3")
    assert (result.code, result.out) == (2, "")  # refused before the broker starts
    assert result.err == (
        f"loopwatch broker: 'bad name!' has characters a topic name cannot have (' ', '!') (--topic): "
        f"{TOPIC_NAME_RULE}\n"
    )


def test_one_port_for_the_web_and_metrics_servers_is_refused_but_0_for_both_is_not(empty: Path) -> None:
    result = worker(empty, "--store", "memory", "--web-port", "16066", "--metrics-port", "16066")
    refused(
        result,
        empty,
        "the web server and the metrics server cannot both listen on port 16066 (--web-port, --metrics-port): give "
        "them different ports (0 turns either server off)",
    )
    off = worker(empty, "--store", "memory", "--web-port", "0", "--metrics-port", "0")
    assert off.code == 3 and "cannot connect to Kafka" in off.err  # both servers off: on to connecting


@pytest.mark.parametrize(
    ("argv", "env", "line"),
    [
        (["--partitions", "0"], {}, f"must be a positive integer (--partitions): {HELP}"),
        (["--partitions", "120000"], {}, f"must be at most 10000 (--partitions): {HELP}"),
        (["--kafka-wait", "4000"], {}, f"must be between 0 and 3600 seconds (--kafka-wait): {HELP}"),
        (["--metrics-port", "70000"], {}, f"must be a port number from 0 to 65535 (--metrics-port): {HELP}"),
        (["--state-ttl", "-1"], {}, f"must be 0 or more (0 disables expiry) (--state-ttl): {HELP}"),
        (["--storm-runs", "-1"], {}, f"signature storm threshold must be between 0 (off) and 10000 (--storm-runs): "
                                     f"{HELP}"),
        ([], {"LOOPWATCH_PARTITIONS": "0"}, f"LOOPWATCH_PARTITIONS='0' must be a positive integer (--partitions): "
                                            f"{HELP}"),
        ([], {"LOOPWATCH_KAFKA_WAIT": "4000"}, f"LOOPWATCH_KAFKA_WAIT='4000' must be between 0 and 3600 seconds "
                                               f"(--kafka-wait): {HELP}"),
        (["--partitions", "2"], {"LOOPWATCH_WEB_PORT": "70000"}, f"LOOPWATCH_WEB_PORT='70000' must be a port number "
                                                                 f"from 0 to 65535 (--web-port): {HELP}"),
        (["--state-ttl", "nan"], {}, f"'nan' is not a finite number (--state-ttl): {HELP}"),
        ([], {"LOOPWATCH_SWEEP_INTERVAL": "inf"}, f"LOOPWATCH_SWEEP_INTERVAL='inf' is not a finite number "
                                                  f"(--sweep-interval): {HELP}"),
    ],
    ids=["partitions", "partitions-typo", "kafka-wait", "metrics-port", "state-ttl", "storm-runs", "env-partitions",
         "env-kafka-wait", "env-web-port", "nan", "env-inf"],
)  # fmt: skip
def test_a_value_out_of_range_names_its_flag_and_variable(
    empty: Path, argv: list[str], env: dict[str, str], line: str
) -> None:
    refused(worker(empty, *argv, env=env), empty, line)


@pytest.mark.parametrize(
    ("sig", "code", "last"),
    [
        (signal.SIGTERM, 0, "loopwatch worker: stopped (exit status 0)"),
        (signal.SIGINT, 130, "loopwatch worker: interrupted"),
    ],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_worker_waiting_for_kafka_stops_on_sigterm_as_a_running_one_does(
    empty: Path, sig: signal.Signals, code: int, last: str
) -> None:
    """It was killed by SIGTERM while it waited (status 143, nothing said): a container stopped before its broker
    came up looked crashed."""
    bootstrap = f"127.0.0.1:{free_port()}"
    log = empty.parent / "waiting-worker.log"
    cmd = [LOOPWATCH, "worker", "--store", "memory", "--web-port", "0", "--metrics-port", "0",
           "--bootstrap", bootstrap, "--kafka-wait", "120"]  # fmt: skip
    proc = start_process(cmd, env=clean_env(), log_path=log, cwd=empty)
    try:
        waiting = f"loopwatch worker: nothing listens at {bootstrap} yet; waiting up to 120 s for Kafka"
        wait_until(lambda: waiting in log.read_text(encoding="utf-8"), 60, 0.1, message="the waiting line")
        status = stop_process(proc, 20, sig=sig)  # SIGKILL after 20 s: then the status is not 0 or 130
    finally:
        stop_process(proc, 5)
    assert (status, log.read_text(encoding="utf-8").splitlines()) == (code, [waiting, last])


def test_the_argparse_type_for_topic_flags_uses_the_same_rule() -> None:
    """For the topic flags of the other commands (tail, publish, replay, simulate, whatif): one rule, one text."""
    import argparse

    from streams.cli._args import topic_name

    assert topic_name("loopwatch.events") == "loopwatch.events"
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'bad name!' has characters a topic name cannot have"):
        topic_name("bad name!")


@pytest.mark.integration
def test_every_log_level_choice_runs_the_worker(empty: Path) -> None:
    """``--log-level crit``, one of the documented choices, crashed the worker with a traceback (Faust wants
    Python's level names); each choice must get it to ready and stop it cleanly."""
    from streams.devbroker import EmbeddedBroker

    with EmbeddedBroker(log_path=empty.parent / "tansu.log") as broker:
        for level in ("crit", "error"):
            log = empty.parent / f"worker-{level}.log"
            cmd = [LOOPWATCH, "worker", "--bootstrap", broker.bootstrap, "--store", "memory", "--partitions", "2",
                   "--web-port", "0", "--metrics-port", "0", "--group", f"lvl-{level}",
                   "--log-level", level]  # fmt: skip
            proc = start_process(cmd, env=clean_env(), log_path=log, cwd=empty)
            try:
                wait_until(lambda log=log: "loopwatch worker: ready" in log.read_text(encoding="utf-8"), 60, 0.1,
                           message=f"ready at --log-level {level}")  # fmt: skip
                status = stop_process(proc, 20)
            finally:
                stop_process(proc, 5)
            text = log.read_text(encoding="utf-8")
            assert status == 0 and "Traceback" not in text, text


@pytest.mark.integration
def test_a_topic_with_the_wrong_partition_count_is_named_with_what_fixes_it(empty: Path) -> None:
    """Faust's leader topic made with 4 partitions (a broker creating it for a client that asked for it) was
    refused with the co-partitioning hint, which no --partitions value could satisfy."""
    from streams.devbroker import EmbeddedBroker
    from streams.kafka.admin import create_topics

    with EmbeddedBroker(log_path=empty.parent / "tansu.log") as broker:
        create_topics(broker.bootstrap, {"lead-__assignor-__leader": 4, "pairs.events": 3})
        base = ["--bootstrap", broker.bootstrap, "--store", "memory", "--web-port", "0", "--metrics-port", "0"]
        leader = lw(empty, "worker", *base, "--group", "lead", "--partitions", "2")
        assert (leader.code, leader.err) == (2, "loopwatch worker: topic has 4 partitions, 1 required "
            "(lead-__assignor-__leader): Faust's leader election needs one partition; delete the topic (the worker "
            "creates it again), or restart the embedded broker\n")  # fmt: skip
        events = lw(empty, "worker", *base, "--group", "pairs", "--events-topic", "pairs.events", "--partitions", "2")
        assert events.code == 2 and "co-partitioned" in events.err, events.err


@pytest.mark.integration
def test_a_compacted_input_topic_is_refused_before_anything_is_created(empty: Path) -> None:
    """Compaction deletes a run's events before they are applied and leaves holes that the worker's gapless
    delivery re-reads without end; an input topic made compacted by hand (or by a shared cluster's default) is
    named at start instead, before the worker creates any topic."""
    from streams.devbroker import EmbeddedBroker
    from streams.kafka.admin import create_topics
    from streams.kafka.client import partition_counts

    with EmbeddedBroker(log_path=empty.parent / "tansu.log") as broker:
        compact = {"cleanup.policy": "compact,delete"}
        create_topics(
            broker.bootstrap, {"cmp.events": 2, "cmp-storm-signals": 2}, configs={"cmp-storm-signals": compact}
        )
        create_topics(broker.bootstrap, {"cmp2.events": 2}, configs={"cmp2.events": {"cleanup.policy": "compact"}})
        before = asyncio.run(partition_counts(broker.bootstrap))
        base = ["--bootstrap", broker.bootstrap, "--store", "memory", "--web-port", "0", "--metrics-port", "0"]
        signals = lw(empty, "worker", *base, "--group", "cmp", "--events-topic", "cmp.events", "--partitions", "2")
        assert (signals.code, signals.out, signals.err) == (2, "", "loopwatch worker: topic is compacted "
            "(cleanup.policy=compact,delete) (cmp-storm-signals): the worker must read every offset of its input "
            "topics; set cleanup.policy=delete or use another topic\n")  # fmt: skip
        events = lw(empty, "worker", *base, "--group", "cmp2", "--events-topic", "cmp2.events", "--partitions", "2")
        assert events.code == 2 and "compacted (cleanup.policy=compact) (cmp2.events)" in events.err, events.err
        assert asyncio.run(partition_counts(broker.bootstrap)) == before


@pytest.mark.integration
def test_the_worker_creates_its_changelogs_compacted_and_names_one_that_is_not(empty: Path) -> None:
    """The worker creates its topics before Faust would, so Faust's changelogs were created with the broker's
    default policy (delete): on Kafka a takeover then restored a week of writes, and a run quiet for a week lost
    its state. They now get Faust's configs (the storm windows' expire), and a changelog made otherwise (by hand,
    or by that worker) is named at start."""
    from streams.devbroker import EmbeddedBroker
    from streams.kafka.admin import create_topics
    from streams.kafka.client import describe_topic_configs

    with EmbeddedBroker(log_path=empty.parent / "tansu.log") as broker:
        create_topics(broker.bootstrap, {"old-runs-changelog": 2})
        log = empty.parent / "worker.log"
        cmd = [LOOPWATCH, "worker", "--bootstrap", broker.bootstrap, "--store", "memory", "--partitions", "2",
               "--web-port", "0", "--metrics-port", "0", "--group", "old"]  # fmt: skip
        proc = start_process(cmd, env=clean_env(), log_path=log, cwd=empty)
        try:
            wait_until(lambda: "loopwatch worker: ready" in log.read_text(encoding="utf-8"), 60, 0.1, message="ready")
            status = stop_process(proc, 20)
        finally:
            stop_process(proc, 5)
        text = log.read_text(encoding="utf-8")
        assert status == 0 and "Traceback" not in text, text
        assert (
            "loopwatch worker: warning: changelog 'old-runs-changelog' has cleanup.policy=delete, not the worker's "
            "configs: set cleanup.policy=compact (the deploy topic scripts do)" in text
        ), text
        configs = asyncio.run(
            describe_topic_configs(
                broker.bootstrap, ["old-storms-changelog", "loopwatch.dead-letter", "loopwatch.events"]
            )
        )
        assert configs == {
            "old-storms-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "600000"},
            "loopwatch.dead-letter": {"retention.ms": str(30 * 24 * 3600 * 1000)},
            "loopwatch.events": {},
        }


@pytest.mark.parametrize(
    ("argv", "env", "line"),
    [
        (["publish", "e.jsonl", "--partitions", "120000"], {}, "loopwatch publish: must be at most 10000 "
            "(--partitions): see 'loopwatch publish --help'"),
        (["publish", "e.jsonl"], {"LOOPWATCH_PARTITIONS": "120000"}, "loopwatch publish: LOOPWATCH_PARTITIONS=120000 "
            "must be at most 10000: see 'loopwatch publish --help'"),
        (["broker", "--topic", "t:120000"], {}, "loopwatch broker: 't:120000': the partition count must be at most "
            "10000 (--topic)"),
        (["broker", "--topic", "t:" + "9" * 5000], {}, "loopwatch broker: 't:" + "9" * 38 + "...': the partition "
            "count must be at most 10000 (--topic)"),
        (["worker", "--partitions", "9" * 5000], {}, "loopwatch worker: '" + "9" * 40 + "...' is too large "
            "(--partitions): see 'loopwatch worker --help'"),
    ],
    ids=["publish", "publish-env", "broker", "broker-5000-digits", "worker-5000-digits"],
)  # fmt: skip
def test_a_partition_count_past_the_bound_is_refused_by_every_command(
    empty: Path, argv: list[str], env: dict[str, str], line: str
) -> None:
    """``publish --partitions 100000`` made a topic that slowed every client of the embedded broker to seconds; the
    worker, publish and the broker now share one bound (streams.topics.MAX_PARTITIONS), before any connection."""
    (empty / "e.jsonl").write_text("", encoding="utf-8")
    done = lw(empty, *argv, env=env)
    assert (done.code, done.out, done.err) == (2, "", line + "\n")
