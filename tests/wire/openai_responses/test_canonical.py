"""A Responses body as canonical messages: roles, parts, calls and results, and the runs of items
that must stay together (reasoning with the item it produced)."""

from __future__ import annotations

from typing import Any

from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from ctxproxy.vocabulary import PART_TOKENS_HINT
from ctxproxy.wire.openai_responses.canonical import INSTRUCTIONS_KEY, ITEM_KEY, ITEMS_KEY, to_messages
from tests.wire.openai_responses.items import call, codex_turns, developer, output, reasoning, said, user


def public(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what ctxproxy keeps for writing it back."""
    calls = [{k: v for k, v in c.items() if k != ITEM_KEY} for c in message.get("tool_calls") or []]
    out = {k: v for k, v in message.items() if k not in (ITEMS_KEY, INSTRUCTIONS_KEY, "tool_calls")}
    return {**out, "tool_calls": calls} if calls else out


def test_instructions_and_a_string_input_are_a_system_and_a_user_message() -> None:
    messages = to_messages({"instructions": "Be brief.", "input": "hi"})
    assert messages == [
        {"role": "system", "content": "Be brief.", INSTRUCTIONS_KEY: True},
        {"role": "user", "content": "hi"},
    ]


def test_messages_keep_their_roles_and_text_parts_become_text() -> None:
    image = {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"}
    file = {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"}
    odd = {"type": "input_video", "video_url": "v"}
    item = {"role": "user", "content": [{"type": "input_text", "text": "look"}, image, file, odd]}
    (message,) = to_messages({"input": [developer("Rules."), item]})[1:]
    assert public(message)["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
        {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
        {"type": "input_video", "responses_part": odd},
    ]
    assert message[ITEMS_KEY] == [item]


def test_a_turn_of_reasoning_a_call_and_its_output() -> None:
    items = [user("go"), reasoning(1), call("c1"), output("c1", "done"), reasoning(2), said("Done.")]
    messages = [public(m) for m in to_messages({"input": items})]
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "reasoning", ITEM_KEY: reasoning(1), PART_TOKENS_HINT: 7}],
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "exec_command", "arguments": '{"cmd": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", ITEM_KEY: reasoning(2), PART_TOKENS_HINT: 7},
                {"type": "text", "text": "Done."},
            ],
        },  # fmt: skip
    ]


def test_parallel_calls_are_one_assistant_message_and_custom_calls_count_their_input() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"}
    items = [
        user("go"),
        call("c1"),
        custom,
        output("c1"),
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
    ]
    messages = to_messages({"input": items})
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [c["function"] for c in messages[1]["tool_calls"]] == [
        {"name": "exec_command", "arguments": '{"cmd": "ls"}'},
        {"name": "apply_patch", "arguments": "*** Begin Patch"},
    ]


def test_other_calls_are_named_by_their_type_and_their_outputs_are_opaque() -> None:
    shell = {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}, "status": "completed"}
    answer = {"type": "shell_call_output", "call_id": "s1", "output": [{"stdout": "a"}]}
    messages = to_messages({"input": [user("go"), shell, answer]})
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "shell_call",
        "arguments": '{"action":{"commands":["ls"]}}',
    }
    assert messages[2]["content"] == [{"type": "shell_call_output", ITEM_KEY: answer}]


def test_compaction_items_are_developer_messages_kept_word_for_word() -> None:
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "b64"}
    messages = to_messages({"input": [user("go"), compaction]})
    assert public(messages[1]) == {"role": "developer", "content": [{"type": "compaction", ITEM_KEY: compaction}]}


def test_unknown_and_server_side_items_stay_in_the_assistant_turn_they_came_in() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "x"}}
    ask = {"type": "mcp_approval_request", "id": "mcpr_1", "name": "t", "arguments": "{}", "server_label": "s"}
    yes = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    messages = to_messages({"input": [user("go"), search, said("Found."), ask, yes, user("next")]})
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1][ITEMS_KEY] == [search, said("Found."), ask, yes]


def test_every_message_counts_and_digests_its_opaque_items() -> None:
    counter = TokenCounter()
    messages = to_messages({"input": codex_turns(2)})
    bare = [public(m) for m in messages]
    assert all(counter.count_message(m, message_digest(m)) > 0 for m in messages)
    assert [message_digest(m) for m in messages] == [message_digest(m) for m in bare]
    one, other = (to_messages({"input": [reasoning(n), said("a")]})[0] for n in (1, 2))
    assert message_digest(one) != message_digest(other)  # the item, ciphertext included, is the content


def test_a_reasoning_item_counts_its_summary_not_its_ciphertext() -> None:
    item = {**reasoning(1), "summary": [{"type": "summary_text", "text": "x" * 400}], "encrypted_content": "A" * 40_000}
    (message,) = to_messages({"input": [item, said("ok")]})
    assert message["content"][0][PART_TOKENS_HINT] == 104
    assert TokenCounter().count_message(message, message_digest(message)) < 130
