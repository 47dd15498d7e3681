"""Loading an OpenClaw config file (JSON5) into per-agent :class:`LoopConfig` values.

The I/O shell around :mod:`streams.detection.config`: it finds ``tools.loopDetection`` and every
``agents.list[].tools.loopDetection``, resolves them all once (so a file's warnings are known at start-up,
not when an agent first shows up), and answers per-event look-ups from a memo. Only an unreadable or
unparseable file is an error; everything else becomes a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import json5

from streams.config_2026_9 import Config2026_9, in_document_order
from streams.detection.config import (
    DEFAULT_AGENT_ID,
    GLOBAL_BLOCK_PATH,
    ConfigWarning,
    config_root,
    listed_agents,
    loop_block,
    loop_config_to_dict,
    normalize_agent_id,
    only_read_by,
    resolve_loop_config,
    show_number,
)
from streams.detection.profiles import ProfileChoice
from streams.detection.types import MISSING, PROFILE_2026_9, LoopConfig
from streams.errors import CommandError, file_reason
from streams.limits import COMPACT_RECORD_BYTES, MAX_STATE_BYTES

_JSON5_POSITION = re.compile(r":(\d+) (.*) at column (\d+)\s*$", re.DOTALL)
#: What a file that does not parse must be (a config or a profiles file).
JSON5_HINT = "the file must be JSON5 (json5.org)"
#: ``agents.entries`` under 2026.7, which never reads it (the 2026.9 reader does).
ENTRIES_IGNORED = only_read_by(PROFILE_2026_9)
#: Blocks whose numbers the 2026.7 reader uses: a rounded number there is reported.
_READ_BLOCK = re.compile(r"(tools|agents\.list\[\d+\]\.tools)\.loopDetection\.")
#: Integers up to here are exact in a JavaScript number too.
_EXACT = 2**53


def js_numbers(document: object, warnings: list[ConfigWarning], path: str = "") -> object:
    """``document`` with its integers as JavaScript parses them: one a double cannot hold becomes the nearest
    double (reported, with the value used, when the 2026.7 reader uses it), one beyond the double range becomes
    Infinity (then not a positive integer). JSON5 gives Python exact integers, where OpenClaw reads
    ``99999999999999999999`` as 1e20; the clamps' ``+ 1`` then rounds as well (``streams.detection.config.above``).
    Everything within 2**53 is returned as it was."""
    if isinstance(document, dict):
        return {k: js_numbers(v, warnings, f"{path}.{k}" if path else str(k)) for k, v in document.items()}
    if isinstance(document, list):
        return [js_numbers(v, warnings, f"{path}[{i}]") for i, v in enumerate(document)]
    if isinstance(document, bool) or not isinstance(document, int) or -_EXACT <= document <= _EXACT:
        return document
    try:
        double = float(document)
    except OverflowError:
        return math.inf if document > 0 else -math.inf
    if double != document and _READ_BLOCK.match(path):
        warnings.append(
            ConfigWarning(
                path,
                f"{document} is beyond JavaScript's exact integers (2**53); OpenClaw reads the nearest double",
                int(double),
            )
        )
    return int(double)


class ConfigFileError(Exception):
    """The config file cannot be read or parsed. ``line``/``column`` are 1-based when known; ``syntax`` when the
    text is not JSON5 (then the operator needs to be told what the file must be, not only where it fails); ``fix``
    what to do when it is neither a wrong path nor bad JSON5 (a file nested deeper than loopwatch reads)."""

    def __init__(
        self,
        path: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        *,
        syntax: bool = False,
        fix: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.reason = message
        self.syntax = syntax
        self.fix = fix
        where = f"{path}:{line}:{column}" if line is not None and column is not None else path
        super().__init__(f"{where}: {message}")
        self.where = where

    def to_command_error(self, check: str = "the path") -> CommandError:
        """The one-line error of a command that cannot use this config file (exit status 2). ``check`` says where
        the path came from (``the path given to --config``): an unreadable file is usually a wrong path."""
        if self.fix is not None:
            return CommandError("cannot use the config file", self.where, f"{self.reason}; {self.fix}")
        if not self.syntax:
            return CommandError("cannot use the config file", self.where, f"{self.reason}; check {check}")
        hint = f"{self.reason}; {JSON5_HINT}: fix it there, then check it with 'loopwatch config check {self.path}'"
        return CommandError("cannot use the config file", self.where, hint)


@dataclass(frozen=True, slots=True)
class AgentBlock:
    """One ``agents.list[index]`` entry: normalised id and raw ``tools.loopDetection`` (None if absent)."""

    agent_id: str
    index: int
    block: object

    @property
    def path(self) -> str:
        return f"agents.list[{self.index}].tools.loopDetection"


class LoadedConfig:
    """Every agent's resolved loop-detection config from one OpenClaw config, plus the file's warnings."""

    def __init__(
        self,
        global_block: object = None,
        agents: Iterable[AgentBlock] = (),
        *,
        path: str | None = None,
        extra_warnings: Iterable[ConfigWarning] = (),
        document: object = MISSING,
    ) -> None:
        self.path = path
        self.global_block = global_block
        self.agents: tuple[AgentBlock, ...] = tuple(agents)
        self.default_config, global_warnings = resolve_loop_config(global_block, None)
        collected: list[ConfigWarning] = [*extra_warnings, *global_warnings]
        collected.extend(_history_warning("tools.loopDetection", self.default_config))
        self._by_id: dict[str, LoopConfig] = {}
        for agent in self.agents:
            if agent.agent_id in self._by_id:
                continue  # the first entry with an id wins, like OpenClaw's lookup
            config, agent_warnings = resolve_loop_config(global_block, agent.block, agent_path=agent.path)
            self._by_id[agent.agent_id] = config
            collected.extend(agent_warnings)
            if isinstance(agent.block, dict) and "historySize" in agent.block:  # else the global block's warning
                collected.extend(_history_warning(agent.path, config))
        # The parsed file, whatever it is (null, an array: the 2026.9 reading reports that too); without one, the
        # document these blocks make up (no block: no tools, which 2026.9 would refuse as null).
        if document is MISSING:
            document = {} if global_block is None else {"tools": {"loopDetection": global_block}}
        self._document = document
        self.warnings: tuple[ConfigWarning, ...] = in_document_order(_dedupe(collected), self._document)
        self._memo: dict[str | None, LoopConfig] = {}
        self.config_hash = _config_hash(self.default_config, self._by_id)
        self._gen9: Config2026_9 | None = None
        self.choice = ProfileChoice()  # which profile judges an event (replaced by --profiles / what-if)

    @property
    def gen9(self) -> Config2026_9:
        """The same file read the 2026.9 way (built on first use)."""
        if self._gen9 is None:
            self._gen9 = Config2026_9(self._document)
        return self._gen9

    def for_event(self, gateway_id: str, agent_id: str | None, openclaw_version: str | None) -> LoopConfig:
        """The resolved config, of the profile chosen for this gateway, agent and OpenClaw version."""
        if self.choice.profile(gateway_id, agent_id, openclaw_version) == PROFILE_2026_9:
            return self.gen9.for_agent(agent_id)
        return self.for_agent(agent_id)

    def warnings_for(self, profile: str) -> tuple[ConfigWarning, ...]:
        """The file's warnings as the given generation reads it."""
        return self.gen9.warnings if profile == PROFILE_2026_9 else self.warnings

    @classmethod
    def default(cls) -> LoadedConfig:
        """No config file: OpenClaw defaults for every agent (rolling detection off, guard on)."""
        return cls()

    @classmethod
    def from_document(cls, document: object, *, path: str | None = None) -> LoadedConfig:
        """Build from an already-parsed OpenClaw config object (the top level of the file). Its numbers are
        first made the doubles OpenClaw computes with (:func:`js_numbers`)."""
        warnings: list[ConfigWarning] = []
        agents: list[AgentBlock] = []
        document = js_numbers(document, warnings)
        root = config_root(document, warnings)
        global_block = loop_block(root, "", warnings)
        agents_section = root.get("agents")
        agent_list = agents_section.get("list") if isinstance(agents_section, dict) else None
        if isinstance(agents_section, dict) and agents_section.get("entries") is not None:
            # A config in the 2026.8+ layout passed the gate while its overrides were never read: say so.
            warnings.append(ConfigWarning("agents.entries", ENTRIES_IGNORED, None))
        if agents_section is not None and not isinstance(agents_section, dict):
            warnings.append(ConfigWarning("agents", "not an object; ignored", None))
        elif agent_list is not None and not isinstance(agent_list, list):
            warnings.append(ConfigWarning("agents.list", "not an array; ignored", None))
        elif isinstance(agent_list, list):
            agents = _agent_blocks(agent_list, warnings)
        return cls(global_block, agents, path=path, extra_warnings=warnings, document=document)

    @property
    def agent_ids(self) -> tuple[str, ...]:
        """The listed agents' normalised ids, in file order (duplicates removed)."""
        return tuple(self._by_id)

    def for_agent(self, agent_id: str | None = None) -> LoopConfig:
        """The resolved config of an agent; unlisted agents get the global resolution (memoised)."""
        config = self._memo.get(agent_id)
        if config is None:
            config = self._by_id.get(normalize_agent_id(agent_id), self.default_config)
            if len(self._memo) < 4096:  # bounded: agent ids come from the event stream
                self._memo[agent_id] = config
        return config

    def resolved(self) -> dict[str, dict[str, object]]:
        """The resolved configs in OpenClaw key names: the global default, then each listed agent."""
        return _resolved_document(self.default_config, self._by_id)

    def every_config(self) -> tuple[LoopConfig, ...]:
        """Every config an event can be judged with: the default and each listed agent's, read either way."""
        gen9 = self.gen9
        return (
            self.default_config,
            *self._by_id.values(),
            gen9.default_config,
            *(gen9.for_agent(agent) for agent in gen9.agent_ids),
        )


