"""The operator's first hour, as a user lives it: the real ``loopwatch`` executable, run from an empty directory.

Every expected failure must be one line in the shape ``loopwatch <command>: <what failed> (<where>): <hint>``
with its documented exit status, quickly, and no output may ever hold a traceback. Tests that need Kafka start
their own embedded broker (and a TLS one) so that the default topic names and ports are theirs.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from streams.devbroker import EmbeddedBroker
from streams.errors import EXIT_CODES
from streams.kafka.security import SECURITY_FLAGS
from streams.worker import options
from streams.worker.settings import DEFAULT_METRICS_PORT, DEFAULT_WEB_PORT
from tests.support.cli import CONFIG, LOOPWATCH, READY_TIMEOUT, Result, clean_env, lw, repeated_reads
from tests.support.procs import REPO_ROOT, free_port, start_process, stop_process, wait_until

COMMANDS = ("replay", "config", "config check", "broker", "worker", "publish", "tail", "whatif", "simulate")
MARKUP = re.compile(r"``|:mod:|:func:|:class:|§|\(default: None\)|default PLAINTEXT\) \(default")


def at_once(result: Result, cwd: Path, command: str, work: float = 0.0) -> bool:
    """Finished without waiting for anything but ``work`` seconds: bounded by the machine's own start-up cost.

    A fixed bound fails on a loaded machine (16 s of imports at load 12); twice the measured ``--help`` start-up
    plus the command's own timeout still catches a command that waits on a broker (aiokafka retries for minutes).
    """
    startup = lw(cwd, command, "--help").seconds
    return result.seconds < 2 * startup + work + 3


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


# --- no Kafka needed ---------------------------------------------------------------------------------------


def test_version(empty: Path) -> None:
    result = lw(empty, "--version")
    assert (result.code, result.out.strip()) == (0, f"loopwatch {metadata.version('loopwatch')}")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_is_plain_words(empty: Path, command: str) -> None:
    result = lw(empty, *command.split(), "--help")
    assert result.code == 0 and result.err == ""
    assert not MARKUP.search(result.out), MARKUP.search(result.out)
    assert "usage: loopwatch" in result.out


def test_top_level_help_has_the_exit_code_table(empty: Path) -> None:
    text = lw(empty, "--help").out
    for code, _ in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+\S", text, re.MULTILINE), code


def test_bad_flag_is_one_line(empty: Path) -> None:
    result = lw(empty, "worker", "--partitions", "x")
    assert result.code == 2
    assert result.err == "loopwatch worker: 'x' is not an integer (--partitions): see 'loopwatch worker --help'\n"
    result = lw(empty, "worker", "--standby-replicas", "-1")
    assert (result.code, result.err) == (
        2,
        "loopwatch worker: must be between 0 and 8 (--standby-replicas): see 'loopwatch worker --help'\n",
    )
    result = lw(empty, "worker", "--batch-budget", "2")
    assert (result.code, result.err) == (
        2,
        "loopwatch worker: must be between 0 and 1 second (--batch-budget): see 'loopwatch worker --help'\n",
    )
    result = lw(empty, "simulate", "--rate", "0")
    assert (result.code, result.err) == (
        2,
        "loopwatch simulate: must be a positive number (--rate): see 'loopwatch simulate --help'\n",
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["broker", "--port", "99999"], "must be a port number from 0 to 65535 (--port)"),  # was a traceback
        (["broker", "--port", "-1"], "must be a port number from 0 to 65535 (--port)"),
        (["broker", "--ready-timeout", "0"], "must be a positive number (--ready-timeout)"),
        (["tail", "--max", "0"], "must be a positive integer (--max)"),  # were all checked after connecting
        (["tail", "--timeout", "nan"], "'nan' is not a finite number (--timeout)"),
        (["tail", "--width", "-1"], "must be 0 or more (--width)"),
        (["publish", "events.jsonl", "--partitions", "0"], "must be a positive integer (--partitions)"),
        (["whatif", "--events", "events.jsonl", "--buckets", "0"], "must be a positive integer (--buckets)"),
        (["whatif", "--events", "events.jsonl", "--limit", "-2"], "must be 0 or more (--limit)"),
        (["simulate", "--gateways", "many"], "'many' is not an integer (--gateways)"),
        (["simulate", "--malformed", "some"], "'some' is not a number (--malformed)"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_number_out_of_its_range_is_refused_before_anything_starts(empty: Path, argv: list[str], said: str) -> None:
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    result = lw(empty, *argv, "--bootstrap", f"127.0.0.1:{free_port()}") if argv[0] != "broker" else lw(empty, *argv)
    assert (result.code, result.err) == (2, f"loopwatch {argv[0]}: {said}: see 'loopwatch {argv[0]} --help'\n")
    assert not list(empty.glob(".state"))


def test_publish_names_a_bad_partitions_variable_only_when_it_publishes(empty: Path) -> None:
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    for value, said in (
        ("0", "LOOPWATCH_PARTITIONS=0 must be a positive integer"),
        ("x", "LOOPWATCH_PARTITIONS='x' is not an integer"),
    ):
        result = lw(empty, "publish", "events.jsonl", env={"LOOPWATCH_PARTITIONS": value})
        assert (result.code, result.err) == (2, f"loopwatch publish: {said}: see 'loopwatch publish --help'\n")
        assert (
            lw(
                empty,
                "publish",
                "events.jsonl",
                "--partitions",
                "2",
                "--bootstrap",
                f"127.0.0.1:{free_port()}",
                env={"LOOPWATCH_PARTITIONS": value},
            ).code
            == 3
        )  # the flag wins: on to connecting


def test_config_without_its_subcommand_names_what_is_missing_in_the_help_s_words(empty: Path) -> None:
    result = lw(empty, "config")
    assert (result.code, result.err) == (
        2,
        "loopwatch config: the following arguments are required: SUBCOMMAND: see 'loopwatch config --help'\n",
    )
    assert "SUBCOMMAND" in lw(empty, "config", "--help").out


def test_simulate_with_no_flags_writes_a_minute_of_a_small_fleet(empty: Path) -> None:
    result = lw(empty, "simulate")
    assert (result.code, result.err) == (0, "")
    events = [json.loads(line) for line in result.out.splitlines()]
    assert len(events) == 60 * 60  # 60 events/s for 60 s
    assert len({event["gateway_id"] for event in events}) == 4
    assert list(empty.iterdir()) == []  # stdout only: nothing written where it ran


def test_bad_environment_variable_names_itself_and_only_stops_the_worker(empty: Path) -> None:
    result = lw(empty, "worker", env={"LOOPWATCH_PARTITIONS": "twelve"})
    assert (result.code, result.err) == (
        2,
        "loopwatch worker: LOOPWATCH_PARTITIONS='twelve' is not an integer (--partitions): see 'loopwatch worker "
        "--help'\n",
    )
    assert lw(empty, "config", "--help", env={"LOOPWATCH_PARTITIONS": "twelve"}).code == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["tail"],
        ["publish", "events.jsonl"],
        ["simulate", "--gateways", "1", "--rate", "1", "--duration", "1", "--bootstrap", "{b}"],
        ["replay", "--topic", "loopwatch.events", "--bootstrap", "{b}"],
        ["whatif", "--topic", "loopwatch.events", "--bootstrap", "{b}", "--candidate", "candidate.json5"],
        ["worker", "--store", "memory"],
        ["worker"],
    ],
    ids=lambda argv: " ".join(argv[:3]),
)
def test_no_broker_is_one_line_for_every_command(empty: Path, argv: list[str]) -> None:
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    (empty / "candidate.json5").write_text("{}", encoding="utf-8")
    bootstrap = f"127.0.0.1:{free_port()}"
    args = [a.replace("{b}", bootstrap) for a in argv]
    if "{b}" not in " ".join(argv):
        args += ["--bootstrap", bootstrap]
    waited = ""
    if args[0] == "worker":  # a worker waits for a broker that may be starting with it (see the next test)
        args += ["--kafka-wait", "2"]
        waited = f"loopwatch worker: nothing listens at {bootstrap} yet; waiting up to 2 s for Kafka\n"
        if port_taken(DEFAULT_WEB_PORT) or port_taken(DEFAULT_METRICS_PORT):
            args += ["--web-port", "0", "--metrics-port", "0"]
    result = lw(empty, *args)
    assert result.code == 3
    assert result.err == waited + (
        f"loopwatch {argv[0]}: cannot connect to Kafka ({bootstrap}): nothing listens there; start a broker "
        "(loopwatch broker) or point --bootstrap / LOOPWATCH_BOOTSTRAP at one\n"
    )
    assert at_once(result, empty, argv[0], work=5 + (2 if waited else 0))  # the connection check's timeout
    # the worker made its data directory (and, with RocksDB, a lock file) to start; failing, it removes them
    assert sorted(p.name for p in empty.iterdir()) == ["candidate.json5", "events.jsonl"]


def test_a_replay_range_that_ends_before_it_starts_is_one_line_before_any_connection(empty: Path) -> None:
    result = lw(empty, "replay", "--topic", "loopwatch.events", "--bootstrap", f"127.0.0.1:{free_port()}",
                "--from", "5", "--to", "2")  # fmt: skip
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "loopwatch replay: --from 5 is past --to 2, where the range ends (--from/--to): see 'loopwatch replay --help'\n"
    )


def test_replay_with_the_defaults_says_that_loop_detection_is_off(empty: Path) -> None:
    """OpenClaw's defaults leave the detectors off: a first replay without --config finds almost nothing, and says
    why; with a config that turns them on, it finds the loops and says nothing."""
    looping = [json.dumps(e) for e in repeated_reads("cli-off", 12)]
    (empty / "events.jsonl").write_text("\n".join(looping) + "\n", encoding="utf-8")
    default = lw(empty, "replay", "--events", "events.jsonl")
    assert (default.code, default.out) == (0, "")
    assert default.err == (
        "loopwatch replay: note: loop detection is off for every agent (tools.loopDetection.enabled is not true, "
        "as in OpenClaw's defaults), so only the post-compaction guard can abort runs; to detect loops, give "
        "--config an OpenClaw config file with tools.loopDetection.enabled: true\n"
    )
    (empty / "off.json5").write_text("{ tools: { loopDetection: { enabled: false } } }", encoding="utf-8")
    off = lw(empty, "replay", "--events", "events.jsonl", "--config", "off.json5")
    assert "so no event can get a verdict" in off.err
    (empty / "on.json5").write_text(CONFIG, encoding="utf-8")
    on = lw(empty, "replay", "--events", "events.jsonl", "--config", "on.json5")
    assert (on.code, on.err) == (0, "")
    assert [json.loads(line)["decision"] for line in on.out.splitlines()] == ["warning"]
    explained = lw(empty, "replay", "--events", "events.jsonl", "--run", "cli-off")
    assert "detection disabled for this agent" in explained.out and "note:" not in explained.err


def test_config_errors_are_one_line(empty: Path) -> None:
    (empty / "bad.json5").write_text("{\n tools: ]\n}", encoding="utf-8")
    result = lw(empty, "config", "check", "bad.json5")
    assert result.code == 2
    assert result.first_error.startswith("loopwatch config check: cannot use the config file (bad.json5:2:")
    result = lw(empty, "replay", "--events", "missing.jsonl")
    assert (result.code, result.err) == (
        2,
        "loopwatch replay: cannot read the events file (missing.jsonl): No such file or directory; check the path, or "
        "give '-' to read stdin ('loopwatch simulate --out FILE' writes sample events)\n",
    )


def test_documented_config_check_example_is_the_real_output(empty: Path) -> None:
    readme = (REPO_ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    match = re.search(
        r"```json5\n(?P<file>.*?)```\n+```console\n\$ loopwatch config check openclaw\.json5\n(?P<out>.*?)```",
        readme,
        re.DOTALL,
    )
    assert match, "docs/semantics.md's config check example (a json5 block, then the console block) is missing"
    (empty / "openclaw.json5").write_text(match["file"], encoding="utf-8")
    done = subprocess.run(
        [LOOPWATCH, "config", "check", "openclaw.json5"],
        cwd=empty,
        env=clean_env({"PYTHONUNBUFFERED": "1"}),  # as in a terminal: each line as it is written
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == match["out"]


def test_documented_worker_flag_table_is_generated_from_the_options(tmp_path: Path) -> None:
    readme = (REPO_ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    begin, end = "<!-- worker-flags: python -m streams.worker.options -->\n", "\n<!-- /worker-flags -->"
    assert begin in readme and end in readme
    table = readme.split(begin, 1)[1].split(end, 1)[0]
    assert table == options.markdown_table(), "regenerate with: .venv/bin/python -m streams.worker.options"
    assert all(o.env.startswith("LOOPWATCH_") for o in options.OPTIONS)
    assert len({o.env for o in options.OPTIONS}) == len(options.OPTIONS)
    # Every flag `worker --help` shows is in the table ("every flag, its variable and default"), but the TLS/SASL
    # ones, which docs/kafka-security.md lists for every command; --profiles was missing and nothing noticed.
    shown = set(re.findall(r"\n  (--[a-z-]+)", lw(tmp_path, "worker", "--help").out))
    documented = set(re.findall(r"^\| `(--[a-z-]+)`", table, flags=re.M))
    assert {"--bootstrap", "--profiles", "--default-profile"} <= shown
    assert shown - documented - {flag for flag, _ in SECURITY_FLAGS} - {"--help"} == set()


@pytest.mark.parametrize("command", ["replay", "config check", "whatif", "simulate", "broker", "publish", "tail"])
def test_the_readme_synopsis_of_a_command_names_each_of_its_flags(command: str) -> None:
    """The command table left out real options (whatif --candidate-profile, replay --strict, publish --topic, ...),
    and showed optional ones as required. The Kafka security flags have their own page; the worker's row links
    to its table (checked above)."""
    import argparse

    from streams.cli import build_parser

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `loopwatch {command} (.*?)` \|", readme, flags=re.M)
    assert row is not None, command
    parser = build_parser()
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    flags = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    missing = flags - {flag for flag, _ in SECURITY_FLAGS} - {"--help"} - set(re.findall(r"--[a-z-]+", row[1]))
    assert missing == set(), command


def test_readme_exit_code_table_lists_every_status() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES:
        assert f"| {code} | {meaning} |" in readme, code


# --- with a broker -----------------------------------------------------------------------------------------


@dataclass
class RunningWorker:
    directory: Path
    log: Path
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    seconds_to_ready: float

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(scope="module")
def worker(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWorker]:
    """``loopwatch worker --bootstrap B`` from an empty directory: every other setting is a default (or a
    LOOPWATCH_* variable: the config, storms of 2 runs). It finds out by itself that the broker is the embedded
    one, as a user's worker started beside ``loopwatch broker`` does."""
    # A quick test in the suite's other process may hold a default port for a few seconds (a worker waiting for
    # Kafka): wait for them, bounded, before calling them taken.
    deadline = time.monotonic() + 60
    while (port_taken(DEFAULT_WEB_PORT) or port_taken(DEFAULT_METRICS_PORT)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if port_taken(DEFAULT_WEB_PORT) or port_taken(DEFAULT_METRICS_PORT):
        pytest.skip(f"the default ports {DEFAULT_WEB_PORT}/{DEFAULT_METRICS_PORT} are taken on this machine")
    directory = tmp_path_factory.mktemp("worker-home")
    (directory / "openclaw.json5").write_text(CONFIG, encoding="utf-8")
    env = clean_env({"LOOPWATCH_CONFIG": "openclaw.json5", "LOOPWATCH_STORM_RUNS": "2"})
    log = directory.parent / f"{directory.name}.log"
    started = time.monotonic()
    proc = start_process([LOOPWATCH, "worker", "--bootstrap", broker.bootstrap], env=env, log_path=log, cwd=directory)
    running = RunningWorker(directory, log, proc, env, 0.0)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}:\n{running.output()[-3000:]}")
            return "loopwatch worker: ready" in running.output()

        wait_until(ready, READY_TIMEOUT, 0.1, message="worker ready")
        running.seconds_to_ready = time.monotonic() - started
        yield running
    finally:
        stop_process(proc, 20)


