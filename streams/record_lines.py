"""One readable line per loopwatch record, the format chosen by what the record is, not by its topic.

``loopwatch tail`` follows any mix of topics: verdicts, fleet alerts, dead letters and events each get a line
that starts with a time and a fixed-width kind (``BLOCK``, ``STORM``, ``DEAD``, ``EVENT``), so a mixed stream
stays readable. Counts read ``count (threshold N)``. Nothing here quotes tool arguments or results.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Mapping
from typing import Any

from schemas import EVENT_TYPES
from streams.loop_cost import loop_cost_text


def when(ts: Any) -> str:
    """A record time for people: epoch milliseconds become RFC 3339 (UTC); strings are shown as sent."""
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        try:
            moment = datetime.datetime.fromtimestamp(ts / 1000.0, tz=datetime.UTC)
        except (OverflowError, OSError, ValueError):
            return str(ts)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(ts) if ts else "-"


def kind_of(record: dict[str, Any]) -> str:
    """``verdict``, ``alert``, ``dead_letter``, ``event`` or ``other``."""
    if "verdict_id" in record and "decision" in record:
        return "verdict"
    if "alert_id" in record:
        return "alert"
    if "reason" in record and "source" in record and "original_sha256" in record:
        return "dead_letter"
    if record.get("type") in EVENT_TYPES and "event_id" in record:
        return "event"
    return "other"


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def scope_label(record: Mapping[str, Any]) -> str:
    """``run=<id>``, or ``session=<id>`` for a run without a run id: how every line names the scope."""
    run = record.get("run_id")
    return f"run={run}" if run else f"session={record.get('session_id')}"


def verdict_line(v: dict[str, Any]) -> str:
    paired = f"<->{v['paired_tool']}" if v.get("paired_tool") else ""
    cost = ""
    if v.get("tokens_in_loop") is not None:  # priced by streams.loop_cost
        figures = (v["tokens_in_loop"], v.get("cost_usd_in_loop"))
        cost = f" ({loop_cost_text(*figures, v.get('saved_tokens_estimate'), v.get('saved_cost_usd_estimate'))})"
    return (
        f"{when(v.get('event_ts'))} {str(v.get('decision', '?')).upper():7} {v.get('detector')} "
        f"{v.get('count')} (threshold {v.get('threshold')}) gw={v.get('gateway_id')} agent={v.get('agent_id')} "
        f"{scope_label(v)} tool={v.get('tool')}{paired}{cost} | {_one_line(v.get('message'))}"
    )


def alert_line(a: dict[str, Any]) -> str:
    if a.get("kind") == "agent":
        what = f"agent={a.get('agent_id')}"
    else:
        what = f"tool={a.get('tool')} outcome={str(a.get('outcome_hash') or '-')[:12]}"
    gateways = ",".join(str(g) for g in a.get("gateways") or []) or "-"
    window = a.get("window_seconds")
    window_text = f"{window:g}s" if isinstance(window, int | float) else str(window)
    return (
        f"{a.get('window_start')} STORM   {a.get('kind')} {a.get('detector')} {what} "
        f"{a.get('distinct_runs')} runs (threshold {a.get('threshold')}) verdicts={a.get('verdicts')} "
        f"gateways={gateways} window={window_text} alert={str(a.get('alert_id'))[:12]}"
    )


def _key_text(key_b64: Any) -> str:
    if not isinstance(key_b64, str):
        return "-"
    try:
        key = base64.b64decode(key_b64, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return f"b64:{key_b64[:16]}"
    return key if key.isprintable() and len(key) <= 80 else f"b64:{key_b64[:16]}"


def dead_letter_line(d: dict[str, Any]) -> str:
    raw_source = d.get("source")
    source: dict[str, Any] = raw_source if isinstance(raw_source, dict) else {}
    size = d.get("original_size")
    if size is None and isinstance(d.get("original"), str):
        size = len(d["original"]) * 3 // 4 - d["original"].count("=")
    kept = " (original cut)" if d.get("original_truncated") else (" (digest only)" if d.get("original") is None else "")
    kept += " (key cut)" if d.get("key_truncated") else ""
    return (
        f"{d.get('received_at')} DEAD    {d.get('reason')} {source.get('topic')}[{source.get('partition')}]"
        f"@{source.get('offset')} key={_key_text(d.get('key'))} {size} bytes{kept} "
        f"sha256={str(d.get('original_sha256'))[:12]} | {_one_line(d.get('detail'))}"
    )


def _usage(e: dict[str, Any]) -> str:
    """A model_usage event's model, tokens and price (as the gateway accounted them)."""
    tokens = sum(
        n
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        if isinstance(n := e.get(name), int) and not isinstance(n, bool)
    )
    cost = e.get("cost_usd")
    price = f" cost=${cost:.4f}" if isinstance(cost, int | float) and not isinstance(cost, bool) else ""
    return f" model={e.get('provider') or '-'}/{e.get('model') or '-'} tokens={tokens}{price}"


def event_line(e: dict[str, Any]) -> str:
    kind = e.get("type")
    if kind == "model_usage":
        call = _usage(e)
    else:
        call = "" if kind == "compaction_retry" else f" tool={e.get('tool')} call={e.get('call_id')}"
    if "error" in e:
        outcome = " outcome=error"
    elif "result" in e or "result_hash" in e:
        outcome = " outcome=result"
    else:
        outcome = ""
    return (
        f"{when(e.get('ts'))} EVENT   {kind} gw={e.get('gateway_id')} agent={e.get('agent_id')} {scope_label(e)}"
        f"{call}{outcome} event={e.get('event_id')}"
    )


def other_line(record: dict[str, Any]) -> str:
    keys = ",".join(sorted(str(k) for k in record)[:8])
    return f"- OTHER   a JSON object with keys {keys}"


def record_line(record: dict[str, Any]) -> str:
    """The line of any loopwatch record (see the module docstring)."""
    render = {
        "verdict": verdict_line,
        "alert": alert_line,
        "dead_letter": dead_letter_line,
        "event": event_line,
    }.get(kind_of(record), other_line)
    return render(record)


def fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` columns (ending in an ellipsis); 0 = no limit."""
    if width <= 0 or len(line) <= width:
        return line
    return line[: max(1, width - 1)] + "…"