def _agent_blocks(agent_list: list[object], warnings: list[ConfigWarning]) -> list[AgentBlock]:
    return [AgentBlock(*listed) for listed in listed_agents(agent_list, warnings)]


def _history_warning(path: str, config: LoopConfig) -> list[ConfigWarning]:
    """A ``historySize`` long enough that a run's state can outgrow what the worker stores of it
    (:data:`streams.limits.MAX_STATE_BYTES`) even with the shortest ids: such a run's later events would be
    dead-lettered, so it is said before the worker runs. (Long ids reach the limit sooner: docs/delivery.md.)"""
    fills = MAX_STATE_BYTES // COMPACT_RECORD_BYTES
    if config.history_size <= fills:
        return []
    message = (
        f"a run's state outgrows what loopwatch can store of it ({MAX_STATE_BYTES:,} bytes) after about "
        f"{fills:,} calls, fewer with long ids; its later events are then dead-lettered (state_too_large)"
    )
    return [ConfigWarning(f"{path}.historySize", message, config.history_size)]


def format_value(value: object) -> str:
    """A resolved value in JSON5 spelling (``true``, ``42``, a number as OpenClaw prints it: ``1e+308``, see
    :func:`~streams.detection.config.show_number`); ``None`` (ignored) is ``nothing``."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return show_number(value)
    return str(value)


def json_numbers(value: object) -> object:
    """``value`` (resolved configs, warnings) for ``json.dumps``, its numbers written as JavaScript's
    ``JSON.stringify`` writes the doubles OpenClaw computes with (as :func:`format_value` shows them): an integer
    beyond 2**53 becomes the integer JavaScript spells (2**60 is ``1152921504606847000``, the same double) or, from
    1e21, the float, which Python writes as JavaScript does there (``1e+308``)."""
    if isinstance(value, dict):
        return {key: json_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_numbers(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -_EXACT <= value <= _EXACT:
        text = show_number(value)
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return float(value)
        except OverflowError:  # beyond the double range (never read so: js_numbers makes it Infinity)
            return value
    return value


def format_warning(warning: ConfigWarning) -> str:
    """``warning: <path>: <message> (using <value>)``, the one line format for config warnings. A warning without a
    value used (``None``) says in its message what happens instead (ignored, treated as absent, built-in value,
    still read), so it gets no ``(using …)``: "(using nothing)" contradicted "still read"."""
    used = "" if warning.value_used is None else f" (using {format_value(warning.value_used)})"
    return f"warning: {warning.path}: {warning.message}{used}"


def _dedupe(warnings: Iterable[ConfigWarning]) -> list[ConfigWarning]:
    seen: set[tuple[str, str, str]] = set()
    out: list[ConfigWarning] = []
    for warning in warnings:
        key = (warning.path, warning.message, repr(warning.value_used))
        if key not in seen:
            seen.add(key)
            out.append(warning)
    return out


def _resolved_document(default: LoopConfig, agents: dict[str, LoopConfig]) -> dict[str, dict[str, object]]:
    return {
        "default": loop_config_to_dict(default),
        "agents": {agent_id: loop_config_to_dict(cfg) for agent_id, cfg in agents.items()},
    }


def _config_hash(default: LoopConfig, agents: dict[str, LoopConfig]) -> str:
    """sha256 of the canonical resolved configs: changes exactly when some agent's behaviour changes."""
    canonical = json.dumps(
        _resolved_document(default, agents), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def unreadable(name: str, exc: OSError) -> ConfigFileError:
    """A config or profiles file that cannot be read. A wrong path is the usual cause (the caller says which flag
    gave it); a directory or a file without read permission says what the file must be instead
    (:func:`streams.errors.file_reason`)."""
    _, _, fix = file_reason(exc, Path(name)).partition("; ")
    known = isinstance(exc, (PermissionError, IsADirectoryError))
    return ConfigFileError(name, f"cannot read: {exc.strerror or exc}", fix=fix if known and fix else None)


def load_openclaw_config(path: str | os.PathLike[str]) -> LoadedConfig:
    """Read and parse an OpenClaw config file (JSON5). Raises :class:`ConfigFileError` when it cannot."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise unreadable(name, exc) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = _line_col(data[: exc.start].decode("utf-8", errors="replace"))
        raise ConfigFileError(name, "not valid UTF-8", line, column, syntax=True) from None
    with json5_nesting(text, name):
        loaded = LoadedConfig.from_document(_loads(text, name), path=name)
        loaded.gen9  # noqa: B018  the 2026.9 reading too (else built on first use), while deep values may be walked
    return loaded


def parse_json5(text: str, name: str = "<string>") -> object:
    """Parse JSON5 text; errors carry 1-based line and column. Nesting up to :data:`MAX_NESTING` levels parses."""
    with json5_nesting(text, name):
        return _loads(text, name)


#: How deep a config (or profiles) file may nest. The json5 package parses by recursion, up to 26 Python frames
#: per level (an object member holding an object), so the interpreter's default limit of 1,000 frames stopped it
#: at 40 to 60 levels, and a valid file nested deeper was refused as if it were not JSON5. OpenClaw parses with
#: JSON5 in JavaScript, which does not recurse; real configs nest under 20 levels.
MAX_NESTING: Final = 1000
#: Frames allowed per level while a file is parsed and read: the parser's 26 with a margin (js_numbers and the
#: warnings' rendering of values need 1 to 3). Python 3.11+ makes pure-Python calls without growing the C stack,
#: so frames are the only bound (parsing 1,000 levels works in a thread with a 512 KiB stack).
_FRAMES_PER_LEVEL: Final = 32
#: Serialises the raised recursion limit (process-wide) between threads loading files at the same time.
_RECURSION_LIMIT_LOCK = threading.RLock()
#: What the nesting depth counts: strings and comments (skipped, they may hold brackets) and brackets. A string
#: or comment not closed runs to the end (the parse reports it), so no start is scanned twice.
_NESTING_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)'  # a string in double quotes (a backslash escapes any character, a line end too)
    r"|'(?:[^'\\]|\\.)*(?:'|\\?\Z)"  # in single quotes
    r"|//[^\n\r\u2028\u2029]*|/\*.*?(?:\*/|\Z)"  # a comment
    r"|[\[\]{}]",
    re.DOTALL,
)


def nesting_depth(text: str, name: str = "<string>") -> int:
    """How many levels of objects and arrays ``text`` nests (``{}`` is 1). Raises :class:`ConfigFileError` at the
    bracket that opens a level deeper than :data:`MAX_NESTING`."""
    depth = deepest = 0
    for match in _NESTING_TOKEN.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > MAX_NESTING:
                line, column = _line_col(text[: match.start()])
                reason = f"nested deeper than {MAX_NESTING} levels (the limit of loopwatch's JSON5 parser)"
                raise ConfigFileError(name, reason, line, column, fix="nest it less deeply")
            deepest = max(deepest, depth)
        elif token == "]" or token == "}":
            depth = max(depth - 1, 0)
    return deepest


@contextmanager
def json5_nesting(text: str, name: str) -> Iterator[None]:
    """Room for ``text``'s nesting while it is parsed and read: Python's recursion limit raised by
    :data:`_FRAMES_PER_LEVEL` frames per level, and restored afterwards. A file nested deeper than
    :data:`MAX_NESTING` levels raises :class:`ConfigFileError` (exit status 2) before any parsing."""
    depth = nesting_depth(text, name)
    with _RECURSION_LIMIT_LOCK:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + depth * _FRAMES_PER_LEVEL)
        try:
            yield
        except RecursionError:  # not expected within the allowance; said as what it is, not as bad JSON5
            reason = f"nested {depth} levels deep, deeper than loopwatch's JSON5 parser could follow"
            raise ConfigFileError(name, reason, fix=f"nest it less deeply (at most {MAX_NESTING} levels)") from None
        finally:
            sys.setrecursionlimit(limit)


def _loads(text: str, name: str) -> object:
    """``json5.loads``, its errors as :class:`ConfigFileError` with 1-based line and column."""
    try:
        return json5.loads(text)
    except ValueError as exc:
        message = str(exc)
        match = _JSON5_POSITION.search(message)
        if match is not None:
            line, column = int(match.group(1)), int(match.group(3))
            unseen = _unseen_character(text, line, column)
            if unseen is not None:
                line, column, message = unseen
            else:
                message = match.group(2)
            raise ConfigFileError(name, message, line, column, syntax=True) from None
        if not text.strip():
            raise ConfigFileError(name, "empty file", 1, 1, syntax=True) from None
        line, column = _line_col(text)
        raise ConfigFileError(name, message, line, column, syntax=True) from None


def _unseen_character(text: str, line: int, column: int) -> tuple[int, int, str] | None:
    """``(line, column, message)`` naming a character that does not show (a NUL, a control character) where the
    parse failed: json5 quotes it raw (``Unexpected ""``). It reports the character it stopped at, or the one
    after when an identifier rule took the character before it, so both are looked at."""
    lines = text.split("\n")
    if line > len(lines):
        return None
    offset = sum(len(before) + 1 for before in lines[: line - 1]) + column - 1
    # At the end of input the character before may be inside a string not closed, where any character is valid.
    for at in (offset, offset - 1) if offset < len(text) else (offset,):
        if 0 <= at < len(text) and not text[at].isprintable() and text[at] not in "\t\n\r":
            kind = "control character" if unicodedata.category(text[at]) == "Cc" else "invisible character"
            found_line, found_column = _line_col(text[:at])
            return found_line, found_column, f"Unexpected {kind} U+{ord(text[at]):04X}"
    return None


def _line_col(prefix: str) -> tuple[int, int]:
    """1-based position just after ``prefix`` (where a failure at the end of it is)."""
    line = prefix.count("\n") + 1
    column = len(prefix) - (prefix.rfind("\n") + 1) + 1
    return line, column


__all__ = [
    "DEFAULT_AGENT_ID",
    "ENTRIES_IGNORED",
    "GLOBAL_BLOCK_PATH",
    "JSON5_HINT",
    "MAX_NESTING",
    "AgentBlock",
    "ConfigFileError",
    "LoadedConfig",
    "format_value",
    "format_warning",
    "js_numbers",
    "json_numbers",
    "load_openclaw_config",
    "nesting_depth",
    "parse_json5",
]