@pytest.mark.integration
def test_worker_from_an_empty_directory_creates_its_data_dir_and_says_ready(worker: RunningWorker) -> None:
    data_dir = worker.directory / ".state" / "worker"
    assert data_dir.is_dir()
    lines = worker.output().splitlines()
    ready = next(line for line in lines if line.startswith("loopwatch worker: ready"))
    assert ready == (
        f"loopwatch worker: ready: group loopwatch, 12 of 12 partitions of loopwatch.events, store rocksdb in "
        f"{data_dir}, metrics http://127.0.0.1:{DEFAULT_METRICS_PORT}/metrics"
    )
    assert lines[0].startswith(
        f"loopwatch worker: starting: group loopwatch, 12 partitions, store rocksdb, data dir {data_dir}"
    )
    # Not told --embedded, it asked the broker: without the short sessions the join alone took 31 s.
    assert lines[0].endswith(", kafka PLAINTEXT (the embedded broker: short sessions)"), lines[0]
    before_ready = lines[: lines.index(ready)]
    assert len(before_ready) <= 6, "\n".join(before_ready)  # Faust's ~170 lines of start-up tables stay quiet
    assert not any("Starting..." in line or "note:" in line for line in lines), lines  # its config detects loops
    assert not any("Traceback" in line or "|" in line for line in lines)


