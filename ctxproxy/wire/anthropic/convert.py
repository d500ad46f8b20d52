"""A Messages body as ctxproxy's canonical messages (OpenAI chat shape) and back, pure.

``to_messages(body)``: ``system`` becomes one system message first (none when absent or empty);
each message keeps its role and its content — a string as it is, a block list as parts: a
``text`` block is already a text part (kept whole, ``cache_control`` and ``citations``
included); any block ctxproxy does not interpret (image, document, thinking, unknown ...) is an
opaque part ``{"type": "anthropic", "block": block}`` in its place, which the counter counts as
JSON, or an image or PDF as its token hint says (``count.token_hint``: what Anthropic bills;
never written back). An assistant's ``tool_use`` blocks become ``tool_calls`` (``arguments``: the
input's compact JSON), a user's ``tool_result`` blocks ``tool`` messages placed before the rest
of that user message. Keys ctxproxy ignores carry what writing back needs:

* :data:`BLOCK_KEY` on a call and on a tool message: the ``tool_use`` / ``tool_result`` block;
* :data:`INDEX_KEY` on a call: the block's index, only when a non-``tool_use`` block follows it;
* :data:`IN_MESSAGES_KEY` on a system message the client sent inside ``messages`` (a newer API
  feature Claude Code uses): the message as the client sent it (``clear_at``, ``output_config``,
  ``tool_addition`` blocks and all), written back as it came;
* :data:`NEW_MESSAGE_KEY` on the first canonical message of every client message: two client
  messages of one role in a row (as the client sent them) are not merged back into one, while a
  message ctxproxy added (a summary, memories) merges into its same-role neighbour, so roles
  alternate.

``render_body(body, messages, summary_index=…)``: ``body`` with ``system`` and ``messages``
written from the canonical list, ``extra_tools`` appended to ``tools``, every other field as it
was. An unchanged conversation comes back exactly (tool results opening their user message, as
the API requires). What compaction may have produced is made valid:

* a system message the client sent inside ``messages`` goes back there as it came: at its place
  (no merging across it), or, when a compaction moved it to the front, right after the first
  message (the API refuses one first; there it is at the boundary of what the summary covers);
  every other system message — the top-level prompt — goes to ``system`` in order: a string
  joined by blank lines when each is a string and the client's ``system`` was not a list, else
  text blocks;
* tool messages become ``tool_result`` blocks opening the next user message; one whose call is
  not in the assistant message right before (its call was dropped) becomes text, never an
  orphan ``tool_result`` the API refuses;
* consecutive messages of one role are merged (blocks concatenated, strings as text blocks);
  ``name`` is dropped;
* the first message must be a user one: a leading assistant message of text only (a summary, memories)
  becomes a user message under :data:`LEADING_ASSISTANT_PREFIX`, and so do the text-only
  messages of ctxproxy's right after it (more memories, a summary shown as several messages); any
  other (tool calls, thinking) gets a :data:`PLACEHOLDER_USER` message before it.

Prompt caching: ``summary_index`` (the index of the summary / Contents Page message in
``messages``, as ``compaction.assemble.summary_index`` gives it) gets an ephemeral
``cache_control`` on its last block, so the compacted prefix is cached. An index rather than the
message's ``name``: under the ``user`` and ``system`` placements a summary has no name, and the
names are the strategies' own. The API takes at most :data:`MAX_CACHE_BREAKPOINTS`; beyond that
the client's earliest (tools, system, messages) go: each caches the prefix before it, so the
summary's covers the tools and the system prompt until the next compaction, and the client's
latest are what keep its new turns cached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxproxy.vocabulary import RESULT_ROLES, ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL, ROLE_USER, SYSTEM_ROLES
from ctxproxy.wire.anthropic.breakpoints import MAX_CACHE_BREAKPOINTS, limit_breakpoints
from ctxproxy.wire.anthropic.count import token_hint

__all__ = [
    "BLOCK_KEY",
    "INDEX_KEY",
    "IN_MESSAGES_KEY",
    "MAX_CACHE_BREAKPOINTS",
    "NEW_MESSAGE_KEY",
    "OPAQUE",
    "render_body",
    "to_messages",
]

OPAQUE = "anthropic"  # the part type of a block ctxproxy does not interpret
BLOCK_KEY = "anthropic"
INDEX_KEY = "anthropic_index"
NEW_MESSAGE_KEY = "anthropic_new_message"
IN_MESSAGES_KEY = "anthropic_in_messages"
LEADING_ASSISTANT_PREFIX = "[Context the assistant is given for this conversation]\n\n"
PLACEHOLDER_USER = "[The earlier conversation was shortened.]"

Message = dict[str, Any]
Block = dict[str, Any]


# --- Anthropic -> canonical ------------------------------------------------------------------


def to_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``system`` and ``messages`` as canonical messages (see the module)."""
    out: list[Message] = []
    system = body.get("system")
    if system:
        out.append({"role": ROLE_SYSTEM, "content": _canonical_content(system)})
    for message in body.get("messages") or ():
        role = message.get("role")
        if role == ROLE_SYSTEM:
            converted = [
                {"role": ROLE_SYSTEM, "content": _canonical_content(message.get("content")), IN_MESSAGES_KEY: message}
            ]
        else:
            converted = _assistant(message) if role == ROLE_ASSISTANT else _user(message)
        converted[0] = {**converted[0], NEW_MESSAGE_KEY: True}
        out.extend(converted)
    return out


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    if block.get("type") == "text":
        return dict(block)
    return {"type": OPAQUE, "block": block, **token_hint(block)}


