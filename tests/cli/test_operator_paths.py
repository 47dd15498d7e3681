"""The operator's rough edges, run through the real ``loopwatch`` executable from an empty directory.

stdout that cannot be written (a full disk, a reader gone), SIGTERM, a broker that goes away under ``tail``, SASL
against a listener without SASL, and flags or files a command cannot use: each is one line on stderr (or none)
and the status of README's table, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.cli.tail import LOST_AFTER
from streams.kafka.admin import create_topics
from streams.kafka.client import partition_counts
from streams.kafka.compat import end_offsets
from streams.worker.settings import DEFAULT_PARTITIONS
from tests.support.cli import CONFIG, LOOPWATCH, READY_TIMEOUT, clean_env, lw, repeated_reads
from tests.support.procs import free_port, start_process, stop_process, wait_until

FULL = Path("/dev/full")
WRITE_FAILED = (
    "cannot write the output (stdout): No space left on device; free space there, or send the output elsewhere"
)


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    directory = tmp_path / "empty"
    directory.mkdir()
    (directory / "on.json5").write_text(CONFIG, encoding="utf-8")
    looping = [json.dumps(e) for e in repeated_reads("ops", 12)]  # the 11th call warns
    (directory / "events.jsonl").write_text("\n".join(looping) + "\n", encoding="utf-8")
    return directory


def run_into(cwd: Path, args: list[str], stdout: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run with stdout sent to ``stdout`` (a device); returns (status, stderr)."""
    with stdout.open("w") as out:
        done = subprocess.run(
            [LOOPWATCH, *args], cwd=cwd, env=clean_env(env), stdout=out, stderr=subprocess.PIPE, text=True,
            timeout=60, check=False,
        )  # fmt: skip
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def reading_stdin(pid: int) -> bool:
    """True while the process waits in a read of its stdin (Linux: /proc/PID/syscall, read is 0 and fd 0 first).
    Its SIGTERM handler no longer tells: the console script has one while it imports the command line."""
    try:
        call = Path(f"/proc/{pid}/syscall").read_text(encoding="utf-8").split()
    except OSError:
        return False
    return call[:2] == ["0", "0x0"]


