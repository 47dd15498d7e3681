"""Outcome hashing rules, call signatures, known-poll detection and unknown-tool names."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from streams.detection import MISSING, Outcome, args_hash, canonical, digest, hash_outcome, is_known_poll
from streams.detection.outcome import content_text, hash_result
from streams.detection.unknown_tool import unknown_tool_name


def res(text: str | None = None, **details: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"details": details}
    if text is not None:
        out["content"] = [{"type": "text", "text": text}]
    return out


def h(tool: str, result: Any, args: Any = MISSING) -> str | None:
    return hash_result(tool, args, result)


# --- basic rules -----------------------------------------------------------------------------------


def test_error_hash_is_error_prefix_plus_digest_of_the_message() -> None:
    assert hash_outcome("read", {}, Outcome(error="boom")) == ("error:" + digest("boom"), None)
    assert hash_outcome("read", {}, Outcome(error="boom"))[0] == ("error:" + hashlib.sha256(b'"boom"').hexdigest())
    assert hash_outcome("x", {}, Outcome(error="Tool exec not found")) == (
        "error:" + digest("Tool exec not found"),
        "exec",
    )


def test_outcome_precedence_and_absence() -> None:
    both = Outcome(result="ok", error="bad", result_hash="f" * 64)
    assert hash_outcome("t", {}, both)[0] == "error:" + digest("bad")
    assert hash_outcome("t", {}, Outcome(result="ok", result_hash="f" * 64))[0] == digest("ok")
    assert hash_outcome("t", {}, Outcome(result_hash="f" * 64, unknown_tool_name="nope")) == (
        "f" * 64,
        "nope",
    )
    assert hash_outcome("t", {}, Outcome(result=None)) == (None, None)
    assert hash_outcome("t", {}, Outcome()) == (None, None)
    assert hash_outcome("t", {}, None) == (None, None)


def test_non_object_results_hash_the_value() -> None:
    assert h("read", "plain") == digest("plain")
    assert h("read", [1, 2]) == digest([1, 2])
    assert h("read", 3.0) == digest(3)
    assert h("read", False) == digest(False)


def test_default_rule_is_details_and_trimmed_text() -> None:
    result = {
        "content": [{"type": "text", "text": "  a "}, {"type": "image"}, {"type": "text", "text": "b\n"}],
        "details": {"ok": True},
    }
    assert h("read", result) == digest({"details": {"ok": True}, "text": "a \nb"})
    assert h("read", {"content": "nope", "details": [1]}) == digest({"details": {}, "text": ""})
    assert h("read", {}) == digest({"details": {}, "text": ""})


def test_content_text() -> None:
    parts = [
        {"type": "text", "text": "x"},
        {"type": 1, "text": "no"},
        {"text": "no"},
        {"type": "other", "text": "y"},
    ]
    assert content_text(parts) == "x\ny"
    assert content_text([{"type": "text", "text": "\u3000 z \ufeff"}]) == "z"
    assert content_text(None) == ""


def test_loop_veto_has_no_hash_but_plugin_vetoes_do() -> None:
    veto = res("blocked", status="blocked", deniedReason="tool-loop", reason="CRITICAL: ...")
    assert hash_outcome("read", {}, Outcome(result=veto)) == (None, None)
    assert h("exec", veto) is None
    plugin = res("blocked", status="blocked", deniedReason="plugin-before-tool-call")
    assert h("read", plugin) == digest({"details": plugin["details"], "text": "blocked"})
    assert h("read", res("x", status="blocked", deniedReason="plugin-approval")) is not None


# --- exec ------------------------------------------------------------------------------------------


def test_exec_running_hashes_status_and_tail_only() -> None:
    a = res(
        "Command still running (pid 1)",
        status="running",
        pid=1,
        sessionId="s1",
        startedAt=1,
        cwd="/a",
        tail="(no new output)",
    )
    b = res(
        "Command still running (pid 2)",
        status="running",
        pid=2,
        sessionId="s2",
        startedAt=2,
        cwd="/b",
        tail="(no new output)",
    )
    assert h("exec", a) == h("exec", b) == digest({"status": "running", "tail": "(no new output)"})
    assert h("exec", res("x", status="running")) == digest({"status": "running", "tail": ""})
    assert h("exec", res("x", status="running", tail="new")) != h("exec", a)


def test_exec_completed_and_failed() -> None:
    a = res("ignored", status="completed", exitCode=0, aggregated="  out \n", durationMs=5, pid=9, cwd="/x")
    expected = digest({"status": "completed", "exitCode": 0, "timedOut": False, "output": "out"})
    assert h("exec", a) == expected
    assert h("exec", res("other", status="completed", exitCode=0, aggregated="out", endedAt=7)) == expected
    # empty or whitespace-only aggregated falls back to the trimmed text
    assert h("exec", res(" text ", status="failed", exitCode=None, aggregated=" \n")) == digest(
        {"status": "failed", "exitCode": None, "timedOut": False, "output": "text"}
    )
    assert h("exec", res("t", status="failed", exitCode="1", timedOut="true")) == digest(
        {"status": "failed", "exitCode": None, "timedOut": False, "output": "t"}
    )
    assert h("exec", res("t", status="failed", exitCode=124, timedOut=True)) == digest(
        {"status": "failed", "exitCode": 124, "timedOut": True, "output": "t"}
    )
    assert h("exec", res("t", status="failed", exitCode=True)) == h("exec", res("t", status="failed"))


def test_exec_approval_keeps_five_fields() -> None:
    a = res(
        "Approval required (id 1)",
        status="approval-pending",
        reason="allowlist-miss",
        host="gw",
        command="rm -rf x",
        approvalId="1",
        expiresAtMs=5,
    )
    b = res(
        "Approval required (id 2)",
        status="approval-pending",
        reason="allowlist-miss",
        host="gw",
        command="rm -rf x",
        approvalId="2",
        expiresAtMs=6,
    )
    assert (
        h("exec", a)
        == h("exec", b)
        == digest(
            {
                "status": "approval-pending",
                "reason": "allowlist-miss",
                "host": "gw",
                "command": "rm -rf x",
                "warningText": "",
            }
        )
    )
    assert h("exec", res("x", status="approval-unavailable", warningText="w", reason=3)) == digest(
        {"status": "approval-unavailable", "reason": None, "host": None, "command": "", "warningText": "w"}
    )
    # OpenClaw 2026.7.35 writes a missing command as "" (not null), so it equals an empty one.
    assert h("exec", res("x", status="approval-pending")) == h("exec", res("x", status="approval-pending", command=""))


def test_exec_other_statuses_use_the_default_rule() -> None:
    other = res("t", status="queued", pid=1)
    assert h("exec", other) == digest({"details": other["details"], "text": "t"})
    no_status = res("t", pid=1)
    assert h("exec", no_status) == digest({"details": {"pid": 1}, "text": "t"})
    assert h("exec", res("t", status=1)) == digest({"details": {"status": 1}, "text": "t"})


# --- process poll / log ----------------------------------------------------------------------------


def test_process_poll_shape_with_undefined_status() -> None:
    result = res(" t ", pid=4, durationMs=9, exitCode=0)
    expected_text = '{"action":"poll","aggregated":null,"exitCode":0,"exitSignal":null,"status":undefined,"text":"t"}'
    assert h("process", result, {"action": "poll"}) == hashlib.sha256(expected_text.encode()).hexdigest()
    with_status = res("t", status="running", aggregated="x", pid=1, sessionId="a")
    same = res("t", status="running", aggregated="x", pid=2, sessionId="b")
    assert h("process", with_status, {"action": "poll"}) == h("process", same, {"action": "poll"})
    assert h("process", res("t2", status="running", aggregated="x"), {"action": "poll"}) != h(
        "process", with_status, {"action": "poll"}
    )


def test_process_log_shape() -> None:
    result = res("tail", status="running", totalLines=4, totalChars=40, truncated=False, pid=1)
    assert h("process", result, {"action": "log", "sessionId": "s"}) == digest(
        {
            "action": "log",
            "status": "running",
            "totalLines": 4,
            "totalChars": 40,
            "truncated": False,
            "exitCode": None,
            "exitSignal": None,
            "text": "tail",
        }
    )


def test_process_other_actions_and_prehashed_args_use_the_default_rule() -> None:
    result = res("t", status="running", pid=1)
    default = digest({"details": result["details"], "text": "t"})
    assert h("process", result, {"action": "list"}) == default
    assert h("process", result, MISSING) == default
    assert h("process", result, ["poll"]) == default


# --- sends -----------------------------------------------------------------------------------------


SEND_DETAILS = {
    "ok": True,
    "channel": "feishu",
    "messageId": "om_1",
    "runId": "r1",
    "receipt": {"platformMessageId": "p1"},
    "results": [{"message_id": "m1", "ts": 1, "route": {"id": "route-1"}}],
    "message": {"id": "qa_1", "text": "hi", "direction": "outbound", "conversation": {"id": "room"}},
}
SEND_STRIPPED = {
    "ok": True,
    "channel": "feishu",
    "results": [{"route": {"id": "route-1"}}],
    "message": {"text": "hi", "direction": "outbound", "conversation": {"id": "room"}},
}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("message", {"action": "send", "to": "x"}),
        ("message", {"action": "upload-file"}),
        ("message", {"action": "thread-reply"}),
        ("message", {"action": "sendWithEffect"}),
        ("sessions_send", MISSING),
        ("sessions_send", {"anything": 1}),
        ("telegram", {"to": "telegram:1", "text": "x"}),
        ("nostr", {"to": " "}),
    ],
)
def test_send_like_results_hash_stripped_details_only(tool: str, args: Any) -> None:
    assert h(tool, res("text is ignored", **SEND_DETAILS), args) == digest(SEND_STRIPPED)
    assert h(tool, res("other text", **SEND_STRIPPED), args) == digest(SEND_STRIPPED)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("message", {"action": "read"}),
        ("message", {"action": "Send"}),
        ("message", {"action": " send"}),
        ("message", {"action": ["send"]}),
        ("message", MISSING),  # pre-hashed: cannot be a message send (no arguments to read)
        ("telegram", {"to": ""}),
        ("telegram", {"text": "no target"}),
        ("telegram", MISSING),
        ("Telegram", {"to": "x"}),
        ("slack_send", {"to": "x"}),
    ],
)
def test_non_send_calls_keep_ids(tool: str, args: Any) -> None:
    assert h(tool, res("t", **SEND_DETAILS), args) == digest({"details": SEND_DETAILS, "text": "t"})


def test_delivery_object_id_rules() -> None:
    send = {"action": "send"}
    delivery = {"id": "a", "text": "x", "senderId": "me"}
    assert h("message", res(None, message=delivery), send) == digest({"message": {"text": "x", "senderId": "me"}})
    no_marker = {"id": "a", "text": "x"}
    assert h("message", res(None, message=no_marker), send) == digest({"message": no_marker})
    non_string_id = {"id": 5, "text": "x", "accountId": "acc"}
    assert h("message", res(None, message=non_string_id), send) == digest({"message": non_string_id})
    conversation_not_object = {"id": "a", "text": "x", "conversation": "room"}
    assert h("message", res(None, m=conversation_not_object), send) == digest({"m": conversation_not_object})
    top_level = {"details": {"id": "a", "text": "x", "direction": "in", "createdAt": 5}}
    assert h("message", top_level, send) == digest({"text": "x", "direction": "in"})


# --- signatures, poll predicate, unknown tools -----------------------------------------------------


def test_args_hash() -> None:
    assert args_hash("read", {"b": 1, "a": 2}) == "read:" + digest({"a": 2, "b": 1})
    assert args_hash("read", MISSING, "ab" * 32) == "read:" + "ab" * 32
    assert args_hash("read", None) == "read:" + digest(None)
    assert args_hash("read") == "read:" + hashlib.sha256(b"undefined").hexdigest()
    assert args_hash("read", {"x": 1}) != args_hash("write", {"x": 1})
    assert canonical(None) == "null"


def test_known_poll_tools() -> None:
    assert is_known_poll("command_status")
    assert is_known_poll("command_status", {"id": 1})
    assert is_known_poll("process", {"action": "poll"})
    assert is_known_poll("process", {"action": "log", "sessionId": "s"})
    assert not is_known_poll("process", {"action": "kill"})
    assert not is_known_poll("process")
    assert not is_known_poll("exec", {"action": "poll"})


@pytest.mark.parametrize(
    ("message", "name"),
    [
        ("Tool exec not found", "exec"),
        ("tool 'Web.Fetch' is not available", "web.fetch"),
        ('Unknown tool: "Browser_2"', "browser_2"),
        ("unknown tool   my-tool", "my-tool"),
        ("Error: UNKNOWN TOOL:x.y", "x.y"),
        ("tool `browser` not found", None),  # OpenClaw 2026.7.35 allows straight quotes only
        ("Unknown tool: `browser`", None),
        ("Unknown tool: 'browser'", "browser"),
        ("TOOL\u00a0exec\u2003NOT FOUND", "exec"),  # JavaScript \\s includes NBSP and EM SPACE
        ("the tool\ufeffexec\u3000not found", "exec"),
        ("tool\x85exec not found", None),  # U+0085 is not JavaScript whitespace
        ("unknown tool: \u212a", None),  # KELVIN SIGN is not ASCII-case-equal to k
        ("Unknown tool: ſed", None),
        ("tool exec failed", None),
        ("toolexec not found", None),
        ("", None),
    ],
)
def test_unknown_tool_name(message: str, name: str | None) -> None:
    assert unknown_tool_name(message) == name


def test_huge_unknown_tool_names_are_bounded_but_still_compare() -> None:
    from streams.detection import unknown_tool_name

    a = unknown_tool_name("unknown tool: " + "a" * 1_000_000)
    b = unknown_tool_name("Unknown tool: " + "A" * 1_000_000)
    c = unknown_tool_name("unknown tool: " + "a" * 999_999)
    assert a is not None and a == b and a != c
    assert len(a) < 100
    assert unknown_tool_name("unknown tool: " + "x" * 128) == "x" * 128