@pytest.mark.integration
def test_a_worker_whose_broker_goes_away_says_so_without_flooding_its_log(empty: Path) -> None:
    """aiokafka logs the same connection errors about 40 times a second while Kafka is away: each is shown
    once, then at most every 30 s with a count of what was held back."""
    port, metrics, web = free_port(), free_port(), free_port()
    broker = EmbeddedBroker(port=port, log_path=empty.parent / "gone-broker.log")
    log = empty.parent / "gone-worker.log"
    args = ["worker", "--bootstrap", f"127.0.0.1:{port}", "--metrics-port", str(metrics), "--web-port", str(web)]
    broker.start()
    proc = None
    try:
        proc = start_process([LOOPWATCH, *args], env=clean_env(), log_path=log, cwd=empty)
        wait_until(lambda: "loopwatch worker: ready" in log.read_text(), READY_TIMEOUT, 0.1, message="worker ready")
        broker.kill()
        wait_until(lambda: "Unable connect to node" in log.read_text(), 30, 0.1, message="the first error")
        time.sleep(6)  # about 240 lines of them without the limiter
        output = log.read_text()
        assert proc.poll() is None, output[-3000:]  # it waits for Kafka to come back
        assert output.count("Unable connect to node") == 1, output[-3000:]
        # started without --config: OpenClaw's defaults, the detectors off, which it says once
        assert output.count("loopwatch worker: note: loop detection is off for every agent") == 1, output[-3000:]
        assert len(output.splitlines()) < 40, output[-3000:]
    finally:
        if proc is not None:
            stop_process(proc, 20)
        broker.stop()


