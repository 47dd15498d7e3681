"""Every metric the alert rules and the dashboard query is one a running worker really exports.

One real worker (memory store, its own topics and group) on the session's embedded broker; as soon as its
``/metrics`` answers (bounded wait) the page is scraped once and checked against ``deploy/metrics.txt`` and
against the names the rules and the dashboard use (:mod:`tests.deploy.metric_names`), and every closed label
set must already have its samples (at 0): nothing needs to have happened for a series to exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.metric_names import (
    assert_all_exported,
    assert_labels_initialised,
    fetch_metrics,
    listed_metric_names,
    referenced_metric_names,
)
from tests.support.procs import wait_until
from tests.support.worker import WorkerProcess, bootstrap_of, new_names

pytestmark = pytest.mark.integration


def test_worker_exports_every_metric_deploy_relies_on(broker: Any, tmp_path: Path) -> None:
    worker = WorkerProcess(bootstrap_of(broker), new_names("metrics", partitions=2), tmp_path, store="memory")
    worker.start()
    try:
        url = f"http://127.0.0.1:{worker.metrics_port}/metrics"

        def scraped() -> str | None:
            if not worker.alive():
                raise RuntimeError(f"worker exited early:\n{worker.log()[-3000:]}")
            try:
                return fetch_metrics(url, timeout=2.0)
            except OSError:
                return None

        text: str = wait_until(scraped, 60, 0.2, message="worker /metrics answers")
        problems: list[str] = []
        for check in (
            lambda: assert_all_exported(text, listed_metric_names() | referenced_metric_names()),
            lambda: assert_labels_initialised(text),
        ):
            try:
                check()
            except AssertionError as exc:  # report both checks at once
                problems.append(str(exc))
        assert not problems, "\n".join(problems)
    finally:
        worker.stop()
