"""Hostile JSON for the fuzz suites: a raw JSON writer, hypothesis strategies and the "never crash" check.

Python's JSON encoders cannot write what hostile producers send (duplicate keys, lone surrogate escapes,
400-digit numbers, ``1e999``, ``NaN``, invalid UTF-8), so records are built as small trees of raw JSON text
and written by :func:`write`. :func:`check_record` is the property every suite asserts: a record is either
rejected with a reason from the closed set (and a detail that quotes no payload), or it decodes to an event
the detection core processes without an exception, within a CPU-time bound.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from schemas import Event
from streams.config_file import LoadedConfig
from streams.decode import INVALID_REASONS, InvalidEvent, decode_event
from streams.detection import RunState
from streams.limits import DEFAULT_LIMITS
from streams.loop_cost import UsageBook
from streams.runner import Step, step


def strict_step(state: RunState | None, event: Event, config: LoadedConfig, usage: UsageBook | None = None) -> Step:
    """:func:`streams.runner.step`, raising what the event raised: ``step`` quarantines an event that raises
    (the worker dead-letters it), and the fuzzers are here to find such events."""
    result = step(state, event, config, usage)
    if result.failure is not None:
        raise result.failure
    return result


#: Fixed seed and budget: every run tests the same examples (no example database, no deadline).
FUZZ: Final = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

#: Planted in payload strings: a rejection detail must never quote it.
SECRET: Final = "s3cr3t-payload"

#: Default config (detection off, guard on) and one with tiny thresholds so a few repeats warn and block.
DEFAULT_CONFIG: Final = LoadedConfig.default()
EAGER_CONFIG: Final = LoadedConfig.from_document(
    {
        "tools": {
            "loopDetection": {
                "enabled": True,
                "historySize": 8,
                "warningThreshold": 2,
                "unknownToolThreshold": 2,
                "criticalThreshold": 3,
                "globalCircuitBreakerThreshold": 4,
                "postCompactionGuard": {"windowSize": 2},
            }
        }
    }
)

#: CPU-time safety bound for one fuzzed record (decode plus one core step, as the worker does); not a benchmark.
RECORD_CPU_BOUND_S: Final = 0.05


# --- raw JSON trees -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Raw:
    """JSON text written as is: numbers, literals (also invalid ones such as ``NaN``), garbage."""

    text: str


@dataclass(frozen=True, slots=True)
class Str:
    """A JSON string; ``body`` is the text between the quotes, escapes already written (or not)."""

    body: str


@dataclass(frozen=True, slots=True)
class Arr:
    items: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class Obj:
    """An object as written: ``pairs`` may repeat a key."""

    pairs: tuple[tuple[str, Node], ...] = field(default=())


Node: TypeAlias = Raw | Str | Arr | Obj


def write(node: Node) -> str:
    """The JSON text of ``node`` (iterative: hostile trees nest far deeper than Python's recursion limit)."""
    out: list[str] = []
    stack: list[Node | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Raw):
            out.append(item.text)
        elif isinstance(item, Str):
            out.append('"' + item.body + '"')
        elif isinstance(item, Arr):
            stack.append("]")
            for at in range(len(item.items) - 1, -1, -1):
                stack.append(item.items[at])
                if at:
                    stack.append(",")
            out.append("[")
        else:
            stack.append("}")
            for at in range(len(item.pairs) - 1, -1, -1):
                key, value = item.pairs[at]
                stack.append(value)
                stack.append('"' + key + '":')
                if at:
                    stack.append(",")
            out.append("{")
    return "".join(out)


def to_bytes(node: Node) -> bytes:
    """UTF-8, with surrogate code points written as the (invalid) three-byte sequences a broken encoder emits."""
    return write(node).encode("utf-8", "surrogatepass")


def plain(value: Any) -> Node:
    """A tree for an ordinary JSON value (str, int, float, bool, None, list, dict)."""
    if isinstance(value, dict):
        return Obj(tuple((_escape(k), plain(v)) for k, v in value.items()))
    if isinstance(value, list):
        return Arr(tuple(plain(v) for v in value))
    if isinstance(value, str):
        return Str(_escape(value))
    if value is None or isinstance(value, bool):
        return Raw("null" if value is None else "true" if value else "false")
    return Raw(repr(value) if isinstance(value, float) else str(value))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def nested(depth: int, kind: str = "list", leaf: Node = Raw("0")) -> Node:
    """A value ``depth`` containers deep (``depth`` 0 is the leaf)."""
    node = leaf
    for _ in range(depth):
        node = Arr((node,)) if kind == "list" else Obj((("k", node),))
    return node


def record(**fields: Node | None) -> Obj:
    """A valid tool_call record with ``fields`` replaced (``None`` drops a field)."""
    base: dict[str, Node | None] = {
        "type": Str("tool_call"),
        "event_id": Str("e1"),
        "gateway_id": Str("gw"),
        "session_id": Str("sess"),
        "run_id": Str("run-1"),
        "ts": Raw("1767225600000"),
        "tool": Str("exec"),
        "args": Obj((("command", Str("ls")),)),
    }
    base.update(fields)
    return Obj(tuple((k, v) for k, v in base.items() if v is not None))


# --- strategies ---------------------------------------------------------------------------------------------

_VALID_ATOMS: Final = (
    "a",
    "é",
    "😀",
    "\u2028",
    "\ufeff",
    "\\u0000",
    "\\n",
    '\\"',
    "\\\\",
    "\\/",
    "\\ud83d\\ude00",  # an escaped surrogate pair: valid
    "[",
    "{",
    "]",
    "}",
    "tool",
    "unknown tool: ",
    "Tool ",
    " not found",
    SECRET,
)
_INVALID_ATOMS: Final = (
    "\\ud800",  # lone high surrogate escape
    "\\udc00",  # lone low surrogate escape
    "\\ud800\\u0041",
    "\ud800",  # a raw surrogate: invalid UTF-8 once encoded
    "\udfff",
    "\x01",  # raw control character
    "\\x41",  # invalid escape
)
_VALID_NUMBERS: Final = (
    "0",
    "-0",
    "-0.0",
    "9007199254740993",  # 2**53 + 1
    "18446744073709551615",  # 2**64 - 1: still an int for orjson
    "18446744073709551616",  # 2**64: becomes a double
    "-9223372036854775809",
    "1.7976931348623157e308",
    "5e-324",
    "1e-400",  # underflows to 0.0
    "1E+2",
)
_INVALID_NUMBERS: Final = (
    "1.8e308",  # overflows a double
    "1e999",
    "-1e999",
    "1" + "0" * 400,
    "NaN",
    "Infinity",
    "-Infinity",
    "01",
    "1.",
    ".5",
    "+1",
    "0x10",
)


@st.composite
def json_strings(draw: st.DrawFn, valid: bool = False) -> Str:
    """Short, long (up to ~100k characters) and hostile string bodies, cheap to generate."""
    atoms = _VALID_ATOMS if valid else _VALID_ATOMS + _INVALID_ATOMS
    body = "".join(draw(st.lists(st.sampled_from(atoms), max_size=6)))
    if draw(st.integers(0, 9)) == 0:
        body *= draw(st.sampled_from([100, 1_000, 20_000]))
    return Str(body)


@st.composite
def json_numbers(draw: st.DrawFn, valid: bool = False) -> Raw:
    """Number text: exact ints at every boundary, long ints, huge and tiny exponents (and invalid forms)."""
    if draw(st.booleans()):
        return Raw(draw(st.sampled_from(_VALID_NUMBERS if valid else _VALID_NUMBERS + _INVALID_NUMBERS)))
    digits = draw(st.sampled_from(["1", "7", "12345678901234567890"])) * draw(st.integers(1, 15))
    text = ("-" if draw(st.booleans()) else "") + digits
    if draw(st.booleans()):
        text += "." + draw(st.sampled_from(["0", "5", "000001", "9" * 30]))
    if draw(st.booleans()):
        # A 300-digit mantissa with a positive exponent overflows (not_json); keep valid ones small.
        top = 2_000 if not valid else 0 if len(digits) > 300 else 300 - len(digits)
        text += draw(st.sampled_from(["e", "E", "e+", "e-"])) + str(draw(st.integers(0, top)))
    return Raw(text)


def json_scalars(valid: bool = False) -> st.SearchStrategy[Node]:
    literals = [Raw("true"), Raw("false"), Raw("null")]
    if not valid:
        literals += [Raw("tru"), Raw("undefined"), Raw("")]
    return json_strings(valid) | json_numbers(valid) | st.sampled_from(literals)


def _containers(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    keys = st.sampled_from(["a", "type", "to", "action", "status", "details", "content", "text", "id", "é"])
    return st.lists(children, max_size=5).map(lambda xs: Arr(tuple(xs))) | st.lists(
        st.tuples(keys, children), max_size=5
    ).map(lambda ps: Obj(tuple(ps)))


@st.composite
def deep_values(draw: st.DrawFn) -> Node:
    """Nesting at and around the decoder's limit, orjson's (1,024) and far beyond."""
    limit = DEFAULT_LIMITS.max_depth  # the record is one level, args (or a result) another
    depth = draw(st.sampled_from([limit - 8, limit - 2, limit - 1, limit, 300, 1_022, 1_023, 1_024, 5_000]))
    kind = draw(st.sampled_from(["list", "dict", "mixed"]))
    if kind != "mixed":
        return nested(depth, kind)
    node: Node = Raw("0")
    for at in range(depth):
        node = Arr((node, Raw("1"))) if at % 2 else Obj((("x", node), ("to", Str("u"))))
    return node


@st.composite
def wide_values(draw: st.DrawFn) -> Node:
    """Many values around the ``max_values`` limit (cheap to write: one node repeated)."""
    limit = DEFAULT_LIMITS.max_values
    count = draw(st.sampled_from([1_000, limit - 20, limit - 5, limit, limit + 1, 3 * limit]))
    # The dearest unit (doubles near 1.8e308, ~3 µs each in the core) has its own test with a wider bound.
    units: list[Node] = [Raw("0"), Raw("0.1"), Str(""), Obj(()), Arr(()), Raw("null")]
    unit = draw(st.sampled_from(units))
    return Arr((unit,) * count)


def json_values(valid: bool = False) -> st.SearchStrategy[Node]:
    """Any JSON value (``valid``) or also malformed ones, including deep and wide ones."""
    return st.recursive(json_scalars(valid), _containers, max_leaves=24) | deep_values() | wide_values()


_TOOLS: Final = ("exec", "process", "message", "sessions_send", "telegram", "command_status", "read", "")
_FIELDS: Final = (
    "type",
    "event_id",
    "gateway_id",
    "agent_id",
    "session_id",
    "run_id",
    "ts",
    "version",
    "tool",
    "call_id",
    "args",
    "args_hash",
    "result",
    "error",
    "result_hash",
    "unknown_tool_name",
)


@st.composite
def results(draw: st.DrawFn) -> Node:
    """Tool results shaped like OpenClaw's (content parts, details) with hostile values inside."""
    values = json_values(draw(st.integers(0, 3)) > 0)
    if draw(st.booleans()):
        return draw(values)
    keys = ["status", "exitCode", "aggregated", "tail", "messageId", "deniedReason", "id", "text", "to"]
    known: list[Node] = [Str("completed"), Str("running"), Str("blocked"), Str("tool-loop"), Raw("1"), Raw("null")]
    details = draw(st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(known) | values), max_size=5))
    content = draw(st.lists(st.just(Obj((("type", Str("text")), ("text", Str("out"))))), max_size=3))
    return Obj((("content", Arr(tuple(content))), ("details", Obj(tuple(details)))))


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A record (valid to start with; usage records carry tool fields as ignored extras) with hostile
    replacements, duplicates and extra fields."""
    kind = draw(st.sampled_from(["tool_call", "tool_result", "compaction_retry", "model_usage"]))
    values = json_values(draw(st.integers(0, 3)) > 0)  # mostly valid JSON: the core must see hostile values
    tool = draw(st.sampled_from(_TOOLS))
    fields: dict[str, Node | None] = {"type": Str(kind), "tool": Str(tool)}
    if draw(st.booleans()):
        fields["args"] = draw(
            values | st.just(Obj((("action", Str("send")), ("to", Str("u")), ("x", Str(SECRET))))),
        )
    if draw(st.booleans()) or kind == "tool_result":
        choice = draw(st.sampled_from(["result", "error", "result_hash"]))
        if choice == "result":
            fields["result"] = draw(results())
        elif choice == "error":
            fields["error"] = draw(
                st.sampled_from([Str("unknown tool: foo"), Str("Tool bar not found"), Str(SECRET)]) | json_strings()
            )
        else:
            fields["result_hash"] = Str("0" * 64)
    pairs: list[tuple[str, Node]] = list(record(**fields).pairs)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # a hostile value for any field, envelope too
        name = draw(st.sampled_from(_FIELDS))
        value = draw(values)
        pairs = [(k, v) for k, v in pairs if k != name] + [(name, value)]
    if draw(st.integers(0, 3)) == 0 and pairs:  # a duplicate key: the last one wins
        at = draw(st.integers(0, len(pairs) - 1))
        pairs.append((pairs[at][0], draw(values)))
    if draw(st.integers(0, 4)) == 0:
        pairs.append(("extra", draw(values)))
    return to_bytes(Obj(tuple(pairs)))


# --- the property -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """What a suite saw: reasons, accepted events and the slowest record (CPU seconds)."""

    reasons: dict[str, int] = field(default_factory=dict)
    accepted: int = 0
    worst_cpu_s: float = 0.0


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep a full collection of pytest's heap from being billed to one record."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_core(event: Event, repeats: int = 4) -> None:
    """Apply ``event`` ``repeats`` times (fresh event ids) with tiny thresholds: warnings, blocks, guard."""
    state: RunState | None = None
    for at in range(repeats):
        again = event.model_copy(update={"event_id": f"{event.event_id}#{at}"})
        state = strict_step(state, again, EAGER_CONFIG).state
        assert RunState.from_primitive(state.to_primitive()) == state


def check_record(
    data: bytes, tally: Tally | None = None, *, repeats: int = 4, cpu_bound_s: float = RECORD_CPU_BOUND_S
) -> Event | None:
    """The hostile-input property for one record; returns the event when it was accepted.

    The CPU time of what the worker does per record (decode, then one core step with the default config)
    must stay under ``cpu_bound_s``; the eager repeats only exercise more of the core.
    """
    with no_gc():
        started = time.thread_time()
        event: Event | None = None
        try:
            decoded = decode_event(data)
        except InvalidEvent as exc:
            assert exc.reason in INVALID_REASONS, exc.reason
            if exc.reason != "unknown_type":  # that detail shows the first 37 characters of ``type``, by design
                assert SECRET not in exc.detail, exc.detail
            assert len(exc.detail) < 400, exc.detail
            reason: str = exc.reason
        else:
            strict_step(None, decoded, DEFAULT_CONFIG)
            event, reason = decoded, "accepted"
        spent = time.thread_time() - started
    if tally is not None:
        tally.reasons[reason] = tally.reasons.get(reason, 0) + 1
        tally.accepted += event is not None
        tally.worst_cpu_s = max(tally.worst_cpu_s, spent)
    assert spent < cpu_bound_s, f"{spent * 1e3:.1f} ms CPU for one record of {len(data)} bytes"
    if event is not None:
        run_core(event, repeats if len(data) < 65_536 else 1)
    return event