@pytest.mark.integration
def test_a_second_worker_on_the_same_host_is_told_what_to_change(worker: RunningWorker, broker: EmbeddedBroker) -> None:
    pid = worker.proc.pid
    data_dir = worker.directory / ".state" / "worker"
    group = ["--group", "second", "--partitions", "3"]  # would create other topics, if it created any
    same = lw(worker.directory, "worker", "--bootstrap", broker.bootstrap, *group, env=worker.env)
    assert same.code == 3 and at_once(same, worker.directory, "worker", work=5)
    assert same.err == (
        f"loopwatch worker: data directory in use by another worker (pid {pid}) ({data_dir}): each worker on a "
        "host needs its own --data-dir (LOOPWATCH_DATA_DIR), --web-port and --metrics-port\n"
    )
    own_dir = lw(
        worker.directory, "worker", "--bootstrap", broker.bootstrap, *group, "--data-dir", "w2", env=worker.env
    )
    assert own_dir.code == 3
    assert own_dir.err == (
        f"loopwatch worker: web port in use (127.0.0.1:{DEFAULT_WEB_PORT}): each worker on a host needs its own "
        "--web-port (LOOPWATCH_WEB_PORT, 0 turns Faust's web server off), --data-dir and --metrics-port\n"
    )
    no_web = lw(
        worker.directory, "worker", "--bootstrap", broker.bootstrap, *group, "--data-dir", "w2", "--web-port", "0",
        env=worker.env,
    )  # fmt: skip
    assert no_web.code == 3
    assert no_web.err == (
        f"loopwatch worker: metrics port in use (127.0.0.1:{DEFAULT_METRICS_PORT}): each worker on a host needs "
        "its own --metrics-port (LOOPWATCH_METRICS_PORT, 0 turns metrics off), --data-dir and --web-port\n"
    )
    topics = lw(worker.directory, "tail", "--bootstrap", broker.bootstrap, "--topic", "second-runs-changelog")
    assert topics.err.startswith("loopwatch tail: no such topic (second-runs-changelog)")  # nothing was created


