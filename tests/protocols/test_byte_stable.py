"""What ctxproxy adds never moves (issue 22): a 40-turn conversation with memory on, replayed by a
stateless client through a real proxy for every strategy and both protocols. Providers bill the
part of a prompt that repeats the previous prompt byte for byte at about a tenth, so between two
compactions every request must forward what the previous one forwarded — the client's messages
and every block of ctxproxy's (memories, Session Memory, Contents Page, branch summaries) — as its
exact prefix, with new material only after it, and ctxproxy's tools must not come and go.

The conversation has an agent's tool calls, and twice a user who typed while the tool ran (a
``[tool_result, text]`` message on the Messages API): that message is forwarded whole, and no
assistant message the client did not send appears among the client's messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.protocols.conversation import SYSTEM, exchange

MEMORY = "\n[memory]\nenabled = true\n"
# Small enough that every compacting strategy compacts several times in 40 turns, not every turn.
WINDOW = 2000
STRATEGIES = {
    "none": MEMORY,
    "sliding_window": "[compaction.sliding_window]\ncontext_size = 30\ntail_keep_size = 14\n"
    "compression_window_size = 8\ncompression_hard_limit = 12\n" + MEMORY,
    "rolling_summary": "[compaction.rolling_summary]\nsummary_max_tokens = 200\n" + MEMORY,
    "rounds": MEMORY,  # layered: User Memory first, Session Memory blocks appended
    "rounds-relevant": MEMORY + "layered = false\n",  # and with ## Relevant Memories instead
    "cut_point": "[compaction.cut_point]\nreserve_tokens = 600\nkeep_recent_tokens = 1000\n" + MEMORY,
    "paged": "[compaction.paged]\nactive_pages = 4\narchive_batch = 3\n" + MEMORY,
}
WHO = {"X-Ctx-User": "baker", "X-Ctx-Scope": "bakery"}
EXCHANGES = 40


def session() -> tuple[list[dict[str, Any]], list[int]]:
    """The conversation, and how much of it the client sends with each request: every user
    message, and every tool result (an agent's loop); every 4th order is looked up with a tool,
    every 8th while the user types a follow-up."""
    turns: list[dict[str, Any]] = []
    sends: list[int] = []
    for n in range(1, EXCHANGES + 1):
        question, answer = exchange(n)
        turns.append(question)
        sends.append(len(turns))
        if n % 4 == 0:
            call = {"id": f"toolu_{n:04d}", "name": "lookup", "input": {"q": f"order {n}"}}
            result: dict[str, Any] = {"role": "tool", "id": call["id"], "content": f"Record {n}: paid in full."}
            if n % 8 == 0:
                result["then"] = f"While you look: is the rye starter for order {n} vegan?"
            turns += [{"role": "assistant", "content": "Looking it up.", "calls": [call]}, result]
            sends.append(len(turns))
        turns.append(answer)
    return turns, sends


def dumped(messages: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(message) for message in messages]  # key order kept: byte for byte


def contains_whole(forwarded: list[dict[str, Any]], own: list[dict[str, Any]]) -> bool:
    """``own`` (one client message as its protocol's messages) is in ``forwarded`` as one run,
    unsplit; its last message may share a turn with ctxproxy's blocks (roles that alternate), its
    blocks together and in order."""
    for i in range(len(forwarded) - len(own) + 1):
        window = forwarded[i : i + len(own)]
        if window[:-1] == own[:-1] and holds(window[-1], own[-1]):
            return True
    return False


def blocks_of(message: dict[str, Any]) -> list[Any]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def holds(message: dict[str, Any], own: dict[str, Any]) -> bool:
    """``message`` is ``own``, or holds all its blocks, together and in order."""
    if message == own:
        return True
    content, blocks = blocks_of(message), blocks_of(own)
    if message["role"] != own["role"]:
        return False
    return any(content[j : j + len(blocks)] == blocks for j in range(len(content) - len(blocks) + 1))


def forwarded_raw(forwarded: list[dict[str, Any]], own: list[dict[str, Any]]) -> bool:
    """Whether the start of the client message ``own`` (its first block) was forwarded, not
    compacted: a compaction may summarise a message's tool results and keep the text after them."""
    first = blocks_of(own[0])[0]
    return any(first in blocks_of(message) or message == own[0] for message in forwarded)


def ours_among_the_clients(forwarded: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant messages the client did not send, from the first forwarded message that
    holds part of one of the client's on: its part of the conversation, after the system prompt
    and whatever stands for what was compacted."""
    own = [block for message in sent if message["role"] != "system" for block in blocks_of(message)]
    first = next(i for i, m in enumerate(forwarded) if m["role"] != "system" and any(b in own for b in blocks_of(m)))
    return [m for m in forwarded[first:] if m["role"] == "assistant" and m not in sent]


@pytest.mark.parametrize("variant", list(STRATEGIES))
async def test_each_request_extends_the_previous_one_until_a_compaction(protocol: Any, variant: str) -> None:
    strategy = variant.split("-")[0]
    await protocol.start(window=WINDOW, strategy=strategy, extra=STRATEGIES[variant])
    turns, sends = session()
    replies, sent = [], []
    whole = 0
    for end in sends:
        replies.append(await protocol.send(SYSTEM, turns[:end], **WHO))
        forwarded = protocol.forwarded()
        protocol.check_valid(forwarded)
        sent.append(forwarded)
        client = protocol.view(protocol.conversation_of(protocol.body(SYSTEM, turns[:end])))
        messages = protocol.view(forwarded.conversation)
        assert ours_among_the_clients(messages, client) == []
        own = protocol.view(protocol.wired(turns[end - 1]))
        if turns[end - 1].get("then") and forwarded_raw(messages, own):
            assert contains_whole(messages, own)  # typed while the tool ran: whole
            whole += 1
        await protocol.settle()

    extended = 0
    for k in range(1, len(sends)):
        before, after = sent[k - 1].body, sent[k].body
        if replies[k].compacted or replies[k].headers.get("X-Ctx-Summarized") != replies[k - 1].headers.get(
            "X-Ctx-Summarized"
        ):
            continue  # a compaction replaced the prefix
        assert (after.get("system"), after.get("instructions")) == (before.get("system"), before.get("instructions"))
        previous, current = sent[k - 1].conversation, sent[k].conversation
        assert dumped(current[: len(previous)]) == dumped(previous), k
        ours = [name for name in protocol.offered_tools(sent[k - 1]) if name.startswith("ctxproxy_")]
        if ours:  # ctxproxy's tools, once offered, stay, after the client's
            assert protocol.offered_tools(sent[k])[-len(ours) :] == ours
            assert after["tools"][-len(ours) :] == before["tools"][-len(ours) :]
        extended += 1
    # Not vacuous: many requests extend the previous one, memories were injected, a message typed
    # while a tool ran was forwarded raw, and every strategy but `none` compacted.
    assert extended >= len(sends) // 4 and whole, (extended, len(sends), whole)
    assert any(reply.count("Memories") for reply in replies)
    assert strategy == "none" or any(reply.compacted for reply in replies)
