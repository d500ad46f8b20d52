"""Auto-injection: where ``## Relevant Memories`` goes, what it replaces, what fits its budget."""

from __future__ import annotations

from proxy.memory.inject import HEADER, INJECTION_NAME, Memory, inject, query_for


def count(text: str) -> int:
    return len(text.split())


def convo() -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Which database did we pick?"},
        {"role": "assistant", "content": "Postgres."},
        {"role": "user", "content": "And the port?"},
    ]


MEMORIES = [
    Memory("We chose Postgres 16 for the orders service.", "decision", "session"),
    Memory("The database listens on port 5433.", "fact", "user"),
]


def test_inserted_just_before_the_newest_user_message_which_stays_last() -> None:
    out = inject(convo(), MEMORIES, 200, count, "assistant_named")
    assert [m["role"] for m in out] == ["system", "user", "assistant", "assistant", "user"]
    injected = out[3]
    assert injected["name"] == INJECTION_NAME
    assert injected["content"].startswith(HEADER)
    assert "- (decision) We chose Postgres 16" in injected["content"]
    assert out[-1] == convo()[-1]


def test_an_earlier_injection_is_replaced_not_stacked() -> None:
    first = inject(convo(), MEMORIES[:1], 200, count, "assistant_named")
    again = inject(
        [*first, {"role": "assistant", "content": "5433."}, {"role": "user", "content": "Thanks"}],
        MEMORIES[1:],
        200,
        count,
        "assistant_named",
    )
    injections = [m for m in again if str(m.get("content", "")).startswith(HEADER)]
    assert len(injections) == 1
    assert "port 5433" in injections[0]["content"] and "Postgres 16" not in injections[0]["content"]
    assert again[-2] is injections[0] and again[-1]["content"] == "Thanks"


def test_an_injection_without_name_is_recognised_by_its_header() -> None:
    earlier = [*convo()[:3], {"role": "user", "content": HEADER + "\n- (fact) old"}, *convo()[3:]]
    out = inject(earlier, MEMORIES[:1], 200, count, "user")
    assert sum(1 for m in out if str(m["content"]).startswith(HEADER)) == 1
    assert out[-2]["role"] == "user" and "Postgres" in out[-2]["content"]


def test_budget_keeps_the_best_that_fit() -> None:
    long = Memory("word " * 500, "page 3", "session")
    out = inject(convo(), [long, MEMORIES[0]], 60, count, "assistant")
    text = out[-2]["content"]
    assert count(text) <= 60
    assert "Postgres 16" in text  # the long page was clipped or skipped, the short card still fits
    assert out[-2]["role"] == "assistant" and "name" not in out[-2]


def test_no_memories_or_no_user_message_means_no_injection() -> None:
    assert inject(convo(), [], 200, count, "assistant_named") == convo()
    only_system = [{"role": "system", "content": "x"}]
    assert inject(only_system, MEMORIES, 200, count, "assistant_named") == only_system


def test_agent_tool_loop_keeps_the_injection_before_the_user_message() -> None:
    loop = [
        *convo(),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    out = inject(loop, MEMORIES, 200, count, "assistant_named")
    assert out[3]["name"] == INJECTION_NAME and out[4]["content"] == "And the port?"
    assert out[-1]["role"] == "tool"


def test_layered_order_puts_user_and_scope_memory_after_the_system_prompt() -> None:
    memories = [*MEMORIES, Memory("Project uses Python 3.12.", "fact", "scope")]
    out = inject(convo(), memories, 300, count, "assistant_named", head=1, layered=True)
    assert out[1]["content"].startswith("## User Memory") and "5433" in out[1]["content"]
    assert out[2]["content"].startswith("## Scope Memory") and "Python 3.12" in out[2]["content"]
    assert out[-2]["content"].startswith(HEADER) and "Postgres" in out[-2]["content"]
    assert "5433" not in out[-2]["content"]
    # and a second pass replaces all three rather than adding more
    twice = inject(out, memories, 300, count, "assistant_named", head=3, layered=True)
    assert twice == out


def test_query_is_the_newest_user_text_including_content_parts() -> None:
    parts = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "GPU 选型"}, {"type": "image_url", "image_url": {"url": "data:x"}}],
        }
    ]
    assert query_for(parts) == "GPU 选型"
    assert query_for([{"role": "system", "content": "x"}]) is None
