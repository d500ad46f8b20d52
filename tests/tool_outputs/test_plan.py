"""The plan: only fresh results are compressed, what was compressed before is sent as the same
text, masking comes in batches and never touches what must stay (kept tools, cache marks,
images); the placeholder names the call and the ref."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ctxproxy.tool_outputs import masked_turns, ref_of
from ctxproxy.tool_outputs.plan import Options, plan
from tests.tool_outputs.test_kinds import pytest_log

OPTIONS = Options(min_tokens=100, keep_turns=2, keep_tools=frozenset({"read_secret"}), retrieve="ctxproxy_retrieve")


def count(text: str) -> int:
    return len(text) // 4


def agent(steps: int, tool: str = "bash", result: Any = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(steps):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps({"cmd": f"pytest -k {n}"})},
        }
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{n}", "content": pytest_log() if result is None else result})
    return out


def test_masking_moves_in_steps_of_keep_turns() -> None:
    assert [masked_turns(n, 3) for n in range(12)] == [0, 0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9]
    assert masked_turns(50, 0) == 0


def test_only_the_fresh_result_is_compressed() -> None:
    made = plan(agent(3), replace(OPTIONS, keep_turns=3), {}, count)  # 3 turns, keep 3: none masked
    assert set(made.contents) == {6} == set(made.compressed) and len(made.fresh) == 1
    assert made.originals == {ref_of(pytest_log()): pytest_log()}


def test_a_result_compressed_before_is_sent_as_the_same_text() -> None:
    messages = agent(3)
    key = f"{ref_of(pytest_log())}:c1"
    made = plan(messages, replace(OPTIONS, keep_turns=3), {key: "as sent before"}, count)
    assert made.contents[4] == "as sent before" and 2 not in made.contents and not set(made.fresh) & {key}


def test_old_turns_are_masked_with_a_placeholder_naming_call_and_ref() -> None:
    assert plan(agent(4), OPTIONS, {}, count).masked == {2, 4}  # 4 turns, keep 2: the newest 2 whole
    made = plan(agent(5), OPTIONS, {}, count)
    assert made.masked == {2, 4, 6, 8}  # 5 turns: a step of 2, down to the newest turn
    line = made.contents[2]
    assert line.startswith('[ctxproxy: the output of bash(cmd="pytest -k 0") was removed from the prompt (')
    assert f'ctxproxy_retrieve(ref="{ref_of(pytest_log())}")' in line


def test_kept_tools_cache_marks_and_images_are_never_touched() -> None:
    assert plan(agent(5, tool="read_secret"), OPTIONS, {}, count).contents == {}
    marked = agent(5, result=[{"type": "text", "text": pytest_log(), "cache_control": {"type": "ephemeral"}}])
    assert plan(marked, OPTIONS, {}, count).contents == {}
    image = agent(5, result=[{"type": "text", "text": pytest_log()}, {"type": "image_url", "image_url": {"url": "x"}}])
    assert plan(image, OPTIONS, {}, count).contents == {}
    block = agent(5)  # a protocol's own block kept beside the message, marked for caching
    block[4] = {**block[4], "stored_block": {"type": "tool_result", "cache_control": {"type": "ephemeral"}}}
    assert plan(block, OPTIONS, {}, count).masked == {2, 6, 8}
    blocks = agent(5, result=[{"type": "text", "text": pytest_log()}])
    assert plan(blocks, OPTIONS, {}, count).masked == {2, 4, 6, 8}


def test_a_result_under_min_tokens_is_sent_as_it_came() -> None:
    assert plan(agent(1, result="3 passed"), OPTIONS, {}, count).contents == {}
