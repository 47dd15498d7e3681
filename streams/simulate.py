"""Deterministic fleet traffic: event records (schemas/events.py) from N simulated OpenClaw gateways.

Used by the demo (``make run``), the benchmarks and tests, so it has to look like a real fleet to the
detectors: most runs progress (unique calls, exec jobs whose polls return new output while pids and durations
change, message sends with fresh ids) and must stay silent, while a few runs loop in every way the detectors
know (generic repeats, ping-pong, unknown-tool retries, a loop that survives compaction). Everything comes
from one ``random.Random(seed)`` (this is a shell, not the core), so the same arguments give the same bytes.

Time is simulated: record ``i`` of ``rate * duration`` gets ``ts = start + i * 1000 / rate``; records come
out in time order and the events of one run keep their order. The start time and every event, run and session
id derive from the seed (:func:`start_of`, :func:`seed_tag`), so two simulations with different seeds can share
a topic without being taken for duplicates; a caller that sends in real time passes the wall clock as start.

A fleet has ``gateways * RUNS_PER_GATEWAY`` run slots. When it is small (at most :data:`EAGER_GATEWAYS`
gateways) or has at least as many events as slots, every slot's first run is drawn up front, as always (so
the bytes of such simulations never change); otherwise a slot's first run is drawn when the slot gets its first
event, so a huge fleet with few events costs what its events cost, not what its silent gateways would (20,000
gateways took 21 s and 1.7 GB for one event). Such a lazy fleet is just as deterministic, but its bytes differ
from those the same arguments gave when every fleet was drawn up front.

With ``usage``, the model call that chose each tool call reports its tokens and cost first (a ``model_usage``
event: a context that grows call by call, a priced model, and an unpriced local one for some runs). The
numbers come from a second generator; dropping the usage events leaves traffic with the very same decisions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

import orjson

from streams.detection import MISSING, Outcome, digest, hash_outcome
from streams.detection.outcome import process_action

BASE_TS_MS: Final = 1_767_225_600_000  # 2026-01-01T00:00:00Z: fixed, so output never depends on the clock
_HOURS_PER_YEAR: Final = 365 * 24
RUNS_PER_GATEWAY: Final = 4  # concurrent runs per gateway: their events interleave
PROGRESSING_CALLS: Final = (4, 30)  # calls in a healthy ("progressing") run, inclusive bounds
SEPARATE_RESULT_SHARE: Final = 0.15  # calls whose outcome comes as a later tool_result event
OVERSIZED_BYTES: Final = 1_048_576 + 4096  # just above streams.decode.DEFAULT_MAX_BYTES
DEFAULT_GATEWAYS: Final = 4  # a small fleet, when nothing else is asked for (`loopwatch simulate`, `make run`)
DEFAULT_RATE: Final = 60.0  # its events per second, all gateways together
#: Fleets up to this size draw every slot's first run up front even when most slots get no event (under 0.2 s
#: and 10 MB); larger fleets with fewer events than slots draw a slot's first run with its first event.
EAGER_GATEWAYS: Final = 100
#: Simulated models: (provider, model, US dollars per million input / output / cache-read tokens, or None).
MODELS: Final = (
    ("anthropic", "claude-sonnet-4-5", (3.0, 15.0, 0.30)),
    ("openai", "gpt-5.1", (1.25, 10.0, 0.125)),
    ("ollama", "qwen3-coder", None),  # a local model: no price
)

Archetype: TypeAlias = Literal[
    "progressing",
    "exec_polling",
    "message_sends",
    "generic_loop",
    "ping_pong",
    "unknown_tool",
    "post_compaction",
]
#: Run archetypes and their weights: mostly healthy traffic, with every kind of loop a few percent of runs.
ARCHETYPES: Final[tuple[tuple[Archetype, int], ...]] = (
    ("progressing", 56),
    ("exec_polling", 14),
    ("message_sends", 12),
    ("generic_loop", 6),
    ("ping_pong", 5),
    ("unknown_tool", 4),
    ("post_compaction", 3),
)
MalformedKind: TypeAlias = Literal[
    "not_json", "not_utf8", "schema_invalid", "unknown_type", "future_version", "oversized"
]
#: Malformed record kinds; each is named after the streams.decode reason it must produce.
MALFORMED_KINDS: Final[tuple[MalformedKind, ...]] = (
    "not_json",
    "not_utf8",
    "schema_invalid",
    "unknown_type",
    "future_version",
    "oversized",
)
AGENTS: Final[tuple[tuple[str, int], ...]] = (("main", 50), ("coder", 25), ("support", 15), ("ops", 10))

Event: TypeAlias = dict[str, Any]


def _result(text: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


def _call(tool: str, args: Any, **outcome: Any) -> Event:
    return {"type": "tool_call", "tool": tool, "args": args, **outcome}


def seed_tag(seed: int) -> str:
    """The seed in hex, at least six digits (``m`` before a negative one's): part of every id, so each seed's runs
    and events are its own. One-to-one by construction; a 3-byte hash of the seed collided within a few thousand
    seeds (2914 and 7535). Six digits keep the ids of the usual seeds as long as before."""
    return format(seed, "06x") if seed >= 0 else "m" + format(-seed, "x")


def start_of(seed: int) -> int:
    """The simulated start time of a seed (epoch ms): a whole hour within the year after :data:`BASE_TS_MS`."""
    return BASE_TS_MS + (seed % _HOURS_PER_YEAR) * 3_600_000


@dataclass(slots=True)
class _Gateway:
    gateway_id: str
    tag: str  # seed_tag: ids of different seeds never collide
    next_event: int = 0
    next_run: int = 0
    sessions: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"{self.gateway_id}-{self.tag}"

    def event_id(self) -> str:
        self.next_event += 1
        return f"{self.prefix}-e{self.next_event}"


@dataclass(slots=True)
class _Run:
    gateway: _Gateway
    agent_id: str
    session_id: str
    run_id: str | None
    archetype: Archetype
    steps: list[Event]
    position: int = 0

    @property
    def key(self) -> str:
        return self.run_id if self.run_id is not None else self.session_id

    def done(self) -> bool:
        return self.position >= len(self.steps)


class _Scripts:
    """The tool calls of one run per archetype (bodies only: the fleet adds ids, times and scope)."""

    def __init__(self, rng: random.Random, progressing_calls: tuple[int, int] = PROGRESSING_CALLS) -> None:
        self.rng = rng
        self.progressing_calls = progressing_calls

    def _token(self) -> str:
        return f"{self.rng.getrandbits(32):08x}"

    def work(self, tag: str, n: int) -> list[Event]:
        """Ordinary progressing calls: every call has new arguments and a new result."""
        rng = self.rng
        out: list[Event] = []
        for i in range(n):
            kind = rng.randrange(6)
            if kind == 0:
                path = f"/repo/{tag}/src/mod_{i}.py"
                out.append(_call("read", {"path": path}, result=_result(f"# {path}\n{self._token()}", {})))
            elif kind == 1:
                path = f"/repo/{tag}/src/mod_{i}.py"
                out.append(
                    _call(
                        "edit",
                        {"path": path, "oldText": f"v{i}", "newText": f"v{i + 1}"},
                        result=_result("Edited", {"path": path, "replacements": 1}),
                    )
                )
            elif kind == 2:
                pattern = f"def handler_{i}_{self._token()[:4]}"
                out.append(
                    _call(
                        "grep",
                        {"pattern": pattern, "path": f"/repo/{tag}"},
                        result=_result(f"{rng.randint(0, 9)} matches", {"matches": rng.randint(0, 9)}),
                    )
                )
            elif kind == 3:
                url = f"https://docs.example.com/{tag}/page-{i}"
                out.append(_call("web_fetch", {"url": url}, result=_result(f"<html>{self._token()}</html>", {})))
            elif kind == 4:
                path = f"/repo/{tag}/notes_{i}.md"
                if rng.random() < 0.15:  # a failing call is still progress when its arguments change
                    out.append(_call("read", {"path": path}, error=f"ENOENT: no such file {path}"))
                else:
                    out.append(_call("write", {"path": path, "content": self._token()}, result=_result("Wrote", {})))
            else:
                out.append(self._exec_once(f"pytest -q tests/test_{tag}_{i}.py"))
        return out

    def _exec_once(self, command: str) -> Event:
        rng = self.rng
        output = f"{rng.randint(1, 60)} passed in {rng.uniform(0.1, 9):.2f}s"
        details = {
            "status": "completed",
            "exitCode": 0,
            "durationMs": rng.randint(80, 9000),
            "pid": rng.randint(1000, 60000),
            "aggregated": output,
            "cwd": "/repo",
        }
        return _call("exec", {"command": command}, result=_result(output, details))

    def progressing(self, tag: str) -> list[Event]:
        return self.work(tag, self.rng.randint(*self.progressing_calls))

    def exec_polling(self, tag: str) -> list[Event]:
        """A background job: exec returns ``running``, process polls see new output, then completion.

        pid, durationMs, sessionId and startedAt change or are irrelevant to the outcome hash; the output
        grows, so even many polls are progress. A few consecutive polls see no new output (below any
        threshold).
        """
        rng = self.rng
        steps = self.work(tag, rng.randint(0, 4))
        proc = f"proc-{self._token()}"
        pid = rng.randint(1000, 60000)
        command = rng.choice(["npm run build", "cargo test", "make -j2 all", "pytest -x tests/"]) + f"  # {tag}"
        started = rng.randint(0, 10**6)
        steps.append(
            _call(
                "exec",
                {"command": command, "yieldMs": 1000, "background": True},
                result=_result(
                    f"Command still running (session {proc}, pid {pid})",
                    {"status": "running", "sessionId": proc, "pid": pid, "startedAt": started, "tail": ""},
                ),
            )
        )
        lines: list[str] = []
        elapsed = 0
        for _ in range(rng.randint(3, 18)):
            elapsed += rng.randint(500, 4000)
            if not lines or rng.random() < 0.75:
                lines.append(f"[{len(lines) + 1}] step {self._token()} ok")
            aggregated = "\n".join(lines[-5:])
            details = {"status": "running", "sessionId": proc, "pid": pid, "durationMs": elapsed}
            steps.append(
                _call(
                    "process",
                    {"action": "poll", "sessionId": proc},
                    result=_result(aggregated, {**details, "aggregated": aggregated}),
                )
            )
        done = "\n".join([*lines[-5:], "done"])
        final = {
            "status": "completed",
            "sessionId": proc,
            "pid": pid,
            "exitCode": 0,
            "durationMs": elapsed + rng.randint(100, 900),
            "aggregated": done,
        }
        steps.append(_call("process", {"action": "poll", "sessionId": proc}, result=_result(done, final)))
        if rng.random() < 0.5:  # re-run the same command a few times: volatile fields, same args
            for _ in range(rng.randint(1, 4)):
                steps.append(self._exec_once(f"npm test  # {tag}"))
        steps.extend(self.work(tag, rng.randint(0, 3)))
        return steps

    def message_sends(self, tag: str) -> list[Event]:
        """Status messages to a chat: every delivery gets a fresh messageId / ts; a few exact repeats."""
        rng = self.rng
        steps = self.work(tag, rng.randint(0, 3))
        channel = rng.choice(["slack", "feishu", "telegram"])
        chat = f"chat-{self._token()[:6]}"
        texts = [f"Progress {i}: finished step {i} of {tag}" for i in range(rng.randint(3, 14))]
        texts += ["Still working on it…"] * rng.randint(0, 4)
        rng.shuffle(texts)
        for text in texts:
            message_id = f"om_{self._token()}"
            details = {
                "ok": True,
                "channel": channel,
                "chatId": chat,
                "messageId": message_id,
                "ts": BASE_TS_MS + rng.randint(0, 10**7),
                "receipt": {"platformMessageId": f"p_{self._token()}"},
            }
            if channel == "telegram":
                args: dict[str, Any] = {"to": chat, "text": text}
                steps.append(_call("telegram", args, result=_result(f"sent {message_id}", details)))
            else:
                args = {"action": "send", "target": f"{channel}:{chat}", "text": text}
                steps.append(_call("message", args, result=_result(f"sent {message_id}", details)))
        return steps

    def generic_loop(self, tag: str) -> list[Event]:
        """The same call over and over: mostly identical results (blocks), sometimes changing (warns only)."""
        rng = self.rng
        steps = self.work(tag, rng.randint(0, 5))
        tool, args = rng.choice(
            [
                ("read", {"path": f"/repo/{tag}/config.yaml"}),
                ("grep", {"pattern": "TODO", "path": f"/repo/{tag}"}),
                ("web_fetch", {"url": f"https://status.example.com/{tag}"}),
                ("exec", {"command": f"ls /repo/{tag}/build"}),
            ]
        )
        stable = rng.random() < 0.75
        for i in range(rng.randint(12, 28)):
            text = "same output" if stable else f"output at {i}"
            if tool == "exec":
                steps.append(
                    _call(
                        tool,
                        args,
                        result=_result(
                            text,
                            {"status": "completed", "exitCode": 0, "aggregated": text, "pid": 2000 + i},
                        ),
                    )
                )
            else:
                steps.append(_call(tool, args, result=_result(text, {"ok": True})))
        return steps

    def ping_pong(self, tag: str) -> list[Event]:
        rng = self.rng
        steps = self.work(tag, rng.randint(0, 4))
        a = _call("read", {"path": f"/repo/{tag}/a.txt"}, result=_result("a stable", {"ok": True}))
        b = _call("list", {"dir": f"/repo/{tag}"}, result=_result("a.txt b.txt", {"ok": True}))
        for i in range(rng.randint(10, 24)):
            steps.append(dict(a if i % 2 == 0 else b))
        return steps

    def unknown_tool(self, tag: str) -> list[Event]:
        """A wrapped tool whose target tool does not exist, retried with ever-different arguments."""
        rng = self.rng
        steps = self.work(tag, rng.randint(0, 4))
        missing = rng.choice(["jira_search", "browser.open", "deploy_preview"])
        for i in range(rng.randint(8, 14)):
            args = {"tool": missing, "input": {"query": f"{tag} attempt {i}"}}
            steps.append(_call("mcp_call", args, error=f"Unknown tool: {missing}"))
        return steps

    def post_compaction(self, tag: str) -> list[Event]:
        """Context compaction, then the same call with the same result: the guard aborts on the 3rd."""
        rng = self.rng
        steps = self.work(tag, rng.randint(2, 6))
        steps.append({"type": "compaction_retry"})
        path = f"/repo/{tag}/CHANGELOG.md"
        for _ in range(3):
            steps.append(_call("read", {"path": path}, result=_result("unchanged", {"ok": True})))
        return steps


def _finish(rng: random.Random, tag: str, steps: list[Event]) -> list[Event]:
    """Give every call its id; some calls report their outcome later as a ``tool_result``.

    The separate result follows its call directly (detect → record pending → execute → record outcome).
    """
    out: list[Event] = []
    for n, body in enumerate(steps):
        if body["type"] != "tool_call":
            out.append(body)
            continue
        rest = {k: v for k, v in body.items() if k not in ("type", "tool")}
        step = {"type": "tool_call", "tool": body["tool"], "call_id": f"{tag}-c{n}", **rest}
        if ("result" in step or "error" in step) and rng.random() < SEPARATE_RESULT_SHARE:
            out.append({k: v for k, v in step.items() if k not in ("result", "error")})
            out.append({**step, "type": "tool_result"})
        else:
            out.append(step)
    return out


def prehash(event: Event) -> Event:
    """Replace raw args and outcome by ``args_hash`` / ``result_hash`` as a privacy-minded gateway would.

    A process poll/log call also carries ``poll_action`` (the one fact about its arguments the poll detector
    needs); a send's receipts are already stripped inside its outcome hash.
    """
    if event["type"] not in ("tool_call", "tool_result"):
        return event
    tool: str = event["tool"]
    args = event["args"]
    hashed = {k: v for k, v in event.items() if k not in ("args", "result", "error")}
    hashed["args_hash"] = digest(args)
    action = process_action(tool, args)
    if action is not None:
        hashed["poll_action"] = action
    if "result" in event or "error" in event:
        outcome = Outcome(result=event.get("result", MISSING), error=event.get("error"))
        result_hash, unknown = hash_outcome(tool, args, outcome)
        if result_hash is not None:
            hashed["result_hash"] = result_hash
            if unknown is not None:
                hashed["unknown_tool_name"] = unknown
    return hashed


def _with_usage(rng: random.Random, steps: list[Event]) -> list[Event]:
    """Each tool call preceded by the usage of the model call that made it (``steps`` of one run)."""
    provider, model, price = MODELS[rng.randrange(len(MODELS))]
    context = rng.randint(1_500, 6_000)
    out: list[Event] = []
    for body in steps:
        if body["type"] == "tool_call":
            context += rng.randint(150, 900)  # the previous call and its result joined the context
            cached = int(context * rng.uniform(0.5, 0.9))
            fresh, output = context - cached, rng.randint(40, 400)
            usage: Event = {
                "type": "model_usage",
                "provider": provider,
                "model": model,
                "input_tokens": fresh,
                "output_tokens": output,
                "cache_read_tokens": cached,
                "cost_usd": None
                if price is None
                else round((fresh * price[0] + output * price[1] + cached * price[2]) / 1e6, 8),
            }
            out.append(usage)
        out.append(body)
    return out


class _Fleet:
    def __init__(
        self,
        *,
        gateways: int,
        seed: int,
        hashed: bool,
        progressing_calls: tuple[int, int] = PROGRESSING_CALLS,
        usage: bool = False,
        eager: bool = True,
    ) -> None:
        """``eager``: draw every slot's first run now, in slot order (the historical stream of draws); else a
        slot's first run is drawn when the slot is first picked, so silent gateways cost nothing."""
        if gateways < 1:
            raise ValueError("gateways must be at least 1")
        self.rng = random.Random(seed)
        self.usage_rng = random.Random(f"usage-{seed}") if usage else None
        self.hashed = hashed
        self.scripts = _Scripts(self.rng, progressing_calls)
        self.tag = seed_tag(seed)
        self.slot_count = gateways * RUNS_PER_GATEWAY  # slot i belongs to gateway i // RUNS_PER_GATEWAY
        self.gateways: dict[int, _Gateway] = {}
        self.slots: dict[int, _Run] = {}
        if eager:
            for index in range(self.slot_count):
                self.slots[index] = self._new_run(self._gateway(index // RUNS_PER_GATEWAY))
        self._builders: dict[Archetype, Callable[[str], list[Event]]] = {
            "progressing": self.scripts.progressing,
            "exec_polling": self.scripts.exec_polling,
            "message_sends": self.scripts.message_sends,
            "generic_loop": self.scripts.generic_loop,
            "ping_pong": self.scripts.ping_pong,
            "unknown_tool": self.scripts.unknown_tool,
            "post_compaction": self.scripts.post_compaction,
        }
        for run in self.slots.values():
            run.steps = self._steps(run)

    def _gateway(self, number: int) -> _Gateway:
        gw = self.gateways.get(number)
        if gw is None:
            gw = self.gateways[number] = _Gateway(f"gw-{number:03d}", self.tag)
        return gw

    def _slot(self, index: int) -> _Run:
        """The open run of slot ``index``; a lazy fleet draws the slot's first run here."""
        run = self.slots.get(index)
        if run is None:
            run = self._new_run(self._gateway(index // RUNS_PER_GATEWAY))
            run.steps = self._steps(run)
            self.slots[index] = run
        return run

    def _new_run(self, gw: _Gateway) -> _Run:
        rng = self.rng
        gw.next_run += 1
        run_id: str | None = f"{gw.prefix}-r{gw.next_run}"
        if rng.random() < 0.05:
            run_id = None  # unscoped run: its fresh session is the scope key
        if run_id is None or not gw.sessions or rng.random() < 0.4:
            session = f"{gw.prefix}-s{gw.next_run}"
            if run_id is not None:
                gw.sessions.append(session)
                del gw.sessions[:-8]
        else:
            session = rng.choice(gw.sessions)  # heartbeat runs share a session, never a scope key
        names = [a for a, _ in AGENTS]
        agent = rng.choices(names, weights=[w for _, w in AGENTS])[0]
        kinds = [a for a, _ in ARCHETYPES]
        archetype = rng.choices(kinds, weights=[w for _, w in ARCHETYPES])[0]
        return _Run(gw, agent, session, run_id, archetype, [])

    def _steps(self, run: _Run) -> list[Event]:
        tag = run.run_id or run.session_id
        steps = _finish(self.rng, tag, self._builders[run.archetype](tag))
        return steps if self.usage_rng is None else _with_usage(self.usage_rng, steps)

    def next_event(self, ts: int) -> tuple[str, Event]:
        index = self.rng.randrange(self.slot_count)
        run = self._slot(index)
        body = run.steps[run.position]
        run.position += 1
        if run.done():
            fresh = self._new_run(run.gateway)
            fresh.steps = self._steps(fresh)
            self.slots[index] = fresh
        event: Event = {
            "type": body["type"],
            "event_id": run.gateway.event_id(),
            "gateway_id": run.gateway.gateway_id,
            "agent_id": run.agent_id,
            "session_id": run.session_id,
            "run_id": run.run_id,
            "ts": ts,
        }
        if body["type"] != "compaction_retry":
            event.update((k, v) for k, v in body.items() if k != "type")
            if self.hashed:
                event = prehash(event)
        return run.key, event

    def malformed(self, ts: int, kinds: tuple[MalformedKind, ...]) -> tuple[str, bytes]:
        rng = self.rng
        run = self._slot(rng.randrange(self.slot_count))
        kind = rng.choice(kinds)
        base: Event = {
            "type": "tool_call",
            "event_id": run.gateway.event_id(),
            "gateway_id": run.gateway.gateway_id,
            "agent_id": run.agent_id,
            "session_id": run.session_id,
            "run_id": run.run_id,
            "ts": ts,
            "tool": "read",
            "call_id": f"bad-{run.gateway.next_event}",
            "args": {"path": "/tmp/x"},
        }
        if kind == "not_json":
            value = orjson.dumps(base)[: rng.randint(10, 60)]  # a truncated record
        elif kind == "not_utf8":
            value = b'{"type": "tool_call", "event_id": "\xff\xfe\xfd", "gateway_id": "' + run.key.encode() + b'"}'
        elif kind == "schema_invalid":
            del base["session_id"]
            base["args_hash"] = "not-a-hash"
            value = orjson.dumps(base)
        elif kind == "unknown_type":
            value = orjson.dumps({**base, "type": "tool_progress"})
        elif kind == "future_version":
            value = orjson.dumps({**base, "version": 2})
        else:
            value = orjson.dumps({**base, "args": {"blob": "x" * OVERSIZED_BYTES}})
        return run.key, value


def event_count(rate: float, duration: float) -> int:
    """How many records a simulation of ``rate`` events/s for ``duration`` s has: ``int(rate * duration)``.

    Raises ``ValueError`` unless both are positive and the count is finite (the command line bounds it further).
    """
    if not rate > 0 or not duration > 0:
        raise ValueError("rate and duration must be positive")
    total = rate * duration
    if not math.isfinite(total):
        raise ValueError("rate * duration must be finite")
    return int(total)


def _eager(gateways: int, total: int) -> bool:
    """Whether a fleet of ``total`` events draws every slot's first run up front (see the module docstring)."""
    return gateways <= EAGER_GATEWAYS or gateways * RUNS_PER_GATEWAY <= total


def _check(rate: float, duration: float, malformed: float) -> int:
    if not 0.0 <= malformed <= 1.0:
        raise ValueError("malformed must be a fraction between 0 and 1")
    return event_count(rate, duration)


def _ts(start_ms: int, i: int, rate: float) -> int:
    return start_ms + int(i * 1000 / rate)


def simulate_events(
    *,
    gateways: int,
    rate: float,
    duration: float,
    seed: int,
    hashed: bool = False,
    start_ms: int | None = None,
    usage: bool = False,
) -> Iterator[Event]:
    """The fleet's valid events as dicts, in time order (``rate * duration`` of them)."""
    total = _check(rate, duration, 0.0)
    fleet = _Fleet(gateways=gateways, seed=seed, hashed=hashed, usage=usage, eager=_eager(gateways, total))
    start = start_of(seed) if start_ms is None else start_ms
    for i in range(total):
        yield fleet.next_event(_ts(start, i, rate))[1]


def fleet_events(
    *, gateways: int, seed: int, hashed: bool = False, progressing_calls: tuple[int, int] = PROGRESSING_CALLS
) -> Iterator[tuple[str, Event]]:
    """Endless ``(scope key, event)`` pairs of the fleet, ``ts`` left to the caller (a paced producer stamps it
    at send time). ``progressing_calls`` bounds the length of healthy runs; the loop archetypes are unchanged.
    Endless traffic reaches every slot, so the fleet is drawn up front."""
    fleet = _Fleet(gateways=gateways, seed=seed, hashed=hashed, progressing_calls=progressing_calls)
    while True:
        yield fleet.next_event(0)


def simulate(
    *,
    gateways: int,
    rate: float,
    duration: float,
    seed: int,
    hashed: bool = False,
    malformed: float = 0.0,
    oversized: bool = False,
    start_ms: int | None = None,
    usage: bool = False,
) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` Kafka records in time order; key = the event's scope key (:func:`streams.decode.scope_key`).

    About ``malformed`` of the records are bad (one of :data:`MALFORMED_KINDS`, ``oversized`` only when asked
    for: each is over 1 MiB). They take the place of a valid event, so the total stays ``rate * duration``.
    """
    total = _check(rate, duration, malformed)
    kinds = MALFORMED_KINDS if oversized else MALFORMED_KINDS[:-1]
    fleet = _Fleet(gateways=gateways, seed=seed, hashed=hashed, usage=usage, eager=_eager(gateways, total))
    start = start_of(seed) if start_ms is None else start_ms
    for i in range(total):
        ts = _ts(start, i, rate)
        if malformed and fleet.rng.random() < malformed:
            key, value = fleet.malformed(ts, kinds)
        else:
            key, event = fleet.next_event(ts)
            value = orjson.dumps(event)
        yield key.encode("utf-8"), value


__all__ = [
    "ARCHETYPES",
    "BASE_TS_MS",
    "DEFAULT_GATEWAYS",
    "DEFAULT_RATE",
    "EAGER_GATEWAYS",
    "MALFORMED_KINDS",
    "PROGRESSING_CALLS",
    "event_count",
    "fleet_events",
    "prehash",
    "seed_tag",
    "simulate",
    "simulate_events",
    "start_of",
]
