"""``make run`` as a user runs it: verdicts appear, and Ctrl-C (once, or twice in a hurry) stops every process the
demo started, with no traceback. A run that ends as it should leaves no temporary directory behind; a failed one
keeps it and says where, for its logs (each test gives the demo a TMPDIR of its own to look in)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.procs import REPO_ROOT, free_port, python_env, start_process, stop_process, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("make") is None, reason="make run needs make"),
]

VERDICT = re.compile(r"^\S+Z (WARNING|BLOCK|ABORT) ", re.MULTILINE)
STARTED = re.compile(r"(embedded broker|worker|demo traffic) pid (\d+)")
REMOVED = re.compile(r"^stopped everything the demo started and removed its files \((.+)\)$", re.MULTILINE)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def make_run(log: Path, *run_args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``make run`` in a session of its own, as a terminal's foreground job; its temporary files go to a TMPDIR
    beside ``log`` (``tmp``), so that a test sees what it leaves behind."""
    command = ["make", "--no-print-directory", "run", *([f"RUN_ARGS={' '.join(run_args)}"] if run_args else [])]
    (log.parent / "tmp").mkdir(exist_ok=True)
    extra = {"TMPDIR": str(log.parent / "tmp"), **(env or {})}
    return start_process(command, env=python_env(extra), log_path=log, cwd=REPO_ROOT)


def demo_dirs(log: Path) -> list[Path]:
    return sorted((log.parent / "tmp").glob("loopwatch-demo-*"))


def assert_cleaned_up(text: str, log: Path) -> None:
    """The demo said it removed its directory, it did, and no other demo directory is left in its TMPDIR."""
    removed = REMOVED.search(text)
    assert removed, text[-3000:]
    assert Path(removed.group(1)).parent == log.parent / "tmp"
    assert not Path(removed.group(1)).exists()
    assert demo_dirs(log) == []


def run_until_verdicts(log: Path) -> tuple[int, dict[str, int]]:
    """``make run`` with its defaults; its pid and the pids it printed, once verdicts show."""
    proc = make_run(log)
    try:
        wait_until(lambda: VERDICT.search(log.read_text(errors="replace")), 120, 0.2, message="a verdict line")
    except BaseException:
        stop_process(proc)
        raise
    started = {name: int(pid) for name, pid in STARTED.findall(log.read_text(errors="replace"))}
    assert set(started) == {"embedded broker", "worker", "demo traffic"}
    return proc.pid, started


def interrupt_and_wait(pid: int, presses: int, log: Path) -> str:
    """Ctrl-C as a terminal sends it (SIGINT to the foreground process group), ``presses`` times: again once the
    demo says it is stopping, as an impatient user would."""
    for press in range(presses):
        if press:
            wait_until(lambda: "stopping…" in log.read_text(errors="replace"), 30, 0.05, message="stopping…")
        os.killpg(pid, signal.SIGINT)
    wait_until(lambda: "stopped everything the demo started" in log.read_text(errors="replace"), 30, 0.1,
               message="the demo's last line")  # fmt: skip
    return log.read_text(errors="replace")


@pytest.mark.parametrize("presses", [1, 2], ids=["ctrl-c", "ctrl-c-twice"])
def test_make_run_shows_verdicts_and_ctrl_c_stops_everything(tmp_path: Path, presses: int) -> None:
    log = tmp_path / "make-run.log"
    leader, started = run_until_verdicts(log)
    try:
        text = interrupt_and_wait(leader, presses, log)
        assert "Traceback" not in text, text[-3000:]
        assert "stopping…" in text
        if presses == 2:
            assert "killing what is left" in text
        wait_until(lambda: not any(alive(pid) for pid in started.values()), 10, 0.1, message="every pid gone")
        assert_cleaned_up(text, log)  # Ctrl-C is the demo's normal stop
    finally:
        for pid in started.values():  # nothing may outlive the test, whatever failed above
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if alive(leader):
            os.killpg(leader, signal.SIGKILL)


def test_make_run_ends_by_itself_after_its_traffic_and_says_so(tmp_path: Path) -> None:
    """With LOOPWATCH_BOOTSTRAP set for the worker docs (here an address where nothing listens), the demo still
    runs on its own broker: demo traffic never goes to a cluster unless --bootstrap says so."""
    log = tmp_path / "make-run.log"
    proc = make_run(log, "--duration", "10", env={"LOOPWATCH_BOOTSTRAP": f"127.0.0.1:{free_port()}"})
    try:
        code = proc.wait(120)
    finally:
        stop_process(proc)
        for _, pid in STARTED.findall(log.read_text(errors="replace")):  # nothing may outlive a failed wait
            if alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert VERDICT.search(text) and "Traceback" not in text
    assert 'the demo\'s 10 s of traffic are over (make run RUN_ARGS="--duration S" sends more)' in text
    assert "note: LOOPWATCH_BOOTSTRAP is set, but the demo runs on its own embedded broker" in text
    started = [int(pid) for _, pid in STARTED.findall(text)]
    assert len(started) == 3 and not any(alive(pid) for pid in started)
    assert text.rstrip().splitlines()[-1].startswith("stopped everything the demo started and removed its files (")
    assert_cleaned_up(text, log)


def test_a_failed_make_run_keeps_its_logs_and_says_where(tmp_path: Path) -> None:
    """The quickest real failure: a cluster where nothing listens, and a worker told not to wait for one."""
    log = tmp_path / "make-run.log"
    bootstrap = f"127.0.0.1:{free_port()}"
    proc = make_run(log, "--bootstrap", bootstrap, env={"LOOPWATCH_KAFKA_WAIT": "0"})
    try:
        code = proc.wait(120)
    finally:
        stop_process(proc)
        for _, pid in STARTED.findall(log.read_text(errors="replace")):
            if alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert code == 2 and "Traceback" not in text, text[-3000:]  # make's status for a failed recipe
    [kept] = demo_dirs(log)
    assert f"stopped everything the demo started; its logs are kept in {kept}\n" in text, text[-3000:]
    failure = f"loopwatch worker: cannot connect to Kafka ({bootstrap}): nothing listens there"
    assert f"make run: {failure}" in text
    assert failure in (kept / "worker.log").read_text()
    started = [int(pid) for _, pid in STARTED.findall(text)]
    assert len(started) == 1 and not alive(started[0])


def test_the_loop_cost_doc_writes_the_demo_s_own_config() -> None:
    """docs/loop-cost.md ran ``whatif --config demo.json5`` with no such file anywhere; it now writes it, and it
    must stay the config ``make run`` gives its worker."""
    from streams.config_file import LoadedConfig, parse_json5
    from streams.demo import DEMO_CONFIG

    doc = (REPO_ROOT / "docs" / "loop-cost.md").read_text(encoding="utf-8")
    found = re.search(r"cat > demo\.json5 <<'EOF'\n(.*?)\nEOF\n", doc, re.S)
    assert found is not None
    written = LoadedConfig.from_document(parse_json5(found.group(1))).resolved()
    assert written == LoadedConfig.from_document(parse_json5(DEMO_CONFIG)).resolved()
