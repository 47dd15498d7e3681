"""``loopwatch whatif`` as a user runs it: formats, bad input, errors and exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from streams.audit import source
from streams.audit.source import read_records
from streams.cli import main
from streams.config_file import LoadedConfig
from streams.decode import KEY_MISMATCH
from streams.kafka.reader import RecordSource, TopicRecord
from streams.whatif import build_report, to_json
from streams.worker.processing import InputRecord, RunProcessor, plan_batch
from tests.support.audit import ListSource
from tests.support.cli import lw
from tests.support.scenarios import config_document, wire_events
from tests.whatif.support import SCENARIOS, candidate_file, scenario_files, whatif
from tests.worker.support import long_id_calls, records

STICKY = "generic_warning_then_block_sticky"


def _run(capsys: pytest.CaptureFixture[str], *argv: str, records: RecordSource | None = None) -> tuple[int, str, str]:
    code = main(["whatif", *argv], record_source=records)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_table_lists_counts_changes_and_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    code, out, _ = _run(
        capsys,
        *("--config", str(config), "--candidate", str(candidate), "--events", str(events)),
        *("--sweep", "warningThreshold=8..12:2", "--limit", "5"),
    )
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("DETECTOR"))
    assert header.split() == [
        *("DETECTOR", "AGENT", "TOOL", "WARN", "RUNS", "WARN", "CALLS", "BLOCK", "RUNS", "BLOCK", "CALLS"),
        *("ABORT", "RUNS", "ABORT", "CALLS"),
    ]
    row = next(line for line in lines if line.startswith("generic_repeat"))
    assert row.split() == ["generic_repeat", "main", "read", "1", "1", "1", "3→8", "0", "0"]
    assert "Runs that change: 1" in out
    assert "    index 15 (read): none → block generic_repeat count 15" in lines
    sweep = lines[lines.index(next(x for x in lines if x.startswith("VALUE"))) + 1 :]
    assert [x.split()[:2] for x in sweep] == [["8", "8/20/30"], ["10", "10/20/30"], ["12", "12/20/30"]]


def test_nothing_to_compare_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = scenario_files(STICKY, tmp_path)
    code, out, err = _run(capsys, "--events", str(events))
    assert (code, out) == (2, "")
    assert "give --candidate FILE and/or --sweep" in err


@pytest.mark.parametrize("sweep", ["warningThreshold=x", "enabled=1..2"])
def test_bad_sweep_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: str) -> None:
    _, events = scenario_files(STICKY, tmp_path)
    code, _, err = _run(capsys, "--events", str(events), "--sweep", sweep)
    assert code == 2 and err.startswith("loopwatch whatif: ") and " (--sweep): " in err


def test_unreadable_inputs_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    bad = tmp_path / "bad.json5"
    bad.write_text("{\n  tools: { loopDetection: { enabled: true,, } }\n}\n")
    code, _, err = _run(capsys, "--config", str(config), "--candidate", str(bad), "--events", str(events))
    assert code == 2 and "bad.json5:2:" in err
    code, _, err = _run(capsys, "--candidate", str(config), "--events", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "cannot read" in err


def test_config_warnings_name_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    odd = tmp_path / "odd.json5"
    odd.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 2.5}}}")
    code, _, err = _run(capsys, "--config", str(config), "--candidate", str(odd), "--events", str(events))
    assert code == 0
    assert re.search(
        r"^loopwatch whatif: candidate config: warning: tools\.loopDetection\.warningThreshold", err, re.MULTILINE
    ), err


def test_bad_lines_exit_2_unless_skipped(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    lines = events.read_bytes().splitlines()
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_bytes(b"\n".join([b"{not json", *lines[:5], b'{"type": "teleport"}', *lines[5:], b""]) + b"\n")
    argv = ["whatif", "--config", str(config), "--candidate", str(candidate), "--events", str(dirty)]
    assert main([*argv, "--format", "json"]) == 2
    captured = capsysbinary.readouterr()
    assert captured.out == b""
    err = captured.err.decode()
    assert f"{dirty}:1: invalid event (not_json)" in err
    assert f"{dirty}:7: invalid event (unknown_type)" in err
    assert err.rstrip().splitlines()[-1] == (
        f"loopwatch whatif: 2 lines of {dirty} are not events: fix the file, or pass --skip-invalid to report such "
        "lines and go on"
    )
    report = whatif(capsysbinary, *argv[1:], "--skip-invalid")
    assert report["events"] == {"source": str(dirty), "count": 23, "invalid": 2, "runs": 1}
    clean = whatif(capsysbinary, *argv[1:6], str(events))
    # Same differences; indices are line numbers, shifted by the bad lines before each event.
    shifted = [c["index"] for c in report["changed_runs"][0]["changes"]]
    assert shifted == [c["index"] + 2 for c in clean["changed_runs"][0]["changes"]]
    assert report["summary"] == clean["summary"]


def test_html_is_self_contained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    html = tmp_path / "report.html"
    argv = ["--config", str(config), "--candidate", str(candidate), "--events", str(events)]
    code, out, _ = _run(capsys, *argv, "--sweep", "criticalThreshold=12..22", "--html", str(html))
    assert code == 0 and out.startswith("loopwatch what-if")
    text = html.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<title>loopwatch what-if report</title>" in text
    for forbidden in ("<script", "<link", "src=", "url(", "@import"):
        assert forbidden not in text
    assert re.findall(r'https?://[^"\s<]+', text) == ["http://www.w3.org/2000/svg"] * text.count("<svg")
    assert text.count('class="chart chart-time"') == 1  # generic_repeat only
    assert text.count('class="chart chart-sweep"') == 1


def test_html_of_events_past_the_year_9999_labels_their_milliseconds(tmp_path: Path) -> None:
    """A gateway sending microseconds puts ``ts`` past the year 9999; replay and tail take such events, and the
    HTML report crashed on its time axis. Its ticks now show the raw milliseconds, through the real command."""
    config, events = scenario_files(STICKY, tmp_path)
    lines = events.read_text(encoding="utf-8").splitlines()
    shifted = [json.dumps({**json.loads(line), "ts": json.loads(line)["ts"] * 1000 + 10**16}) for line in lines]
    events.write_text("\n".join(shifted) + "\n", encoding="utf-8")
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    html = tmp_path / "report.html"
    done = lw(tmp_path, "whatif", "--config", str(config), "--candidate", str(candidate), "--events", str(events),
              "--html", str(html))  # fmt: skip
    assert (done.code, done.err) == (0, ""), done.err
    assert "loopwatch what-if" in done.out
    assert re.search(r">1\d{16}<", html.read_text(encoding="utf-8"))


def _key(event: dict[str, Any]) -> bytes:
    return str(event["run_id"] or event["session_id"]).encode()


def test_topic_records_keep_their_partition_and_offset() -> None:
    scenario = SCENARIOS[STICKY]
    records = [
        TopicRecord(1, 100 + i, 1_767_225_600_000 + i, _key(e), json.dumps(e).encode())
        for i, e in enumerate(wire_events(scenario))
    ]
    events, bad = read_records([*records, TopicRecord(1, 999, 0, None, b"")], "loopwatch.events")
    assert bad == 1 and [e.source for e in events] == [(1, 100 + i) for i in range(23)]
    current = LoadedConfig.from_document(config_document(scenario))
    candidate = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True, "criticalThreshold": 15}}})
    report = to_json(build_report(events, current, candidate, source="topic loopwatch.events"))
    first = report["changed_runs"][0]["changes"][0]
    assert first["source"] == {"partition": 1, "offset": 115}
    assert first["text"] == "index 15 (partition 1 offset 115) (read): none → block generic_repeat count 15"


def test_topic_records_are_refused_exactly_as_the_worker_dead_letters_them(capsys: pytest.CaptureFixture[str]) -> None:
    events = wire_events(SCENARIOS[STICKY])
    key = _key(events[0])
    values = [json.dumps(e).encode() for e in events[:6]]
    keys: list[bytes | None] = [key, b"not-the-scope-key", key, None, key, key]
    values[4] = b"{not json"
    records = [TopicRecord(0, offset, offset, k, v) for offset, (k, v) in enumerate(zip(keys, values, strict=True))]

    worker = plan_batch([InputRecord("t", 0, r.offset, r.key, r.value) for r in records], 0)
    dead = [d.reason for d in worker.dead_letters]
    assert dead == [KEY_MISMATCH, KEY_MISMATCH, "not_json"]
    applied = [records[i].offset for g in worker.groups.values() for i in g.indexes]

    whatif_events, whatif_bad = read_records(records, "t")
    assert [e.source for e in whatif_events] == [(0, offset) for offset in applied] == [(0, 0), (0, 2), (0, 5)]
    assert whatif_bad == len(dead)
    err = capsys.readouterr().err
    assert "t[0]@1: invalid event (key_mismatch): record key differs" in err
    assert "t[0]@3: invalid event (key_mismatch): record has no key" in err

    replayed, replay_bad = source.decode_records({0: records})
    assert [pe.index for pe in replayed[0]] == applied
    assert [(b.offset, b.reason) for b in replay_bad] == [(1, KEY_MISMATCH), (3, KEY_MISMATCH), (4, "not_json")]


def test_sweeping_with_rolling_detection_off_says_why_nothing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, events = scenario_files(STICKY, tmp_path)
    code, out, err = _run(capsys, "--events", str(events), "--sweep", "warningThreshold=5..6")
    assert code == 0 and "current    (OpenClaw defaults)" in out
    assert "note: loop detection is off for every agent of the current config" in err
    # a candidate as off as the current config: "Runs that change: 0" said nothing of why
    code, out, err = _run(capsys, "--events", str(events), "--candidate-profile", "openclaw-2026.9")
    assert code == 0 and "note: loop detection is off for every agent of both configs" in err, err
    on = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    code, _, err = _run(capsys, "--events", str(events), "--candidate", str(on))
    assert code == 0 and "note:" not in err, err
    code, _, err = _run(capsys, "--events", str(events), "--sweep", "postCompactionGuard.windowSize=2..3")
    assert code == 0 and "note:" not in err


def test_whatif_topic_refuses_what_the_worker_dead_letters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``whatif --topic`` as a user runs it: a mis-keyed record is refused, named and counted, never analysed; the
    report still comes (as replay --topic goes on), since a production events topic holds such records."""
    events = wire_events(SCENARIOS[STICKY])
    key = _key(events[0])
    records = [TopicRecord(0, offset, offset, key, json.dumps(e).encode()) for offset, e in enumerate(events)]
    records[3] = TopicRecord(0, 3, 3, b"another-run", records[3].value)  # what a buggy producer would key
    dead = [
        d.reason for d in plan_batch([InputRecord("t", 0, r.offset, r.key, r.value) for r in records], 0).dead_letters
    ]
    assert dead == [KEY_MISMATCH]
    served = ListSource({"t": records})
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    argv = ("--topic", "t", "--bootstrap", "b:1", "--candidate", str(candidate), "--format", "json")
    for extra in ((), ("--skip-invalid",)):
        code, out, err = _run(capsys, *argv, *extra, records=served)
        assert code == 0 and err.count("invalid event") == 1, err
        assert "t[0]@3: invalid event (key_mismatch): record key differs" in err
        assert json.loads(out)["events"] == {
            "source": "topic t",
            "count": len(records) - len(dead),
            "invalid": 1,
            "runs": 1,
        }


