"""Converting only what follows the previous request's conversion equals converting it all: random
Messages and Gemini conversations that go on, are edited (to an equal value of another JSON
type too: ``1``, ``1.0``, ``true``), fork, go invalid and back, each parsed and converted with
the incremental loader and without (``ctxproxy.wire.converted``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.pipeline.turn import Turn
from ctxproxy.wire.anthropic.adapter import parse_turn as parse_messages
from ctxproxy.wire.gemini.body import CONTENTS
from ctxproxy.wire.gemini.body import parse_turn as parse_gemini
from ctxproxy.wire.incremental import BodyLoader, RawBodies
from ctxproxy.wire.openai_responses.body import load_body as load_responses
from ctxproxy.wire.openai_responses.body import parse_turn as parse_responses

TEXT = st.text(alphabet=st.sampled_from('ab "\\\n{}<>é'), max_size=8)
NUMBER = st.sampled_from([1, 1.0, True, 0, 0.0, False, None])  # equal in Python, not in JSON
ARGS = st.dictionaries(st.sampled_from(["x", "y"]), NUMBER | TEXT, max_size=2)
ID = st.sampled_from(["c1", "c2"])

TEXT_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})
USE = st.fixed_dictionaries({"type": st.just("tool_use"), "id": ID, "name": st.just("f"), "input": ARGS})
RESULT = st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": ID, "content": TEXT})
IMAGE = st.fixed_dictionaries({"type": st.just("image"), "source": ARGS})
USER = st.fixed_dictionaries(
    {"role": st.just("user"), "content": TEXT | st.lists(TEXT_BLOCK | RESULT | IMAGE, max_size=3)}
)
ASSISTANT = st.fixed_dictionaries(
    {"role": st.just("assistant"), "content": TEXT | st.lists(TEXT_BLOCK | USE, max_size=3)}
)
UNMODELLED = st.fixed_dictionaries({"role": st.sampled_from(["tool", "user"]), "content": NUMBER})
MESSAGE = st.one_of(USER, ASSISTANT, USER, ASSISTANT, USER, ASSISTANT, UNMODELLED)  # mostly compactable

PART = st.one_of(
    st.fixed_dictionaries({"text": TEXT}, optional={"thoughtSignature": TEXT, "thought": NUMBER}),
    st.fixed_dictionaries(
        {"functionCall": st.fixed_dictionaries({"name": st.just("f"), "args": ARGS}, optional={"id": ID})}
    ),
    st.fixed_dictionaries(
        {"functionResponse": st.fixed_dictionaries({"name": st.just("f"), "response": ARGS}, optional={"id": ID})}
    ),
)
MODELLED = st.fixed_dictionaries({"role": st.sampled_from(["user", "model"]), "parts": st.lists(PART, max_size=3)})
UNMODELLED_CONTENT = st.fixed_dictionaries({"role": st.sampled_from(["function", "user"]), "parts": st.just([1])})
CONTENT = st.one_of(MODELLED, MODELLED, MODELLED, MODELLED, MODELLED, MODELLED, UNMODELLED_CONTENT)

ITEM_TEXT = st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": TEXT})
SAID = st.fixed_dictionaries(
    {"type": st.just("message"), "role": st.just("assistant"), "content": st.lists(ITEM_TEXT, max_size=2) | TEXT}
)
ITEM = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "developer"]), "content": TEXT | st.lists(ITEM_TEXT)}),
    SAID,
    SAID,
    st.fixed_dictionaries({"type": st.just("reasoning"), "summary": st.just([]), "n": NUMBER}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": ID, "name": st.just("f"), "arguments": TEXT}),
    st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": ID, "output": TEXT}),
    st.fixed_dictionaries({"type": st.just("web_search_call"), "action": ARGS}),
    st.fixed_dictionaries({"type": st.just("compaction"), "encrypted_content": TEXT}),
    st.fixed_dictionaries({"type": st.just("compaction_trigger")}),
    st.fixed_dictionaries({"role": st.just("user"), "content": NUMBER}),  # not modelled
    NUMBER,  # not an item
)

SYSTEM = "Be brief. " * 200  # a body's first KiB tells its conversation (``ctxproxy.wire.incremental``)
EDIT = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("edit_last")),
    st.tuples(st.just("fork"), st.integers(0, 8)),
    st.tuples(st.just("same")),
    st.tuples(st.just("retype")),
)
_RETYPED: dict[tuple[type, Any], Any] = {(bool, True): 1, (int, 1): 1.0, (float, 1.0): True}
_RETYPED |= {(bool, False): 0, (int, 0): 0.0, (float, 0.0): False}


def retyped(value: Any) -> Any:
    """``value`` with each number of ``NUMBER`` another equal one of another JSON type."""
    if isinstance(value, dict):
        return {key: retyped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [retyped(item) for item in value]
    return _RETYPED.get((type(value), value), value) if isinstance(value, int | float) else value


Parse = Callable[[bytes, BodyLoader | None], Turn]
PROTOCOLS: dict[str, tuple[st.SearchStrategy[Any], Callable[[list[Any]], dict[str, Any]], Parse, str]] = {
    "messages": (
        MESSAGE,
        lambda messages: {"model": "claude-x", "max_tokens": 100, "system": SYSTEM, "messages": messages},
        lambda raw, load: parse_messages(raw, load),
        "messages",
    ),
    "gemini": (
        CONTENT,
        lambda contents: {"systemInstruction": {"parts": [{"text": SYSTEM}]}, CONTENTS: contents},
        lambda raw, load: parse_gemini(raw, "gemini-x", False, load),
        CONTENTS,
    ),
    "responses": (
        ITEM,
        lambda items: {"model": "gpt-x", "instructions": SYSTEM, "input": items, "store": False},
        lambda raw, load: parse_responses(raw, load_responses(raw, load), load),
        "input",
    ),
}


def outcome(turn: Turn) -> tuple[Any, ...]:
    reason = turn.as_sent
    return turn.body, turn.messages, None if reason is None else (str(reason), reason.param)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocol=st.sampled_from(sorted(PROTOCOLS)), data=st.data(), edits=st.lists(EDIT, min_size=1, max_size=8))
def test_every_conversion_equals_a_full_conversion(protocol: str, data: st.DataObject, edits: list[Any]) -> None:
    element, body_of, parse, field = PROTOCOLS[protocol]
    bodies = RawBodies(ByteLRU(1 << 24))
    elements = data.draw(st.lists(element, min_size=1, max_size=5))
    for edit in [("same",), *edits]:
        if edit[0] == "append":
            elements = [*elements, *data.draw(st.lists(element, min_size=edit[1], max_size=edit[1]))]
        elif edit[0] == "edit_last":
            elements = [*elements[:-1], data.draw(element)]
        elif edit[0] == "retype":
            elements = [*elements[:-1], retyped(elements[-1])]  # equal in Python, not in JSON
        elif edit[0] == "fork":
            elements = [*elements[: edit[1]], *data.draw(st.lists(element, min_size=1, max_size=2))]
        raw = orjson.dumps(body_of(elements))
        assert outcome(parse(raw, bodies.loader("acme", None, field))) == outcome(parse(raw, None))


def test_a_conversation_that_goes_on_converts_only_its_new_messages() -> None:
    """The repeated messages' canonical messages are the previous request's objects."""
    bodies = RawBodies(ByteLRU(1 << 24))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Hi " * 400}]
    history.append({"role": "assistant", "content": [{"type": "text", "text": "Yo"}]})
    raws, turns = [], []
    for more in range(3):
        history.append({"role": "user", "content": f"And {more}?"})
        raws.append(orjson.dumps({"model": "claude-x", "max_tokens": 100, "messages": history}))
        turns.append(parse_messages(raws[-1], bodies.loader("acme", None)))
        history.append({"role": "assistant", "content": f"Answer {more}"})
    assert turns[2].messages == parse_messages(raws[2]).messages
    assert len(turns[1].messages) == 5 and len(turns[2].messages) == 7
    assert all(a is b for a, b in zip(turns[1].messages, turns[2].messages[:5], strict=True))


def test_a_responses_run_that_goes_on_is_converted_again() -> None:
    """An assistant item appended to a run makes the run's message anew; the messages before the
    run are the previous request's objects."""
    bodies = RawBodies(ByteLRU(1 << 24))
    items: list[dict[str, Any]] = [{"role": "user", "content": "Hi " * 400}, {"role": "user", "content": "Go"}]
    turns = []
    for more in range(3):
        items.append({"type": "message", "role": "assistant", "content": f"Step {more}"})
        raw = orjson.dumps({"model": "gpt-x", "input": items})
        load = bodies.loader("acme", None, "input")
        turns.append(parse_responses(raw, load_responses(raw, load), load))
        full = parse_responses(raw)
        assert turns[-1].messages == full.messages and len(full.messages) == 3
    assert turns[2].messages[0] is turns[0].messages[0] and turns[2].messages[1] is turns[0].messages[1]
    assert [part["text"] for part in turns[2].messages[2]["content"]] == ["Step 0", "Step 1", "Step 2"]


def test_a_responses_run_cut_short_is_converted_again() -> None:
    """A body that is the previous one without its last item, which went on a run of assistant
    items: the run now ends one item earlier and is made anew (it was dropped once)."""
    bodies = RawBodies(ByteLRU(1 << 24))
    said = {"type": "message", "role": "assistant", "content": []}
    for items in ([said], [said, said], [said]):
        raw = orjson.dumps({"model": "gpt-x", "instructions": SYSTEM, "input": items})
        load = bodies.loader("acme", None, "input")
        turn = parse_responses(raw, load_responses(raw, load), load)
        assert outcome(turn) == outcome(parse_responses(raw, None))
        assert len(turn.messages[-1]["responses_items"]) == len(items)
