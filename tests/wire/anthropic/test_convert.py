"""A Messages body as canonical messages and back: exact for an unchanged conversation, valid for
what compaction makes of it (summary, dropped front, injected memories), at most 4 cache
breakpoints."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.tokens import TokenCounter
from ctxproxy.wire.anthropic.body import parse_messages_body
from ctxproxy.wire.anthropic.convert import (
    BLOCK_KEY,
    LEADING_ASSISTANT_PREFIX,
    MAX_CACHE_BREAKPOINTS,
    NEW_MESSAGE_KEY,
    OPAQUE,
    PLACEHOLDER_USER,
    render_body,
    to_messages,
)
from ctxproxy.wire.anthropic.count import token_hint

EPHEMERAL = {"type": "ephemeral"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" * 200}}
URL_IMAGE = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "The contract says 30 days."},
    "title": "contract",
    "citations": {"enabled": True},
}
THINKING = {"type": "thinking", "thinking": "The user wants the weather; call the tool.", "signature": "c2ln"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
CITED = {
    "type": "text",
    "text": "Thirty days.",
    "citations": [{"type": "char_location", "cited_text": "30 days", "document_index": 0}],
}
SEARCH = {"type": "search_result", "source": "https://x.test", "title": "x", "content": [{"type": "text", "text": "y"}]}
SERVER_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rain"}}
SERVER_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
UNKNOWN = {"type": "hologram_2031", "payload": {"z": 1, "a": [1, 2]}}
# Claude Code's agent list, and the beta's own forms of a system message inside ``messages``.
SYSTEM_MESSAGES = (
    {"role": "system", "content": "Available agent types: general, Explore"},
    {
        "role": "system",
        "content": [
            {"type": "text", "text": "Be brief now.", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_addition", "tool": {"name": "grep", "input_schema": {"type": "object"}}},
        ],
        "clear_at": "next_user_message",
        "output_config": {},
    },
)


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def call(call_id: str, name: str = "weather", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def result(call_id: str, content: Any = None, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, **extra}
    if content is not None:
        block["content"] = content
    return block


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, **fields, "messages": messages}


TOOLS = [{"name": "weather", "description": "Weather of a city", "input_schema": {"type": "object"}}]

ROUND_TRIPS = {
    "strings": body([user("hi"), assistant("hello"), user("how are you?")]),
    "empty strings and lists": body([user(""), assistant([]), user([])], system=""),
    "system string": body([user("hi")], system="You are terse."),
    "system blocks with cache_control": body(
        [user("hi")], system=[text("You are terse."), text("Rules.", cache_control=EPHEMERAL)]
    ),
    "empty system list": body([user("hi")], system=[]),
    "images and documents": body(
        [user([text("What is in these?"), IMAGE, URL_IMAGE, DOCUMENT]), assistant([CITED]), user("thanks")]
    ),
    "thinking and tool_use in one turn": body(
        [
            user("Weather in Paris and Oslo?"),
            assistant([THINKING, text("Checking both."), call("toolu_1", city="Paris"), call("toolu_2", city="Oslo")]),
            user([result("toolu_1", "rain"), result("toolu_2", [text("snow"), IMAGE]), text("and London?")]),
            assistant([REDACTED, text("Paris: rain, Oslo: snow.")]),
        ],
        tools=TOOLS,
        thinking={"type": "enabled", "budget_tokens": 2048},
    ),
    "tool results: none, error, cache_control, null content": body(
        [
            user("go"),
            assistant([call("a"), call("b"), call("c"), call("d")]),
            user(
                [
                    result("a"),
                    result("b", "boom", is_error=True),
                    result("c", [text("ok", cache_control=EPHEMERAL)]),
                    {"type": "tool_result", "tool_use_id": "d", "content": None},
                ]
            ),
        ],
        tools=TOOLS,
    ),
    "input key order, nesting and unicode": body(
        [
            user("x"),
            assistant([call("t1", z=1, a={"y": [1, 2.5, None], "b": True}, é="ü ✓", big=2**60, tiny=1e-300)]),
            user([result("t1", "done")]),
        ]
    ),
    "text after a tool_use": body(
        [user("x"), assistant([text("a"), call("t1"), text("b"), call("t2")]), user([result("t1"), result("t2")])]
    ),
    "server tools, search results, unknown blocks": body(
        [
            user([text("find", cache_control=EPHEMERAL), SEARCH, UNKNOWN]),
            assistant([SERVER_USE, SERVER_RESULT, text("found"), UNKNOWN]),
            user("ok"),
        ]
    ),
    "consecutive messages of one role": body(
        [user("a"), user([text("b")]), assistant("c"), assistant([text("d")]), user("e")]
    ),
    "tool results alone, then a separate user message": body(
        [user("go"), assistant([call("a")]), user([result("a", "1")]), user("and now?")]
    ),
    "cache_control everywhere, other fields kept": body(
        [user([text("long document", cache_control=EPHEMERAL)]), assistant("ok"), user("q")],
        system=[text("sys", cache_control={"type": "ephemeral", "ttl": "1h"})],
        tools=[{**TOOLS[0], "cache_control": EPHEMERAL}],
        tool_choice={"type": "auto"},
        stream=True,
        metadata={"user_id": "u-1"},
        future_field={"kept": [1, 2]},
    ),
}


def exact(value: Any) -> bytes:
    return orjson.dumps(value)


def valid(rendered: dict[str, Any]) -> None:
    """The API's rules ctxproxy's renderer must keep: checked by the edge's own body check, plus
    the first message a user one, tool results opening the message after their calls, at most 4
    breakpoints."""
    parse_messages_body(exact(rendered))
    messages = rendered["messages"]
    assert messages[0]["role"] == "user"
    previous: Mapping[str, Any] = {}
    for message in messages:
        if message["role"] == "system":
            continue  # outside the user / assistant alternation
        content = message["content"] if isinstance(message["content"], list) else []
        kinds = [block["type"] for block in content]
        results = [block["tool_use_id"] for block in content if block["type"] == "tool_result"]
        assert kinds[: len(results)] == ["tool_result"] * len(results)
        calls = previous.get("content") if previous.get("role") == "assistant" else None
        call_ids = [b["id"] for b in calls if b["type"] == "tool_use"] if isinstance(calls, list) else []
        assert set(results) <= set(call_ids) and len(set(results)) == len(results)
        previous = message
    assert breakpoints(rendered) <= MAX_CACHE_BREAKPOINTS


def breakpoints(rendered: Mapping[str, Any]) -> int:
    found = 0

    def walk(value: Any) -> None:
        nonlocal found
        if isinstance(value, Mapping):
            found += "cache_control" in value
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk({key: rendered.get(key) for key in ("system", "tools", "messages")})
    return found


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_an_unchanged_conversation_comes_back_byte_for_byte(name: str) -> None:
    original = ROUND_TRIPS[name]
    kept = copy.deepcopy(original)
    messages = to_messages(original)
    rendered = render_body(original, messages)
    assert exact(rendered) == exact(original)
    assert original == kept  # neither call changed its input
    parse_messages_body(exact(rendered))


def test_the_canonical_shape() -> None:
    original = ROUND_TRIPS["thinking and tool_use in one turn"]
    converted = to_messages({**original, "system": "terse"})
    # Every client message's first canonical message is marked.
    assert [NEW_MESSAGE_KEY in m for m in converted] == [False, True, True, True, False, False, True]
    system, first, second, tool_1, tool_2, rest, last = (
        {k: v for k, v in m.items() if k != NEW_MESSAGE_KEY} for m in converted
    )
    assert system == {"role": "system", "content": "terse"}
    assert first == {"role": "user", "content": "Weather in Paris and Oslo?"}
    assert second["content"] == [{"type": OPAQUE, "block": THINKING}, text("Checking both.")]
    assert [c["function"] for c in second["tool_calls"]] == [
        {"name": "weather", "arguments": '{"city":"Paris"}'},
        {"name": "weather", "arguments": '{"city":"Oslo"}'},
    ]
    assert [(c["id"], c["type"]) for c in second["tool_calls"]] == [("toolu_1", "function"), ("toolu_2", "function")]
    assert (tool_1["role"], tool_1["tool_call_id"], tool_1["content"]) == ("tool", "toolu_1", "rain")
    # An image's part also says what it costs (``count.token_hint``), for the counter.
    assert tool_2["content"] == [text("snow"), {"type": OPAQUE, "block": IMAGE, **token_hint(IMAGE)}]
    assert rest == {"role": "user", "content": [text("and London?")]}
    assert last["content"][0] == {"type": OPAQUE, "block": REDACTED}


def test_system_blocks_are_one_system_message_and_splits_are_marked() -> None:
    original = ROUND_TRIPS["consecutive messages of one role"]
    messages = to_messages({**original, "system": [text("a"), text("b", cache_control=EPHEMERAL)]})
    assert messages[0] == {"role": "system", "content": [text("a"), text("b", cache_control=EPHEMERAL)]}
    assert all(NEW_MESSAGE_KEY in m for m in messages[1:])  # five client messages, one canonical each


def test_converted_messages_are_counted() -> None:
    counter = TokenCounter()
    for original in ROUND_TRIPS.values():
        messages = to_messages(original)
        counts = counter.count_each(messages, [orjson.dumps(m, default=str) for m in messages])
        assert len(counts) == len(messages) and all(count > 0 for count in counts)
    # an opaque part is counted as its JSON: a long document costs more than a short one
    short, long = ({**DOCUMENT, "source": {**DOCUMENT["source"], "data": "word " * n}} for n in (1, 400))
    costs = [counter.count_each(to_messages(body([user([d])])), [bytes([n])])[0] for n, d in enumerate((short, long))]
    assert costs[1] > costs[0] + 300


# --- after compaction --------------------------------------------------------------------------

CONVERSATION = body(
    [
        user("Plan my trip."),
        assistant("Where to?"),
        user("Oslo, then weather."),
        assistant([text("Checking."), call("toolu_9", city="Oslo")]),
        user([result("toolu_9", "snow"), text("Pack what?")]),
        assistant("Boots."),
        user("Thanks! And Paris?"),
    ],
    system="You plan trips.",
    tools=TOOLS,
)


def summary(placement: str) -> dict[str, Any]:
    content = "## Context Summary\n\nThe user plans a trip to Oslo; it snows there."
    if placement == "assistant_named":
        return {"role": "assistant", "name": "context_summary", "content": content}
    return {"role": placement, "content": content}


def compacted(placement: str, cut: int) -> tuple[list[dict[str, Any]], int]:
    """What ``compaction.assemble`` forwards: head, summary, the messages from the cut on."""
    messages = to_messages(CONVERSATION)
    return [messages[0], summary(placement), *messages[cut:]], 1


def test_an_assistant_summary_first_becomes_a_cached_user_message() -> None:
    messages, at = compacted("assistant_named", 7)  # kept: "Boots.", "Thanks! And Paris?"
    rendered = render_body(CONVERSATION, messages, summary_index=at)
    valid(rendered)
    assert rendered["system"] == "You plan trips."
    first, second, third = rendered["messages"]
    expected = LEADING_ASSISTANT_PREFIX + summary("user")["content"]
    assert first == {"role": "user", "content": [text(expected, cache_control=EPHEMERAL)]}
    assert second == assistant("Boots.") and third == user("Thanks! And Paris?")
    assert "name" not in first


def test_a_summary_merges_with_the_user_message_after_it() -> None:
    messages, at = compacted("user", 3)  # kept from "Oslo, then weather."
    rendered = render_body(CONVERSATION, messages, summary_index=at)
    valid(rendered)
    first = rendered["messages"][0]
    assert first["content"] == [text(summary("user")["content"], cache_control=EPHEMERAL), text("Oslo, then weather.")]
    assert rendered["messages"][1:] == CONVERSATION["messages"][3:]


def test_a_summary_at_system_placement_goes_to_the_system_prompt() -> None:
    messages, at = compacted("system", 6)  # kept from "Pack what?"
    rendered = render_body(CONVERSATION, messages, summary_index=at)
    valid(rendered)
    assert rendered["system"] == [
        text("You plan trips."),
        text(summary("system")["content"], cache_control=EPHEMERAL),
    ]
    assert rendered["messages"] == [user([text("Pack what?")]), *CONVERSATION["messages"][5:]]


def test_an_assistant_summary_before_an_assistant_with_calls() -> None:
    messages, at = compacted("assistant_named", 4)  # kept from the assistant's tool call
    rendered = render_body(CONVERSATION, messages, summary_index=at)
    valid(rendered)
    first, second, *rest = rendered["messages"]
    assert first["role"] == "user" and first["content"][-1]["cache_control"] == EPHEMERAL
    assert second == CONVERSATION["messages"][3]  # the call, verbatim, answered next
    assert rest == CONVERSATION["messages"][4:]


def test_a_tool_result_left_first_becomes_text_not_an_orphan() -> None:
    messages = to_messages(CONVERSATION)
    front_dropped = [messages[0], *messages[5:]]  # starts with the tool message of toolu_9
    assert front_dropped[1]["role"] == "tool"
    rendered = render_body(CONVERSATION, front_dropped)
    valid(rendered)
    first = rendered["messages"][0]
    assert first["content"] == [text("[Result of an earlier tool call toolu_9]\nsnow"), text("Pack what?")]
    assert rendered["messages"][1:] == CONVERSATION["messages"][5:]


def test_an_assistant_with_calls_left_first_gets_a_user_message_before_it() -> None:
    messages = to_messages(CONVERSATION)
    rendered = render_body(CONVERSATION, [messages[0], *messages[4:]])
    valid(rendered)
    assert rendered["messages"][0] == user(PLACEHOLDER_USER)
    assert rendered["messages"][1:] == CONVERSATION["messages"][3:]


def test_an_error_result_left_first_says_so() -> None:
    original = body([user("go"), assistant([call("a")]), user([result("a", [text("no"), IMAGE], is_error=True)])])
    rendered = render_body(original, to_messages(original)[2:])
    valid(rendered)
    assert rendered["messages"] == [user([text("[Result of an earlier tool call a (error)]"), text("no"), IMAGE])]


# --- injected memories -------------------------------------------------------------------------

MEMORY = "## Relevant Memories\n- (decision) Trips are booked by train."


def test_a_memory_as_a_user_message_joins_the_newest_user_message() -> None:
    messages = to_messages(CONVERSATION)
    injected = [*messages[:-1], {"role": "user", "content": MEMORY}, messages[-1]]
    rendered = render_body(CONVERSATION, injected)
    valid(rendered)
    assert rendered["messages"][:-1] == CONVERSATION["messages"][:-1]
    assert rendered["messages"][-1] == user([text(MEMORY), text("Thanks! And Paris?")])


def test_a_memory_as_a_system_message_joins_the_system_prompt() -> None:
    messages = to_messages(CONVERSATION)
    injected = [*messages[:-1], {"role": "system", "content": MEMORY}, messages[-1]]
    rendered = render_body(CONVERSATION, injected)
    valid(rendered)
    assert rendered["system"] == "You plan trips.\n\n" + MEMORY
    assert rendered["messages"] == CONVERSATION["messages"]
    # a client's system blocks stay blocks
    with_blocks = {**CONVERSATION, "system": [text("You plan trips.")]}
    rendered = render_body(with_blocks, [*to_messages(with_blocks)[:-1], injected[-2], injected[-1]])
    assert rendered["system"] == [text("You plan trips."), text(MEMORY)]


def test_a_named_assistant_memory_joins_the_assistant_message_before_it() -> None:
    messages = to_messages(CONVERSATION)
    memory = {"role": "assistant", "name": "memory_context", "content": MEMORY}
    rendered = render_body(CONVERSATION, [*messages[:-1], memory, messages[-1]])
    valid(rendered)
    assert rendered["messages"][-2] == assistant([text("Boots."), text(MEMORY)])


def test_a_system_prompt_the_list_no_longer_has_is_dropped_and_a_new_one_is_a_string() -> None:
    messages = to_messages(CONVERSATION)
    assert "system" not in render_body(CONVERSATION, messages[1:])
    no_system = {key: value for key, value in CONVERSATION.items() if key != "system"}
    assert render_body(no_system, [{"role": "system", "content": MEMORY}, *messages[1:]])["system"] == MEMORY


# --- tool calls ctxproxy made or changed ---------------------------------------------------------


def test_calls_and_results_without_a_stored_block_are_written_from_the_canonical_fields() -> None:
    messages = [
        {"role": "user", "content": "Find page 3."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ctxproxy_recall_page", "arguments": '{"page":3}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "broken", "arguments": "{not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "page three"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "?"}]},
    ]
    rendered = render_body(
        body([user("x")]), messages, extra_tools=[{"name": "ctxproxy_recall_page", "input_schema": {}}]
    )
    valid(rendered)
    assert rendered["messages"][1:] == [
        assistant([call("c1", "ctxproxy_recall_page", page=3), call("c2", "broken")]),
        user([result("c1", "page three"), result("c2", [text("?")])]),
    ]
    assert rendered["tools"] == [{"name": "ctxproxy_recall_page", "input_schema": {}}]


def test_changed_arguments_and_results_win_over_the_stored_blocks() -> None:
    original = ROUND_TRIPS["tool results: none, error, cache_control, null content"]
    messages = copy.deepcopy(to_messages(original))
    messages[1]["tool_calls"][0]["function"]["arguments"] = '{"city":"Rome"}'
    messages[3]["content"] = "[cut]"
    rendered = render_body(original, messages, extra_tools=[{"name": "extra", "input_schema": {}}])
    valid(rendered)
    assert rendered["messages"][1]["content"][0] == call("a", city="Rome")
    assert rendered["messages"][2]["content"][1] == result("b", "[cut]", is_error=True)
    assert rendered["tools"] == [*TOOLS, {"name": "extra", "input_schema": {}}]
    assert messages[1]["tool_calls"][0][BLOCK_KEY] == call("a")  # the stored block itself is not changed


# --- cache breakpoints ---------------------------------------------------------------------------


def four_breakpoints() -> dict[str, Any]:
    return body(
        [
            user([text("old", cache_control=EPHEMERAL)]),
            assistant([call("a")]),
            user([result("a", [text("r", cache_control=EPHEMERAL)])]),
            assistant("ok"),
            user([text("new", cache_control=EPHEMERAL)]),
        ],
        system=[text("sys", cache_control=EPHEMERAL)],
        tools=[{**TOOLS[0], "cache_control": EPHEMERAL}],
    )


def test_the_summary_breakpoint_replaces_the_clients_earliest() -> None:
    original = four_breakpoints()
    kept = copy.deepcopy(original)
    five = render_body(original, to_messages(original))  # a client's own excess: the API would refuse it
    assert "cache_control" not in five["tools"][0] and five["system"] == original["system"]
    assert breakpoints(five) == MAX_CACHE_BREAKPOINTS
    four = {**original, "tools": TOOLS}
    messages = to_messages(four)
    assert breakpoints(render_body(four, messages)) == 4
    rendered = render_body(four, [messages[0], summary("user"), *messages[1:]], summary_index=1)
    valid(rendered)
    assert original == kept
    assert rendered["system"] == [text("sys")]  # the earliest: dropped
    assert rendered["messages"][0]["content"] == [
        text(summary("user")["content"], cache_control=EPHEMERAL),
        text("old", cache_control=EPHEMERAL),
    ]
    assert rendered["messages"][1:] == four["messages"][1:]
    assert breakpoints(rendered) == MAX_CACHE_BREAKPOINTS


def test_tools_go_first_then_system_then_messages() -> None:
    original = four_breakpoints()
    messages = to_messages(original)
    rendered = render_body(original, [messages[0], summary("system"), *messages[1:]], summary_index=1)
    valid(rendered)
    assert rendered["tools"] == TOOLS
    assert rendered["system"] == [text("sys"), text(summary("system")["content"], cache_control=EPHEMERAL)]
    assert rendered["messages"] == original["messages"]
    assert original == four_breakpoints()


def test_a_breakpoint_inside_a_tool_result_can_be_the_one_dropped() -> None:
    original = body(
        [
            user("go"),
            assistant([call("a")]),
            user(
                [result("a", [text("r", cache_control=EPHEMERAL)], is_error=False), text("x", cache_control=EPHEMERAL)]
            ),
            assistant("ok"),
            user([text("y", cache_control=EPHEMERAL), text("z", cache_control=EPHEMERAL)]),
        ],
        system="sys",
    )
    kept = copy.deepcopy(original)
    messages = to_messages(original)
    rendered = render_body(original, [messages[0], summary("system"), *messages[1:]], summary_index=1)
    valid(rendered)
    assert original == kept
    assert rendered["system"] == [text("sys"), text(summary("system")["content"], cache_control=EPHEMERAL)]
    assert rendered["messages"][2]["content"] == [
        result("a", [text("r")], is_error=False),
        text("x", cache_control=EPHEMERAL),
    ]
    assert [m for i, m in enumerate(rendered["messages"]) if i != 2] == [
        m for i, m in enumerate(original["messages"]) if i != 2
    ]


def test_a_summary_that_already_has_a_breakpoint_is_not_given_a_second() -> None:
    messages = to_messages(CONVERSATION)
    marked = {"role": "user", "content": [text("summary", cache_control={"type": "ephemeral", "ttl": "1h"})]}
    rendered = render_body(CONVERSATION, [messages[0], marked, *messages[5:]], summary_index=1)
    valid(rendered)
    assert rendered["messages"][0]["content"][0] == marked["content"][0]


# --- property: every generated conversation comes back exactly -----------------------------------

_texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_inputs = st.dictionaries(_texts, st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _texts, max_size=3)
_plain = st.one_of(
    _texts.map(text),
    _texts.map(lambda t: text(t, cache_control=EPHEMERAL)),
    st.sampled_from([IMAGE, URL_IMAGE, DOCUMENT, SEARCH, UNKNOWN, CITED]),
)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    open_calls: list[str] = []
    for turn in range(draw(st.integers(1, 6))):
        results = [result(i, draw(st.none() | _texts | st.lists(_plain, max_size=2))) for i in open_calls]
        rest = draw(st.lists(_plain, max_size=3))
        if not results and draw(st.booleans()):
            messages.append(user(draw(_texts)))
        else:
            messages.append(user([*results, *rest]))
        if draw(st.booleans()):
            messages.append(assistant(draw(_texts)))
            open_calls = []
            continue
        lead = draw(st.lists(st.sampled_from([THINKING, REDACTED, text("a"), SERVER_USE]), max_size=3))
        open_calls = [f"toolu_{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        calls = [{**call(i), "input": draw(_inputs)} for i in open_calls]
        messages.append(assistant([*lead, *calls, *draw(st.lists(_plain, max_size=1))]))
    if len(messages) > 1 and draw(st.booleans()):
        messages.insert(1, draw(st.sampled_from(SYSTEM_MESSAGES)))  # where Claude Code puts it
    system = draw(st.none() | _texts | st.lists(_texts.map(text), max_size=2))
    return at_most_four_breakpoints(body(messages, **({} if system is None else {"system": system})))


def at_most_four_breakpoints(value: Any, seen: list[int] | None = None) -> Any:
    """``value`` without the ``cache_control`` after the 4th (the API refuses more)."""
    seen = [0] if seen is None else seen
    if isinstance(value, list):
        return [at_most_four_breakpoints(item, seen) for item in value]
    if not isinstance(value, dict):
        return value
    if "cache_control" in value:
        seen[0] += 1
        if seen[0] > MAX_CACHE_BREAKPOINTS:
            value = {key: item for key, item in value.items() if key != "cache_control"}
    return {key: at_most_four_breakpoints(item, seen) for key, item in value.items()}


@given(conversations())
@settings(max_examples=150, deadline=None)
def test_any_conversation_round_trips(original: dict[str, Any]) -> None:
    rendered = render_body(original, to_messages(original))
    assert exact(rendered) == exact(original)
    parse_messages_body(exact(rendered))


@given(conversations(), st.data())
@settings(max_examples=150, deadline=None)
def test_any_front_drop_renders_valid(original: dict[str, Any], data: st.DataObject) -> None:
    messages = to_messages(original)
    head = int(bool(messages) and messages[0]["role"] == "system")
    cut = data.draw(st.integers(head, len(messages) - 1))
    placement = data.draw(st.sampled_from(["assistant_named", "user", "system"]))
    kept: Sequence[dict[str, Any]] = [*messages[:head], summary(placement), *messages[cut:]]
    rendered = render_body(original, kept, summary_index=head)
    valid(rendered)


@pytest.mark.parametrize("inside", SYSTEM_MESSAGES)
def test_a_system_message_inside_messages_comes_back_as_sent(inside: dict[str, Any]) -> None:
    original = body([user("Count the ERROR lines."), inside, assistant("42."), user("Thanks.")], system="Rules.")
    kept = copy.deepcopy(original)
    messages = to_messages(original)
    assert [m["role"] for m in messages] == ["system", "user", "system", "assistant", "user"]
    assert exact(render_body(original, messages)) == exact(original)
    assert original == kept


@pytest.mark.parametrize("inside", SYSTEM_MESSAGES)
def test_a_system_message_a_compaction_covered_goes_right_after_the_first_message(inside: dict[str, Any]) -> None:
    original = body([user("Count the ERROR lines."), inside, assistant("42."), user("Thanks.")], system="Rules.")
    messages = to_messages(original)
    # assemble's order: the system messages the summary covered first, then the summary, then the rest
    kept = [messages[0], messages[2], summary("user"), *messages[3:]]
    rendered = render_body(original, kept, summary_index=2)
    assert rendered["system"] == "Rules."
    assert [m["role"] for m in rendered["messages"]] == ["user", "system", "assistant", "user"]
    assert rendered["messages"][1] == inside
    assert breakpoints(rendered) <= MAX_CACHE_BREAKPOINTS


def test_a_text_only_assistant_left_first_becomes_a_user_message_under_the_prefix() -> None:
    original = body([user("a"), assistant([text("b", citations=[]), text("c")]), user("d")], system="s")
    system, _, *rest = to_messages(original)
    rendered = render_body(original, [system, *rest])
    valid(rendered)
    assert rendered["system"] == "s"
    assert rendered["messages"] == [
        user([text(LEADING_ASSISTANT_PREFIX.rstrip()), text("b", citations=[]), text("c"), text("d")])
    ]