def _canonical_content(content: Any) -> Any:
    if isinstance(content, list):
        return [_part(block) for block in content]
    return "" if content is None else content


def _user(message: Mapping[str, Any]) -> list[Message]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": ROLE_USER, "content": content}]
    out: list[Message] = [
        {
            "role": ROLE_TOOL,
            "tool_call_id": block.get("tool_use_id"),
            "content": _canonical_content(block.get("content")),
            BLOCK_KEY: block,
        }
        for block in content
        if block.get("type") == "tool_result"
    ]
    rest = [_part(block) for block in content if block.get("type") != "tool_result"]
    if rest or not out:
        out.append({"role": ROLE_USER, "content": rest})
    return out


def _assistant(message: Mapping[str, Any]) -> list[Message]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": ROLE_ASSISTANT, "content": content}]
    trailing = len(content)
    while trailing and content[trailing - 1].get("type") == "tool_use":
        trailing -= 1
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        if block.get("type") != "tool_use":
            parts.append(_part(block))
            continue
        function = {"name": block.get("name"), "arguments": _arguments(block.get("input"))}
        call = {"id": block.get("id"), "type": "function", "function": function, BLOCK_KEY: block}
        if j < trailing:
            call[INDEX_KEY] = j
        calls.append(call)
    converted: Message = {"role": ROLE_ASSISTANT, "content": parts}
    if calls:
        converted["tool_calls"] = calls
    return [converted]