def reader_goes_away(cwd: Path, args: list[str]) -> tuple[int, str]:
    """``loopwatch ARGS | head -1``: read one line, close the pipe; returns (status, stderr)."""
    proc = subprocess.Popen(
        [LOOPWATCH, *args], cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        code = proc.wait(60)
        return code, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# --- stdout -----------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["config", "check", "on.json5"], "config check"),  # a short table: written only when stdout is flushed
        (["replay", "--events", "events.jsonl", "--config", "on.json5"], "replay"),
        (["simulate", "--duration", "1"], "simulate"),
        (["whatif", "--events", "events.jsonl", "--candidate", "on.json5"], "whatif"),
        (["--help"], ""),
        (["worker", "--help"], "worker"),  # argparse's own exit: the command is named from the words typed
        (["config", "check", "--help"], "config check"),
        (["tail", "--topic", "worker", "--help"], "tail"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_full_stdout_is_one_line_and_status_2(empty: Path, args: list[str], command: str, unbuffered: bool) -> None:
    """Was a traceback and status 1 (for config check: "values adjusted"). Status 2 as for --out/--html."""
    env = {"PYTHONUNBUFFERED": "1"} if unbuffered else None
    code, err = run_into(empty, args, FULL, env)
    name = f"loopwatch {command}" if command else "loopwatch"
    assert (code, err) == (2, f"{name}: {WRITE_FAILED}\n")


@pytest.mark.parametrize(
    "args",
    [["simulate"], ["replay", "--events", "big.jsonl", "--all", "--config", "on.json5"]],
    ids=lambda value: value[0],
)
def test_a_reader_that_goes_away_ends_every_command_with_141(empty: Path, args: list[str]) -> None:
    """``loopwatch simulate | head -1`` ended with 0, ``replay | head -1`` with 141: README's 141 for every one."""
    if args[0] == "replay":
        lines = [json.dumps(e) for run in range(200) for e in repeated_reads(f"gone-{run}", 12)]
        (empty / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert reader_goes_away(empty, args) == (141, "")


# --- signals ----------------------------------------------------------------------------------------------------


def test_sigterm_stops_a_command_as_ctrl_c_does(empty: Path) -> None:
    """``publish -`` waiting for its input: SIGTERM interrupts it like Ctrl-C (130, one line), not 143."""
    proc = subprocess.Popen(
        [LOOPWATCH, "publish", "-", "--bootstrap", f"127.0.0.1:{free_port()}"], cwd=empty, env=clean_env(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: reading_stdin(proc.pid), 30, 0.05, message="publish reading its input")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out, err) == (130, b"", b"loopwatch publish: interrupted\n")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# --- refused before anything starts -----------------------------------------------------------------------------


def test_every_topic_only_replay_flag_is_refused_with_events(empty: Path) -> None:
    """--strict and --group were silently ignored with --events, while --from or --with-state were refused."""
    for flags in (
        ["--strict", "--group", "g"],
        ["--bootstrap", "127.0.0.1:9"],
        ["--from", "3"],
        ["--to", "3"],
        ["--compare-verdicts", "--verdicts-topic", "v"],
        ["--with-state", "--state-topic", "s"],
    ):
        result = lw(empty, "replay", "--events", "events.jsonl", *flags)
        given = ", ".join(flag for flag in flags if flag.startswith("--"))
        assert (result.code, result.out) == (2, ""), flags
        assert result.err == (
            f"loopwatch replay: flags that need --topic given with --events ({given}): see 'loopwatch replay --help'\n"
        )


@pytest.mark.parametrize("command", ["replay", "whatif"])
def test_a_missing_profiles_file_is_named_as_the_profiles_file(empty: Path, command: str) -> None:
    args = ["--events", "events.jsonl", "--profiles", "missing.json"]
    result = lw(empty, command, *args, *(["--candidate", "on.json5"] if command == "whatif" else []))
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"loopwatch {command}: cannot use the profiles file (--profiles missing.json): cannot read: No such file or "
        "directory; check the path given to --profiles\n"
    )


# --- with a broker ----------------------------------------------------------------------------------------------


def start_broker(directory: Path, *topics: str) -> tuple[subprocess.Popen[bytes], str]:
    """``loopwatch broker --port P --topic …`` as an operator starts it; (process, bootstrap) once ready."""
    port = free_port()
    log = directory / f"broker-{port}.log"
    args = [LOOPWATCH, "broker", "--port", str(port), *(a for t in topics for a in ("--topic", t))]
    proc = start_process(args, env=clean_env(), log_path=log, cwd=directory)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"broker exited with {proc.returncode}:\n{log.read_text()}")
            return "broker ready on" in log.read_text()

        wait_until(ready, READY_TIMEOUT, 0.1, message="broker ready")
    except BaseException:
        stop_process(proc, 20)
        raise
    return proc, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker whose events topic holds 1,800 events (more than a pipe buffer of tail --json lines)."""
    home = tmp_path_factory.mktemp("ops-broker")
    proc, address = start_broker(home, "loopwatch.verdicts:2")
    try:
        assert lw(home, "simulate", "--duration", "30", "--out", "traffic.jsonl").code == 0
        sent = lw(home, "publish", "traffic.jsonl", "--bootstrap", address, "--partitions", "2")
        assert sent.code == 0, sent.err
        yield address
    finally:
        stop_process(proc, 20)


@pytest.mark.integration
def test_tail_whose_reader_goes_away_ends_with_141(empty: Path, bootstrap: str) -> None:
    args = ["tail", "--bootstrap", bootstrap, "--topic", "loopwatch.events", "--from-beginning", "--json"]
    assert reader_goes_away(empty, args) == (141, "")


@pytest.mark.integration
def test_tail_on_a_quiet_topic_whose_reader_goes_away_ends_with_141_at_once(empty: Path, bootstrap: str) -> None:
    """``tail | head -1`` where no record follows the first: it noticed the closed pipe only at its next write, so
    it waited for ever (README: 141 once the reader is gone)."""
    topic = "quiet.verdicts"
    assert lw(empty, "simulate", "--duration", "1", "--out", "one.jsonl").code == 0
    first = (empty / "one.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (empty / "one.jsonl").write_text(first + "\n", encoding="utf-8")
    sent = lw(empty, "publish", "one.jsonl", "--bootstrap", bootstrap, "--topic", topic, "--partitions", "1")
    assert sent.code == 0, sent.err
    started = time.monotonic()
    args = ["tail", "--bootstrap", bootstrap, "--topic", topic, "--from-beginning", "--json"]
    assert reader_goes_away(empty, args) == (141, "")
    assert time.monotonic() - started < 30  # the wait is bounded by reader_goes_away's 60 s


@pytest.mark.integration
def test_tail_whose_filter_shows_nothing_of_a_busy_topic_ends_with_141_once_its_reader_goes(
    empty: Path, bootstrap: str
) -> None:
    """Records kept coming and the filter left each out: nothing was written, so nothing noticed the closed pipe
    (a review). A realtime simulate keeps the topic busy for the whole test."""
    topic = "busy.events"
    sim_log = empty / "simulate.log"
    traffic = [LOOPWATCH, "simulate", "--bootstrap", bootstrap, "--topic", topic, "--rate", "50", "--realtime",
               "--duration", "60"]  # fmt: skip
    sim = start_process(traffic, env=clean_env(), log_path=sim_log, cwd=empty)
    try:
        wait_until(lambda: lw(empty, "tail", "--bootstrap", bootstrap, "--topic", topic, "--max", "1",
                              "--timeout", "2").code == 0, 60, 0.5, message="traffic flowing")  # fmt: skip
        args = [LOOPWATCH, "tail", "--bootstrap", bootstrap, "--topic", topic, "--gateway", "nobody-has-this"]
        proc = subprocess.Popen(args, cwd=empty, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            time.sleep(2)  # following, with records coming and none shown
            assert proc.poll() is None
            proc.stdout.close()
            assert (proc.wait(20), proc.stderr.read()) == (141, b"")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    finally:
        stop_process(sim, 20)


@pytest.mark.integration
def test_verdict_filters_on_a_topic_of_events_say_so_once(empty: Path, bootstrap: str) -> None:
    """``tail --topic loopwatch.events --decision warning`` showed nothing and said nothing, and ``--escalations``
    let every event through unremarked (a first-hour review): each now says once what it does there."""
    common = ["tail", "--bootstrap", bootstrap, "--topic", "loopwatch.events", "--from-beginning"]
    decision = lw(empty, *common, "--decision", "warning", "--timeout", "3")
    assert (decision.code, decision.out) == (0, "")
    assert decision.err == (
        "loopwatch tail: warning: --decision keeps only verdicts; loopwatch.events has event records, which it leaves "
        "out\n"
    )
    escalations = lw(empty, *common, "--escalations", "--max", "5", "--timeout", "30")
    assert escalations.code == 0 and len(escalations.out.splitlines()) == 5
    assert escalations.err == (
        "loopwatch tail: warning: --escalations applies to verdicts only; loopwatch.events has event records, which "
        "it shows unfiltered\n"
    )


@pytest.mark.integration
def test_tail_stopped_with_sigterm_ends_with_0(empty: Path, bootstrap: str) -> None:
    """Was 143 and nothing said; README: a follow command stopped with Ctrl-C or SIGTERM ends with 0."""
    log = empty / "tail.log"
    args = ["tail", "--bootstrap", bootstrap, "--topic", "loopwatch.events", "--from-beginning", "--max", "999999"]
    proc = start_process([LOOPWATCH, *args], env=clean_env(), log_path=log, cwd=empty)
    try:
        wait_until(lambda: log.read_text().count("\n") >= 10, 60, 0.1, message="tail following")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not [line for line in log.read_text().splitlines() if " EVENT " not in line]  # nothing but records
    finally:
        stop_process(proc, 20)


@pytest.mark.integration
def test_sasl_against_a_listener_without_sasl_is_one_line_for_every_command(empty: Path, bootstrap: str) -> None:
    """Was aiokafka's raw "UnsupportedSaslMechanismError" line and then "Unable to bootstrap"; whatif said 2."""
    sasl = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"]
    env = {"LOOPWATCH_KAFKA_SASL_PASSWORD": "secret-x"}
    for argv in (
        ["tail", "--bootstrap", bootstrap],
        ["publish", "events.jsonl", "--bootstrap", bootstrap],
        ["simulate", "--duration", "1", "--bootstrap", bootstrap],
        ["replay", "--topic", "loopwatch.events", "--bootstrap", bootstrap],
        ["whatif", "--topic", "loopwatch.events", "--bootstrap", bootstrap, "--candidate", "on.json5"],
    ):
        result = lw(empty, *argv, *sasl, env=env)
        assert (result.code, result.out) == (3, ""), result.err
        assert result.err == (
            f"loopwatch {argv[0]}: the listener does not offer SASL mechanism PLAIN ({bootstrap}): it refused the "
            "SASL handshake, as a listener without SASL does (the embedded broker has none); use --security-protocol "
            "PLAINTEXT (SSL on a TLS listener) or the broker's SASL listener\n"
        )


@pytest.mark.integration
def test_compare_verdicts_names_a_missing_verdicts_topic_before_reading_the_events(empty: Path, bootstrap: str) -> None:
    """It read the whole events topic first; now the verdicts topic is checked first, so even a missing events
    topic is not what it reports."""
    for events in ("loopwatch.events", "no-such-events"):
        result = lw(empty, "replay", "--topic", events, "--bootstrap", bootstrap, "--compare-verdicts",
                    "--verdicts-topic", "nope")  # fmt: skip
        assert (result.code, result.out) == (2, "")
        assert result.err == (
            f"loopwatch replay: cannot read topic nope ({bootstrap}): no such topic; give an existing topic with "
            "--verdicts-topic\n"
        )


@pytest.mark.integration
def test_a_missing_topic_names_the_closest_ones_or_the_flag(empty: Path, bootstrap: str) -> None:
    """replay and whatif said only "no such topic", with nothing to do; the state topic's error did not say it
    comes from --group (a QA pass). One hint now: the closest existing names, else the flag naming the topic."""
    kafka = ["--bootstrap", bootstrap]
    cases = [
        (["replay", "--topic", "loopwatch.event"], "replay: cannot read topic loopwatch.event", "--topic"),
        (["whatif", "--topic", "loopwatch.event", "--candidate", "on.json5"], "whatif: cannot read topic", "--topic"),
        (
            ["replay", "--topic", "loopwatch.events", "--compare-verdicts", "--verdicts-topic", "loopwatch.verdict"],
            "replay: cannot read topic loopwatch.verdict",
            "--verdicts-topic",
        ),
    ]
    for argv, what, flag in cases:
        result = lw(empty, *argv, *kafka)
        assert (result.code, result.out) == (2, ""), result.err
        close = "loopwatch.verdicts" if flag == "--verdicts-topic" else "loopwatch.events"
        assert result.err.startswith(f"loopwatch {what}"), result.err
        assert result.err.endswith(f" ({bootstrap}): no such topic; did you mean {close}? (check {flag})\n")
    tail = lw(empty, "tail", "--topic", "loopwatch.verdict", *kafka)
    assert (tail.code, tail.err) == (2, "loopwatch tail: no such topic (loopwatch.verdict): did you mean "
                                        "loopwatch.verdicts? (check --topic)\n")  # fmt: skip
    unlike = lw(empty, "tail", "--topic", "zzz", *kafka)
    assert (unlike.code, unlike.err) == (
        2,
        "loopwatch tail: no such topic (zzz): give an existing topic with --topic\n",
    )

    state = ["replay", "--topic", "loopwatch.events", *kafka, "--with-state", "--group", "nosuch"]
    where = f"loopwatch replay: cannot read the worker's stored state in nosuch-runs-changelog ({bootstrap})"
    named = "no such topic; the stored state's topic is named after --group (GROUP-runs-changelog)"
    result = lw(empty, *state)
    assert (result.code, result.err.splitlines()[-1]) == (2, f"{where}: {named}; the cluster has none"), result.err
    create_topics(bootstrap, {"ops-runs-changelog": 1})
    result = lw(empty, *state)
    assert (result.code, result.err.splitlines()[-1]) == (2, f"{where}: {named}; existing: ops-runs-changelog")
    # Checked before the events are read: it came last, after a line for each bad record of the whole range.
    (empty / "bad.jsonl").write_text('{"not": "an event"}\n' * 3, encoding="utf-8")
    sent = lw(empty, "publish", "bad.jsonl", "--raw", "--topic", "bad.events", "--partitions", "1", *kafka)
    assert sent.code == 0, sent.err
    bad = ["replay", "--topic", "bad.events", *kafka, "--with-state", "--group", "nosuch"]
    result = lw(empty, *bad)
    assert (result.code, result.out) == (2, "")
    assert result.err == f"{where}: {named}; existing: ops-runs-changelog\n"


@pytest.mark.integration
def test_a_per_partition_position_past_its_end_is_noted(empty: Path, bootstrap: str) -> None:
    """``--from 0:N,1:M`` with M past partition 1's end replayed nothing from it, without a word (a QA pass)."""
    ends = asyncio.run(end_offsets(bootstrap, [("loopwatch.events", 0), ("loopwatch.events", 1)]))
    end = {tp.partition: offset for tp, offset in ends.items()}
    assert end[0] > 5 and end[1] > 0
    replay = ["replay", "--topic", "loopwatch.events", "--bootstrap", bootstrap, "--config", "on.json5"]
    result = lw(empty, *replay, "--from", f"0:{end[0] - 5},1:{end[1] + 100}")
    assert result.code == 0, result.err
    assert result.err == (
        f"loopwatch replay: note: --from 1:{end[1] + 100} is past partition 1's end offset {end[1]} (nothing read "
        "from it); check --from/--to\n"
    )
    inside = lw(empty, *replay, "--from", "0:0,1:0", "--to", f"0:{end[0]}")  # unlisted in --to: to its end
    assert (inside.code, inside.err) == (0, ""), inside.err
    big = max(end.values()) + 1  # every partition's --to past its end: read to the end, and said so
    past = lw(empty, *replay, "--from", f"1:{end[1]}", "--to", str(big))
    assert past.code == 0 and past.err.splitlines()[0] == (
        f"loopwatch replay: note: --to {big} is past partition 0's end offset {end[0]} (read to its end); "
        f"--to {big} is past partition 1's end offset {end[1]} (read to its end); check --from/--to"
    ), past.err
    text = lw(empty, "replay", "--help").out
    assert "partitions not listed are read from their first offset" in " ".join(text.split())


@pytest.mark.integration
def test_tail_whose_broker_goes_away_says_so_once_and_ends_with_3(empty: Path) -> None:
    """Was 2,047 raw aiokafka lines in 50 s and no end: now none of aiokafka's retries, one error line and status
    3, LOST_AFTER seconds after the broker last answered."""
    broker, address = start_broker(empty, "loopwatch.verdicts:4")
    log = empty / "tail.log"
    tail = None
    try:
        verdict = json.dumps({"decision": "warning", "gateway_id": "gw-ops", "run_id": "ops"})
        (empty / "verdict.jsonl").write_text(verdict + "\n", encoding="utf-8")
        sent = lw(empty, "publish", "verdict.jsonl", "--raw", "--topic", "loopwatch.verdicts", "--bootstrap", address)
        assert sent.code == 0, sent.err
        tail = start_process(
            [LOOPWATCH, "tail", "--bootstrap", address, "--from-beginning"], env=clean_env(), log_path=log, cwd=empty
        )
        wait_until(lambda: "gateway_id" in log.read_text(), 60, 0.1, message="tail following")
        stop_process(broker, 20)
        gone = time.monotonic()
        code = tail.wait(LOST_AFTER + 30)
        took = time.monotonic() - gone
        lines = log.read_text().splitlines()
        assert code == 3, lines
        assert lines[-1] == (
            f"loopwatch tail: lost the connection to Kafka ({address}): no bootstrap server has answered for "
            f"{LOST_AFTER:g} s (the last try: cannot connect to Kafka); run tail again once the broker is back"
        )
        assert len(lines) == 2, lines  # the record's line, then that one: none of aiokafka's retries
        assert LOST_AFTER - 2 < took < LOST_AFTER + 20, took
    finally:
        if tail is not None:
            stop_process(tail, 20)
        stop_process(broker, 20)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("publish", "x.jsonl", "--topic", "a@b"), "'a@b' has characters a topic name cannot have ('@') (--topic)"),
        (("tail", "--topic", ""), "a topic name cannot be empty (--topic)"),
        (("simulate", "--topic", "."), "'.' cannot be a topic name (--topic)"),
        (("replay", "--topic", "x", "--state-topic", "a b"), "'a b' has characters a topic name cannot have (' ')"),
        (("whatif", "--config", "c", "--candidate", "d", "--topic", "x/y"), "'x/y' has characters a topic name"),
    ],
)
def test_every_topic_flag_refuses_a_name_kafka_refuses(empty: Path, args: tuple[str, ...], line: str) -> None:
    """The embedded broker creates names a real cluster refuses: each command checks a topic name where it is
    typed, by the worker's rule (streams/topics.py), before reading a file or connecting."""
    result = lw(empty, *args)
    assert result.code == 2 and result.err.startswith(f"loopwatch {args[0]}: {line}"), result.err
    assert len(result.err.splitlines()) == 1


