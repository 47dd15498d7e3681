"""What the deploy topic scripts must create for the worker and the audits."""

from __future__ import annotations


def assert_audit_changelog(script: str) -> None:
    """The topic script pre-creates the run table's changelog (the worker's own name for it, default group)
    compacted, with a compaction lag of the events' 7-day retention: ``replay --with-state`` needs its versions."""
    from streams.worker.settings import WorkerSettings

    changelog = WorkerSettings().changelog_topic
    commands = [" ".join(c.split()) for c in script.replace("\\\n", " ").splitlines()]
    create = [c for c in commands if f"--topic {changelog} " in c]
    assert len(create) == 1, f"{changelog} is not created exactly once"
    assert "--create --if-not-exists" in create[0] and "--config cleanup.policy=compact" in create[0]
    assert any(f"--entity-name {changelog} --add-config min.compaction.lag.ms=604800000" in c for c in commands)