def test_whatif_topic_reads_the_range_from_and_to_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ "What would a new threshold have flagged last week": ``--from``/``--to`` bound the topic read as replay's do,
    and the report is the one of the same events given as a file."""
    config, events_file = scenario_files(STICKY, tmp_path)
    events = wire_events(SCENARIOS[STICKY])
    key = _key(events[0])
    records = [TopicRecord(0, offset, offset, key, json.dumps(e).encode()) for offset, e in enumerate(events)]
    served = ListSource({"t": records})
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    argv = ("--config", str(config), "--candidate", str(candidate), "--format", "json")
    topic = ("--topic", "t", "--bootstrap", "b:1")
    code, out, err = _run(capsys, *argv, *topic, "--from", "3", "--to", "14", records=served)
    assert code == 0 and err == "", err
    ranged = json.loads(out)
    part = tmp_path / "part.jsonl"
    part.write_text("".join(json.dumps(e) + "\n" for e in events[3:14]), encoding="utf-8")
    code, out, _ = _run(capsys, *argv, "--events", str(part))
    from_file = json.loads(out)
    assert ranged["events"] == {**from_file["events"], "source": "topic t (--from 3 --to 14)"}
    assert ranged["events"]["count"] == 11 and ranged["summary"] == from_file["summary"]
    code, _, err = _run(capsys, *argv, *topic, "--from", "14", "--to", "3", records=served)
    assert code == 2 and err.startswith("loopwatch whatif: ") and "(--from/--to)" in err, err
    code, _, err = _run(capsys, *argv, *topic, "--from", "999", records=served)
    assert code == 0 and "note: no record of t in the range" in err, err
    code, _, err = _run(capsys, *argv, "--events", str(events_file), "--from", "3")
    assert code == 2 and "flags that need --topic given with --events (--from)" in err, err


def test_a_topic_without_one_event_is_named_as_another_kind_s_topic(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``whatif --topic loopwatch.verdicts`` printed one invalid-event line per verdict (and with --skip-invalid
    reported "0 events"); as replay, it is one line naming where events are."""
    verdict = {"verdict_id": "v1", "decision": "warning", "run_id": "r1"}
    served = ListSource(
        {"loopwatch.verdicts": [TopicRecord(0, i, 0, b"r1", json.dumps(verdict).encode()) for i in range(3)]}
    )
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    for extra in ((), ("--skip-invalid",)):
        argv = ("--topic", "loopwatch.verdicts", "--bootstrap", "b:1", "--candidate", str(candidate), *extra)
        code, out, err = _run(capsys, *argv, records=served)
        assert (code, out) == (2, ""), err
        assert err.count("\n") == 1 and "topic loopwatch.verdicts holds no events" in err, err
        assert "--events-topic" in err


