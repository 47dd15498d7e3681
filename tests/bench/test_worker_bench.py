"""The latency runs' load generator: no garbage collection while it sends, and collection back after."""

from __future__ import annotations

import gc

import pytest

from bench.worker_bench import steady_generator


def test_the_generator_sends_without_collections_and_collects_again_after() -> None:
    assert gc.isenabled()
    with steady_generator():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collection_comes_back_when_a_run_fails() -> None:
    with pytest.raises(RuntimeError), steady_generator():
        raise RuntimeError("the broker went away")
    assert gc.isenabled()