def _arguments(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- canonical -> Anthropic: blocks ------------------------------------------------------------


def _block(part: Any) -> Block:
    """A canonical part as a content block; a part of no Anthropic meaning as its JSON text."""
    if isinstance(part, Mapping):
        if part.get("type") == "text":
            return dict(part) if not isinstance(part, dict) else part
        if part.get("type") == OPAQUE and isinstance(part.get("block"), Mapping):
            return dict(part["block"])
    return {"type": "text", "text": _arguments(part)}


def _blocks(content: Any) -> list[Block]:
    """Content as blocks: an empty string is no block (the API refuses empty text blocks)."""
    if isinstance(content, list):
        return [_block(part) for part in content]
    if content is None or content == "":
        return []
    return [{"type": "text", "text": content if isinstance(content, str) else _arguments(content)}]


def _tool_use(call: Mapping[str, Any]) -> Block:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name, arguments = function.get("name"), function.get("arguments")
    block = call.get(BLOCK_KEY)
    if not isinstance(block, Mapping):
        return {"type": "tool_use", "id": call.get("id"), "name": name, "input": _input(arguments)}
    if block.get("id") == call.get("id") and block.get("name") == name and arguments == _arguments(block.get("input")):
        return dict(block)
    return {**block, "id": call.get("id"), "name": name, "input": _input(arguments)}


def _input(arguments: Any) -> dict[str, Any]:
    """A tool_use's input from canonical arguments; anything but a JSON object is ``{}``."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _assistant_blocks(message: Mapping[str, Any]) -> list[Block]:
    blocks = _blocks(message.get("content"))
    for call in message.get("tool_calls") or ():
        index = call.get(INDEX_KEY) if isinstance(call, Mapping) else None
        block = _tool_use(call if isinstance(call, Mapping) else {})
        if isinstance(index, int):
            blocks.insert(index, block)
        else:
            blocks.append(block)
    return blocks


def _tool_result(message: Mapping[str, Any]) -> Block:
    stored = message.get(BLOCK_KEY)
    block: Block = dict(stored) if isinstance(stored, Mapping) else {"type": "tool_result"}
    block["tool_use_id"] = message.get("tool_call_id")
    content = message.get("content")
    if isinstance(stored, Mapping) and _canonical_content(stored.get("content")) == content:
        return block  # the client's content as it came (absent, null, string or blocks)
    if isinstance(content, list):
        block["content"] = _blocks(content)
    else:
        block["content"] = "" if content is None else content
    return block


def _orphan_result(message: Mapping[str, Any]) -> list[Block]:
    """A tool result with no call before it, as text: the API refuses an orphan ``tool_result``."""
    stored = message.get(BLOCK_KEY)
    error = isinstance(stored, Mapping) and stored.get("is_error") is True
    label = f"[Result of an earlier tool call {message.get('tool_call_id')}{' (error)' if error else ''}]"
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": f"{label}\n{content or ''}".rstrip()}]
    return [{"type": "text", "text": label}, *_blocks(content)]


# --- canonical -> Anthropic: messages ----------------------------------------------------------


@dataclass
class _Turn:
    """One Anthropic message being built from one or more canonical messages."""

    role: str
    results: list[Block] = field(default_factory=list)
    pieces: list[str | list[Block]] = field(default_factory=list)
    client: bool = False  # begun by a client's message (not by one ctxproxy added)
    original: Mapping[str, Any] | None = None  # a client's system message, written back as it came

    def render(self) -> dict[str, Any]:
        if self.original is not None:  # a list of its own: breakpoints may be dropped from it
            content = self.original.get("content")
            return {**self.original, "content": list(content) if isinstance(content, list) else content}
        if not self.results and len(self.pieces) == 1 and isinstance(self.pieces[0], str):
            return {"role": self.role, "content": self.pieces[0]}
        blocks = list(self.results)
        for piece in self.pieces:
            blocks.extend(_blocks(piece) if isinstance(piece, str) else piece)
        return {"role": self.role, "content": blocks}

    def call_ids(self) -> set[Any]:
        blocks = (b for piece in self.pieces if isinstance(piece, list) for b in piece)
        return {b.get("id") for b in blocks if b.get("type") == "tool_use"}


@dataclass
class _Render:
    """The state of one ``render_body``: the turns so far, the system messages, the summary's block."""

    summary_index: int | None
    turns: list[_Turn] = field(default_factory=list)
    leading: list[_Turn] = field(default_factory=list)  # client system messages before any turn
    system: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    marked: Block | None = None

    def turn(self, role: str, message: Mapping[str, Any]) -> _Turn:
        started = bool(message.get(NEW_MESSAGE_KEY))
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == role and not (started and last.client):
            return last  # one message, or ctxproxy's next to the client's: merged, so roles alternate
        self.turns.append(_Turn(role, client=started))
        return self.turns[-1]

    def add(self, index: int, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        original = message.get(IN_MESSAGES_KEY)
        if role in SYSTEM_ROLES and isinstance(original, Mapping):
            (self.turns if self.turns else self.leading).append(_Turn(ROLE_SYSTEM, client=True, original=original))
        elif role in SYSTEM_ROLES:
            self.system.append((index, message))
        elif role in RESULT_ROLES:
            self.add_result(message)
        elif role == ROLE_ASSISTANT and not self.turns:
            self.add_leading_assistant(index, message)
        elif role == ROLE_ASSISTANT and self.in_leading_context(message):
            content = message.get("content")
            self.add_piece(index, ROLE_USER, {"role": ROLE_USER, "content": content}, _blocks(content))
        elif role == ROLE_ASSISTANT:
            self.add_piece(index, ROLE_ASSISTANT, message, _assistant_blocks(message))
        else:
            self.add_piece(index, ROLE_USER, message, _blocks(message.get("content")))

    def messages(self) -> list[dict[str, Any]]:
        turns = self.turns[:1] + self.leading + self.turns[1:]
        return [turn.render() for turn in turns]

    def add_piece(self, index: int, role: str, message: Mapping[str, Any], blocks: list[Block]) -> None:
        turn = self.turn(role, message)
        content = message.get("content")
        if index == self.summary_index:
            blocks = [dict(block) for block in blocks]  # own copies: the last one gets cache_control
            self.marked = blocks[-1] if blocks else None
            turn.pieces.append(blocks)
        elif isinstance(content, str) and not message.get("tool_calls"):
            turn.pieces.append(content)
        else:
            turn.pieces.append(blocks)

    def add_result(self, message: Mapping[str, Any]) -> None:
        turn = self.turn(ROLE_USER, message)
        before = self.turns[-2] if len(self.turns) > 1 and self.turns[-2].role == ROLE_ASSISTANT else None
        answered = {block.get("tool_use_id") for block in turn.results}
        call_id = message.get("tool_call_id")
        if before is not None and call_id in before.call_ids() and call_id not in answered:
            turn.results.append(_tool_result(message))
        else:
            turn.pieces.append(_orphan_result(message))

    def in_leading_context(self, message: Mapping[str, Any]) -> bool:
        """A text-only message of ctxproxy's (not the client's) while the only turn so far is the
        context the leading one became: it goes to that context too (``rounds``' Session Memory
        is a message per block), not to an assistant turn of its own."""
        if message.get(NEW_MESSAGE_KEY) or message.get("tool_calls") or len(self.turns) != 1:
            return False
        first = self.turns[0]
        return first.role == ROLE_USER and not first.client and _text_only(message.get("content"))

    def add_leading_assistant(self, index: int, message: Mapping[str, Any]) -> None:
        content = message.get("content")
        parts: list[Any] = content if isinstance(content, list) else []
        if message.get("tool_calls") or not _text_only(content):
            self.turns.append(_Turn(ROLE_USER, pieces=[PLACEHOLDER_USER]))
            self.add_piece(index, ROLE_ASSISTANT, message, _assistant_blocks(message))
            return
        prefix = {"type": "text", "text": LEADING_ASSISTANT_PREFIX.rstrip()}
        as_user = LEADING_ASSISTANT_PREFIX + content if isinstance(content, str) else [prefix, *parts]
        self.add_piece(index, ROLE_USER, {"role": ROLE_USER, "content": as_user}, _blocks(as_user))

    def system_value(self, original: Any) -> Any:
        pieces = [message.get("content") for _, message in self.system]
        as_string = not isinstance(original, list) and self.summary_index not in {i for i, _ in self.system}
        if as_string and all(isinstance(piece, str) for piece in pieces):
            return "\n\n".join(piece for piece in pieces if piece)
        blocks: list[Block] = []
        for index, message in self.system:
            own = _blocks(message.get("content"))
            if index == self.summary_index and own:
                own = [dict(block) for block in own]
                self.marked = own[-1]
            blocks.extend(own)
        return blocks


def _text_only(content: Any) -> bool:
    parts: list[Any] = content if isinstance(content, list) else []
    return isinstance(content, str) or all(isinstance(p, Mapping) and p.get("type") == "text" for p in parts)


# --- canonical -> Anthropic: the body ----------------------------------------------------------


def render_body(
    body: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    *,
    extra_tools: Sequence[Mapping[str, Any]] = (),
    summary_index: int | None = None,
) -> dict[str, Any]:
    """``body`` with ``system`` and ``messages`` from ``messages`` (see the module); ``body`` and
    ``messages`` are not changed."""
    state = _Render(summary_index)
    for index, message in enumerate(messages):
        state.add(index, message)
    out = dict(body)
    if state.system:
        out["system"] = state.system_value(body.get("system"))
    elif body.get("system"):
        del out["system"]  # the client's system prompt is no longer in the list
    out["messages"] = state.messages()
    tools = body.get("tools")
    if isinstance(tools, list) or extra_tools:
        out["tools"] = [*(tools if isinstance(tools, list) else []), *extra_tools]
    if state.marked is not None and "cache_control" not in state.marked:
        state.marked["cache_control"] = {"type": "ephemeral"}
    limit_breakpoints(out, state.marked)
    return out