@pytest.mark.integration
def test_tail_renders_every_topic_by_record_type(worker: RunningWorker, broker: EmbeddedBroker) -> None:
    home = worker.directory
    records = [json.dumps(e) for run in ("cli-r1", "cli-r2") for e in repeated_reads(run, 11)]  # the 11th call warns
    (home / "events.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    sent = lw(home, "publish", "events.jsonl", "--bootstrap", broker.bootstrap)
    assert (sent.code, sent.out) == (0, "sent 22 events to loopwatch.events\n")
    (home / "bad.jsonl").write_text('{"type": "tool_\n', encoding="utf-8")
    bad = lw(home, "publish", "bad.jsonl", "--raw", "--bootstrap", broker.bootstrap)
    assert (bad.code, bad.out) == (0, "sent 1 record to loopwatch.events\n")

    def tail(topic: str, count: int, *, quiet: bool = True) -> list[str]:
        result = lw(
            home, "tail", "--bootstrap", broker.bootstrap, "--topic", topic, "--from-beginning", "--max", str(count),
            "--timeout", "45",
        )  # fmt: skip
        assert result.code == 0, result.err + worker.output()[-3000:]
        skipped = re.compile(
            r"loopwatch tail: warning: skipping a record that is not a JSON object \(loopwatch\.events\[\d+\]@\d+, "
            r"15 bytes\)\n"
        )
        assert result.err == "" if quiet else skipped.fullmatch(result.err) or result.err == "", result.err
        return result.out.splitlines()

    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    verdicts = tail("loopwatch.verdicts", 2)
    assert all(
        re.fullmatch(stamp + r" WARNING generic_repeat 10 \(threshold 10\) gw=gw-cli agent=main run=cli-r[12] "
                     r"tool=read \| WARNING: .*", line)
        for line in verdicts
    ), verdicts  # fmt: skip
    events = tail("loopwatch.events", 22, quiet=False)  # the bad record is not a JSON object: skipped with a warning
    assert sum(" EVENT   tool_call gw=gw-cli agent=main run=cli-r" in line for line in events) == 22
    assert all("the same text" not in line and "/repo" not in line for line in events)
    dead = tail("loopwatch.dead-letter", 1)
    assert re.fullmatch(
        stamp + r" DEAD    not_json loopwatch\.events\[\d+\]@\d+ key=- 15 bytes sha256=[0-9a-f]{12} \| .+", dead[0]
    ), dead
    alerts = tail("loopwatch.fleet-alerts", 1)
    assert re.fullmatch(
        stamp + r" STORM   signature generic_repeat tool=read outcome=[0-9a-f]{12} 2 runs \(threshold 2\) "
        r"verdicts=\d+ gateways=gw-cli window=300s alert=[0-9a-f]{12}",
        alerts[0],
    ), alerts
    as_json = lw(home, "tail", "--bootstrap", broker.bootstrap, "--from-beginning", "--max", "1", "--json")
    assert json.loads(as_json.out)["decision"] == "warning"  # --json: the record as published
    short = lw(home, "tail", "--bootstrap", broker.bootstrap, "--topic", "loopwatch.dead-letter", "--from-beginning",
               "--max", "2", "--timeout", "2")  # fmt: skip
    assert (short.code, short.out.count("\n")) == (1, 1), short.err
    assert short.err == "loopwatch tail: warning: 1 of the 2 records asked for (--max) came within 2 s (--timeout)\n"


@pytest.mark.integration
def test_a_worker_started_before_its_broker_waits_for_it_and_comes_up(empty: Path) -> None:
    """The quick start's two terminals, the worker's first: it waits for the broker (``--kafka-wait``, 30 s by
    default) instead of stopping because nothing listens yet."""
    port, metrics, web = free_port(), free_port(), free_port()
    bootstrap = f"127.0.0.1:{port}"
    env = clean_env({"LOOPWATCH_EMBEDDED": "1"})
    cmd = [LOOPWATCH, "worker", "--bootstrap", bootstrap, "--metrics-port", str(metrics), "--web-port", str(web)]
    log = empty.parent / f"{empty.name}-worker.log"
    worker = start_process(cmd, env=env, log_path=log, cwd=empty)
    broker = None
    try:
        waiting = f"loopwatch worker: nothing listens at {bootstrap} yet; waiting up to 30 s for Kafka"
        wait_until(lambda: waiting in log.read_text(encoding="utf-8"), READY_TIMEOUT, 0.1, message="waiting line")
        broker = start_process(
            [LOOPWATCH, "broker", "--port", str(port)],
            env=clean_env(),
            log_path=empty.parent / "late-broker.log",
            cwd=empty,
        )

        def ready() -> bool:
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited with {worker.returncode}:\n{log.read_text(encoding='utf-8')}")
            return "loopwatch worker: ready" in log.read_text(encoding="utf-8")

        wait_until(ready, READY_TIMEOUT, 0.2, message="worker ready")
        lines = log.read_text(encoding="utf-8").splitlines()
        assert lines.count(waiting) == 1 and not any("Traceback" in line for line in lines)
    finally:
        stop_process(worker, 20)
        if broker is not None:
            stop_process(broker, 20)


@pytest.mark.integration
def test_broker_on_a_taken_port_is_one_line(broker: EmbeddedBroker, empty: Path) -> None:
    result = lw(empty, "broker", "--port", str(broker.port))
    assert result.code == 3 and at_once(result, empty, "broker")  # no readiness wait
    assert result.err == (
        f"loopwatch broker: port in use ({broker.bootstrap}): another broker or program listens there; pick another "
        "--port (0: a free one)\n"
    )
    assert "\x1b[" not in result.err and result.out == ""


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, Path]]:
    from tests.support.certs import make_pki

    pki = make_pki(tmp_path_factory.mktemp("cli-pki"))
    embedded = EmbeddedBroker(tls_cert=pki.server_cert, tls_key=pki.server_key)
    embedded.start()
    try:
        yield embedded, pki.ca
    finally:
        embedded.stop()


