"""What the deploy topic scripts must create: every topic the worker would create, with its partitions and configs.

Where the cluster's ACLs keep the worker from creating topics, the scripts are the only creator, so the plan is
taken from the worker itself (``LoopwatchWorker.required_topics`` and ``topic_configs``), not listed here.
"""

from __future__ import annotations

import re
import tempfile

Plan = dict[str, tuple[str, dict[str, str]]]  # topic: (partitions as the script writes it, configs)


def worker_plan(partitions: int, partitions_var: str, storm_window: float) -> Plan:
    """The topics a default worker with ``partitions`` and ``storm_window`` creates; counts equal to
    ``partitions`` written as ``partitions_var``."""
    from streams.config_file import LoadedConfig
    from streams.worker.app import LoopwatchWorker
    from streams.worker.metrics import WorkerMetrics
    from streams.worker.settings import WorkerSettings
    from streams.worker.storm_rules import StormConfig

    with tempfile.TemporaryDirectory() as data_dir:
        settings = WorkerSettings(
            bootstrap="127.0.0.1:1", store="memory", partitions=partitions, data_dir=data_dir,
            storms=StormConfig(window_seconds=storm_window),
        )  # fmt: skip
        worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
        topics, configs = worker.required_topics(), worker.topic_configs()
    return {
        name: (partitions_var if count == partitions else str(count), configs.get(name, {}))
        for name, count in topics.items()
    }


def script_plan(script: str, env: dict[str, str]) -> Plan:
    """The topics a shell script creates with ``kafka-topics.sh --create`` (in a ``for topic in ...`` loop or one
    by one), with the configs it gives them there and with ``kafka-configs.sh --alter --add-config`` (which must
    agree). ``$((NAME * N))`` is worked out with the script's ``env``, as the shell would."""

    def arithmetic(match: re.Match[str]) -> str:
        return str(int(env[match.group(1)]) * int(match.group(2)))

    script = re.sub(r"\$\$?\(\((\w+) \* (\d+)\)\)", arithmetic, script)
    lines = [" ".join(line.split()) for line in script.replace("\\\n", " ").splitlines()]
    plan: Plan = {}
    looped: list[str] = []
    for line in lines:
        loop = re.match(r"for topic in (.+); do$", line)
        if loop:
            looped = loop.group(1).split()
        elif line == "done":
            looped = []
        elif "kafka-topics.sh" in line and "--create" in line:
            assert "--if-not-exists" in line, line
            topic = _flag(line, "--topic")
            names = looped if topic in ('"$topic"', '"$$topic"') else [topic]
            configs = dict(c.split("=", 1) for c in re.findall(r"--config (\S+)", line))
            for name in names:
                assert name not in plan, f"{name} is created twice"
                plan[name] = (_flag(line, "--partitions").strip('"'), dict(configs))
        elif "kafka-configs.sh" in line and "--add-config" in line:
            name = _flag(line, "--entity-name")
            assert name in plan, f"{name} is configured before it is created"
            for key, value in re.findall(r"([\w.]+)=(\[[^\]]*\]|[^,]+)", _flag(line, "--add-config")):
                value = value.strip("[]")  # kafka-configs.sh writes a list value in brackets
                assert plan[name][1].setdefault(key, value) == value, f"{name}: {key} created and altered apart"
    return plan


def _flag(line: str, flag: str) -> str:
    match = re.search(rf"{flag} (\S+)", line)
    assert match, f"{flag} missing in: {line}"
    return match.group(1)


def assert_creates_worker_topics(
    script: str, env: dict[str, str], partitions: int, partitions_var: str, storm_window: float
) -> None:
    """The script (run with ``env``) creates exactly the worker's topics, each with the worker's partition count
    and configs."""
    assert_window_checked(script)
    made, wanted = script_plan(script, env), worker_plan(partitions, partitions_var, storm_window)
    names = made.keys() | wanted.keys()
    differ = {name: (made.get(name), wanted.get(name)) for name in names if made.get(name) != wanted.get(name)}
    assert not differ, f"topic: (the script's, the worker's): {differ}"


def assert_default_names(worker_env: dict[str, str]) -> None:
    """The manifests keep the worker's default group and topic names, which the scripts' topic names are."""
    renamed = sorted(name for name in worker_env if name == "LOOPWATCH_GROUP" or name.endswith("_TOPIC"))
    assert not renamed, f"{renamed} rename the worker's topics: rename them in the topic scripts too"


def assert_window_checked(script: str) -> None:
    """The script's first line refuses a storm window bash arithmetic would misread (``0300`` is octal, ``300.0``
    an error half-way through), as bash runs it."""
    import subprocess

    guard = script.replace("$$", "$").splitlines()[1]  # after its comment
    assert "STORM_WINDOW" in guard, guard
    for window, code in (("300", 0), ("7", 0), ("0300", 2), ("300.0", 2), ("3e2", 2), ("", 2)):
        done = subprocess.run(["bash", "-c", guard], env={"STORM_WINDOW": window}, capture_output=True, check=False)
        assert done.returncode == code, (window, done.stderr)
