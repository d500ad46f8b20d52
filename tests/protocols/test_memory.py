"""Long-term memory on both protocols: a compaction writes a user's memory cards, and that user's
next conversation is forwarded with them injected."""

from __future__ import annotations

import json
from typing import Any, cast

from tests.anthropic.test_memory_http import DECISION as ANTHROPIC_DECISION
from tests.anthropic.test_memory_http import HEADER, MEMORY, QUESTION
from tests.protocols.clients import text_of

# The Messages test's four rounds, with plain-text contents both protocols accept.
DECISION = [
    {"role": m["role"], "content": text_of(m["content"])} for m in cast(list[dict[str, Any]], ANTHROPIC_DECISION)
]


async def test_a_users_memories_reach_their_next_conversation(protocol: Any) -> None:
    await protocol.start(strategy="rounds", extra=MEMORY)
    first = await protocol.send("You help with databases.", DECISION, **{"X-Ctx-User": "alice"})
    assert first.compacted
    await protocol.settle()

    question = [{"role": "user", "content": QUESTION}]
    reply = await protocol.send(None, question, **{"X-Ctx-User": "alice"})
    sent = protocol.forwarded()
    injected = [part["content"] for part in sent.parts if HEADER in part["content"]]
    assert len(injected) == 1 and "PostgreSQL 16" in injected[0]
    assert reply.count("Memories") == injected[0].count("\n- ") > 0
    assert sent.newest == question[-1] and QUESTION in reply.text
    # Right before the question, on the user's side of the conversation: no assistant turn made up.
    assert sent.parts[-2:] == [{"role": "user", "content": injected[0]}, question[-1]]
    protocol.check_valid(sent)
    assert "x-ctx-user" not in {k.lower() for k in protocol.fake.requests[-1].headers}

    await protocol.send(None, question, **{"X-Ctx-User": "bob"})
    assert HEADER not in json.dumps(protocol.forwarded().body)