@pytest.mark.integration
@pytest.mark.parametrize("command", ["tail", "publish"])
def test_tls_client_on_a_plaintext_listener(
    broker: EmbeddedBroker, empty: Path, tls_broker: tuple[EmbeddedBroker, Path], command: str
) -> None:
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    target = ["events.jsonl"] if command == "publish" else ["--timeout", "3"]
    _, ca = tls_broker
    result = lw(
        empty, command, *target, "--bootstrap", broker.bootstrap, "--security-protocol", "SSL", "--ssl-cafile", str(ca)
    )
    limit = "3" if command == "tail" else "5"
    assert result.code == 3 and at_once(result, empty, command, work=float(limit))  # was 16 s and a TimeoutError
    assert result.err == (
        f"loopwatch {command}: no TLS handshake within {limit} s ({broker.bootstrap}): the listener does not speak "
        "TLS (a plaintext listener?); use the broker's TLS port or --security-protocol PLAINTEXT\n"
    )


@pytest.mark.integration
def test_plaintext_client_on_a_tls_listener(empty: Path, tls_broker: tuple[EmbeddedBroker, Path]) -> None:
    tls, _ = tls_broker
    result = lw(empty, "tail", "--bootstrap", tls.bootstrap)
    assert result.code == 3 and at_once(result, empty, "tail", work=5)  # was 16 s and a bare TimeoutError
    assert result.err == (
        f"loopwatch tail: the broker closed the connection without a Kafka answer ({tls.bootstrap}): the listener "
        "may expect TLS; use --security-protocol SSL (with --ssl-cafile CA)\n"
    )
