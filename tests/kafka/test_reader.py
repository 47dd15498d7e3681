"""Topic ranges as ``--from``/``--to`` give them, and the merge whatif reads a topic in."""

from __future__ import annotations

import pytest

from streams.kafka import reader


def test_parse_single_offset_applies_to_all_partitions() -> None:
    bound = reader.parse_bound("42")
    assert bound == reader.OffsetBound(default=42)
    assert isinstance(bound, reader.OffsetBound)
    assert reader.resolve_offsets(bound, {0: 0, 1: 0}, {0: 100, 1: 10}) == {0: 42, 1: 10}


def test_parse_per_partition_offsets() -> None:
    bound = reader.parse_bound("0:100, 1:250")
    assert bound == reader.OffsetBound(per_partition={0: 100, 1: 250})
    assert isinstance(bound, reader.OffsetBound)
    # unlisted partitions keep the natural bound; everything is clamped to the end offsets
    assert reader.resolve_offsets(bound, {0: 5, 1: 5, 2: 7}, {0: 300, 1: 200, 2: 9}) == {0: 100, 1: 200, 2: 7}
    assert reader.resolve_offsets(None, {0: 3}, {0: 9}) == {0: 3}
    assert reader.parse_bound("3:1") == reader.OffsetBound(per_partition={3: 1})
    assert reader.unknown_partitions(reader.parse_bound("0:1,7:2"), [0, 1, 2, 3]) == [7]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-01-01T00:00:00Z", 1_767_225_600_000),
        ("2026-01-01T01:00:00.250+01:00", 1_767_225_600_250),
        ("2026-01-01t00:00:00z", 1_767_225_600_000),
    ],
)
def test_parse_rfc3339_times(text: str, ms: int) -> None:
    assert reader.parse_bound(text) == reader.TimeBound(ms)


@pytest.mark.parametrize("text", ["9" * 5000, "0:" + "9" * 5000, "9" * 5000 + ":1", str(2**63), f"{2**31}:0"])
def test_parse_refuses_offsets_and_partitions_kafka_cannot_hold(text: str) -> None:
    """5,000 digits were a traceback (Python refuses to convert them); Kafka's offsets are int64, partitions int32."""
    with pytest.raises(reader.RangeError, match="too large; at most"):
        reader.parse_bound(text)
    assert reader.parse_bound(f"{2**31 - 1}:{2**63 - 1}") == reader.OffsetBound(per_partition={2**31 - 1: 2**63 - 1})


@pytest.mark.parametrize(
    "text", ["", "abc", "0:1,0:2", "0:x", "-1", "2026-01-01T00:00:00", "1:2,", "yesterday", "²", "0:²"]
)
def test_parse_rejects_bad_bounds(text: str) -> None:
    with pytest.raises(reader.RangeError):
        reader.parse_bound(text)


@pytest.mark.parametrize(
    ("start", "end"),
    [("5", "2"), ("0:5,1:3", "4"), ("4", "1:3"), ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z")],
)
def test_a_range_that_ends_before_it_starts_is_refused(start: str, end: str) -> None:
    with pytest.raises(reader.RangeError, match="--from"):
        reader.check_order(reader.parse_bound(start), reader.parse_bound(end))


@pytest.mark.parametrize(
    ("start", "end"),
    [("2", "5"), ("5", "5"), ("0:5", "1:3"), ("0:2,1:3", "4"), ("9", "2026-01-01T00:00:00Z"), (None, "0"), ("7", None)],
)
def test_a_range_in_order_or_only_known_to_the_broker_passes(start: str | None, end: str | None) -> None:
    reader.check_order(
        reader.parse_bound(start) if start else None, reader.parse_bound(end) if end else None
    )  # partition 0 from 5 to the end and partition 1 to 3 are both fine; time against offsets: the broker's to say


def test_merged_keeps_each_partition_in_offset_order() -> None:
    p0 = [reader.TopicRecord(0, offset, ts, None, b"") for offset, ts in enumerate([5, 1, 9])]  # clock went back
    p1 = [reader.TopicRecord(1, offset, ts, None, b"") for offset, ts in enumerate([2, 3])]
    got = reader.merged(reader.TopicRead({0: p0, 1: p1}, {0: (0, 3), 1: (0, 2)}))
    assert sorted(got, key=lambda r: (r.partition, r.offset)) == p0 + p1
    assert [r.offset for r in got if r.partition == 0] == [0, 1, 2]
    assert [r.offset for r in got if r.partition == 1] == [0, 1]


def test_past_end_names_each_position_past_its_partitions_end() -> None:
    ends = {0: 100, 1: 50, 2: 70}
    per = reader.parse_bound("0:10,1:60")  # partition 2 not listed: from its first offset, nothing to note
    assert reader.past_end(per, None, ends) == (
        "--from 1:60 is past partition 1's end offset 50 (nothing read from it); check --from/--to"
    )
    assert reader.past_end(reader.parse_bound("0:100,1:50"), reader.parse_bound("60"), ends) == (
        "--to 60 is past partition 1's end offset 50 (read to its end); check --from/--to"
    )
    assert reader.past_end(reader.parse_bound("2026-01-01T00:00:00Z"), None, ends) is None
    assert reader.past_end(None, reader.parse_bound("2:70"), ends) is None


def test_no_such_topic_hint_names_the_closest_topics_or_the_flag() -> None:
    cluster = [
        "loopwatch.events",
        "loopwatch.verdicts",
        "loopwatch.dead-letter",
        "lw-runs-changelog",
        "a-runs-changelog",
    ]
    assert reader.no_such_topic_hint("loopwatch.event", cluster, "--topic") == (
        "did you mean loopwatch.events? (check --topic)"
    )
    assert reader.no_such_topic_hint("zzz", cluster, "--topic") == "give an existing topic with --topic"
    # a default name missing beside a look-alike: a worker not started yet comes first
    assert reader.no_such_topic_hint("loopwatch.verdicts", ["loopwatch.event"], "--topic") == (
        "the worker creates the loopwatch topics when it starts: is one running? Or did you mean loopwatch.event? "
        "(check --topic)"
    )
    assert reader.no_such_topic_hint("loopwatch.verdicts", None, "--topic") == (
        "the worker creates the loopwatch topics when it starts: is one running? Or give an existing topic with --topic"
    )
    assert reader.no_such_topic_hint("x-runs-changelog", None, "--topic").endswith("is one running?")
    assert reader.no_such_topic_hint("lx-runs-changelog", cluster, "--group") == (
        "the stored state's topic is named after --group (GROUP-runs-changelog); existing: lw-runs-changelog, "
        "a-runs-changelog"
    )
    assert reader.no_such_topic_hint("lx-runs-changelog", [], "--group").endswith("; the cluster has none")