@pytest.mark.integration
@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("argv", "count", "said"),
    [
        (["publish", "events.jsonl", "--partitions", "2"], 12, ""),
        (["simulate", "--gateways", "2", "--rate", "20", "--duration", "1"], 20, r" in \d+\.\d s"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_a_sending_command_says_what_it_sent_on_stdout_even_when_that_fails(
    empty: Path, bootstrap: str, argv: list[str], count: int, said: str
) -> None:
    """``publish > /dev/full`` sent every event, then said only "cannot write the output" (exit 2), so a retry
    sent them twice; ``publish >&-`` did the same; ``simulate --bootstrap`` said "published N records" on stderr.
    Both now end with the same line on stdout; a closed stdout is refused before anything is sent, and a full one
    names what was sent in its one line."""
    command = argv[0]

    def published(topic: str) -> int:
        partitions = range(asyncio.run(partition_counts(bootstrap))[topic])
        return sum(asyncio.run(end_offsets(bootstrap, [(topic, p) for p in partitions], timeout=15.0)).values())

    def line(topic: str) -> str:
        return rf"sent {count} events to {re.escape(topic)}{said}"

    base = [*argv, "--bootstrap", bootstrap]
    sent = lw(empty, *base, "--topic", f"{command}-said")
    assert sent.code == 0 and sent.err == "" and re.fullmatch(line(f"{command}-said") + "\n", sent.out), sent
    assert published(f"{command}-said") == count
    closed = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >&-', LOOPWATCH, *base, "--topic", f"{command}-closed"],
        cwd=empty, env=clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (closed.returncode, closed.stderr) == (2, f"loopwatch {command}: cannot write the output (stdout): "
        "standard output is closed; redirect it to a file or to /dev/null instead of closing it (>&-)\n")  # fmt: skip
    assert f"{command}-closed" not in asyncio.run(partition_counts(bootstrap))
    code, err = run_into(empty, [*base, "--topic", f"{command}-full"], FULL)
    full = rf"loopwatch {command}: {line(f'{command}-full')}, but cannot write that to the output \(stdout\): No space "
    assert code == 2 and re.fullmatch(full + "left on device; free space there, or send the output elsewhere\n", err), (
        err
    )
    assert published(f"{command}-full") == count


@pytest.mark.integration
@pytest.mark.parametrize("command", [["publish", "events.jsonl"], ["simulate", "--gateways", "1", "--duration", "1"]])
def test_a_sending_command_creates_a_missing_topic_as_the_worker_requires_it(
    empty: Path, bootstrap: str, command: list[str]
) -> None:
    """``simulate --bootstrap`` left the topic to the broker, which made it with its own default of 4 partitions,
    and the next ``loopwatch worker`` with its defaults refused it ("topic has 4 partitions, 12 required"). Both
    sending commands now create it as the worker would: ``--partitions``, else ``LOOPWATCH_PARTITIONS``, else the
    worker's default."""
    (empty / "events.jsonl").write_text(
        "\n".join(json.dumps(e) for e in repeated_reads("make", 3)) + "\n", encoding="utf-8"
    )
    name = command[0]
    cases = ((f"{name}-default", [], {}, DEFAULT_PARTITIONS), (f"{name}-flag", ["--partitions", "2"], {}, 2),
             (f"{name}-env", [], {"LOOPWATCH_PARTITIONS": "3"}, 3))  # fmt: skip
    for topic, extra, env, want in cases:
        sent = lw(empty, *command, "--bootstrap", bootstrap, "--topic", topic, *extra, env=env)
        assert sent.code == 0, sent
        assert asyncio.run(partition_counts(bootstrap))[topic] == want
    kept = lw(empty, *command, "--bootstrap", bootstrap, "--topic", f"{name}-flag", "--partitions", "5")
    assert kept.code == 0 and asyncio.run(partition_counts(bootstrap))[f"{name}-flag"] == 2  # an existing topic
