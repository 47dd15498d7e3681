"""Outbound message sends: which calls are sends, and their result details without per-send ids.

Every send gets fresh message ids, receipts and timestamps; hashing them would make a send loop look like
progress. Only these volatile keys are dropped, so different routes or conversations stay different.
"""

from __future__ import annotations

from typing import Any, Final

MESSAGE_SEND_ACTIONS: Final = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)
PROVIDER_SEND_TOOLS: Final = frozenset(
    {
        "telegram",
        "discord",
        "slack",
        "whatsapp",
        "signal",
        "imessage",
        "bluebubbles",
        "googlechat",
        "msteams",
        "matrix",
        "mattermost",
        "feishu",
        "line",
        "zalo",
        "instagram",
        "twitch",
        "irc",
        "nostr",
    }
)
VOLATILE_SEND_KEYS: Final = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)
_DELIVERY_MARKERS: Final = ("direction", "senderId", "accountId")


def is_send_like(tool: str, args: Any) -> bool:
    """Whether a call is an outbound send (names and actions match exactly)."""
    if tool == "sessions_send":
        return True
    if tool == "message":
        action = args.get("action") if isinstance(args, dict) else None
        return type(action) is str and action in MESSAGE_SEND_ACTIONS
    if tool in PROVIDER_SEND_TOOLS and isinstance(args, dict):
        target = args.get("to")
        return type(target) is str and target != ""
    return False


def _is_delivery_object(obj: dict[str, Any]) -> bool:
    if type(obj.get("id")) is not str or type(obj.get("text")) is not str:
        return False
    return any(type(obj.get(k)) is str for k in _DELIVERY_MARKERS) or isinstance(obj.get("conversation"), dict)


def strip_send_ids(value: Any) -> Any:
    """A copy of ``value`` without volatile send keys at any depth (and a delivery object's own ``id``)."""
    if isinstance(value, dict):
        drop_id = _is_delivery_object(value)
        return {
            key: strip_send_ids(item)
            for key, item in value.items()
            if key not in VOLATILE_SEND_KEYS and not (drop_id and key == "id")
        }
    if isinstance(value, list):
        return [strip_send_ids(item) for item in value]
    return value