def test_events_a_config_cannot_apply_are_reported_once_per_config_as_the_worker_dead_letters_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate whose ``historySize`` lets a run's state outgrow a stored record: the worker would
    dead-letter that run's later events (``state_too_large``). The report counts them per config and per sweep
    value, and lists each in JSON, at the very offsets the worker skips; stderr gets no line per event and config."""
    calls = long_id_calls(140, "wide")
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(ev) + "\n" for ev in calls), encoding="utf-8")
    files = {}
    for name, size in (("current", 30), ("candidate", 200)):
        files[name] = tmp_path / f"{name}.json5"
        files[name].write_text(json.dumps({"tools": {"loopDetection": {"enabled": True, "historySize": size}}}))
    recs = records(calls)
    worker = RunProcessor(LoadedConfig.from_document(json.loads(files["candidate"].read_text())))
    dead = worker.process(plan_batch(recs, 0).groups[b"wide"], recs, None, 0).dead_letters
    skipped = [json.loads(d.value)["source"]["offset"] for d in dead]
    assert skipped and {d.reason for d in dead} == {"state_too_large"}

    argv = ["--config", str(files["current"]), "--candidate", str(files["candidate"]), "--events", str(events)]
    code, out, err = _run(capsys, *argv, "--sweep", "historySize=30,200")
    assert code == 0 and "not applied" not in err
    assert f"candidate  {len(skipped)} events not applied, as the worker would dead-letter them " in out
    assert f"(state_too_large {len(skipped)}; the first at index {skipped[0]})" in out
    assert "current    " + "0 events" not in out  # a config that applies everything is not listed
    sweep = out[out.index("Sweep of historySize") :].splitlines()
    assert sweep[1].split()[-2:] == ["NOT", "APPLIED"] and sweep[2].split()[-1] == "0"
    assert sweep[3].split()[0] == "200" and sweep[3].split()[-1] == str(len(skipped))

    code, out, _ = _run(capsys, *argv, "--sweep", "historySize=30,200", "--format", "json")
    report = json.loads(out)
    assert report["not_applied"]["current"] == []
    assert [(n["index"], n["reason"]) for n in report["not_applied"]["candidate"]] == [
        (offset, "state_too_large") for offset in skipped
    ]
    assert [p["not_applied"] for p in report["sweep"]["points"]] == [0, len(skipped)]
