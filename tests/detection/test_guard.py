"""The post-compaction guard's compact state behaves exactly like OpenClaw's windowed observation list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.detection import LoopConfig
from streams.detection.guard import GuardState, arm, observe


class ReferenceGuard:
    """The post-compaction guard literally: a list of the window's observations and a count of those equal to
    the newest."""

    def __init__(self) -> None:
        self.enabled = False
        self.size = 0
        self.remaining = 0
        self.window: list[tuple[str, str, str]] = []

    def arm(self, enabled: bool, size: int) -> None:
        self.enabled, self.size, self.remaining, self.window = enabled, size, size, []

    def observe(self, obs: tuple[str, str, str]) -> int:
        if not self.enabled or self.remaining <= 0:
            return 0
        self.remaining -= 1
        self.window.append(obs)
        count = self.window.count(obs)
        return count if count >= self.size else 0


OBS = [("read", "read:a", "r1"), ("read", "read:a", "r2"), ("read", "read:b", "r1"), ("ls", "ls:a", "r1")]
actions = st.lists(
    st.one_of(
        st.tuples(st.just("arm"), st.booleans(), st.integers(1, 6)),
        st.tuples(st.just("obs"), st.integers(0, len(OBS) - 1), st.just(0)),
    ),
    max_size=40,
)


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(actions)
def test_compact_guard_matches_the_reference(script: list[tuple[str, object, int]]) -> None:
    ref = ReferenceGuard()
    guard: GuardState | None = None
    for kind, a, b in script:
        if kind == "arm":
            assert isinstance(a, bool)
            ref.arm(a, b)
            guard = arm(LoopConfig(guard_enabled=a, guard_window_size=b))
        else:
            assert isinstance(a, int)
            expected = ref.observe(OBS[a])
            guard, count = observe(guard, *OBS[a])
            assert count == expected
        assert guard is None or guard.remaining == ref.remaining


def test_window_of_one_aborts_on_the_first_observation() -> None:
    guard, count = observe(arm(LoopConfig(guard_window_size=1)), *OBS[0])
    assert count == 1 and guard is not None and guard.remaining == 0
    assert observe(guard, *OBS[0]) == (guard, 0)


def test_unarmed_or_disabled_guard_ignores_observations() -> None:
    assert observe(None, *OBS[0]) == (None, 0)
    disabled = arm(LoopConfig(guard_enabled=False))
    assert observe(disabled, *OBS[0]) == (disabled, 0)
