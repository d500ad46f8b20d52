"""Note 002's memory layers through the real proxy (the openai SDK against the fake upstream):
what each finished round says of the user and of the project is extracted after the round, off
the request path — deterministically with the extractive summariser, by one small call of the
summary model with the LLM summariser — while the session's memory is written only at
compression."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai

from ctxproxy.memory.scopes import Layer
from ctxproxy.services import MEMORIES
from ctxproxy.summarize.round_notes import SYSTEM_PROMPT
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.test_layered_rounds_http import TENANT as LAYERED  # rounds, A = B = 2, no [memory]

MODEL = "ctx-test-model"
NOTES_MODEL = "notes-model"  # the tenant's summary model: its calls are told apart by it
TENANT = LAYERED.replace('summarizer = "extractive"', f'summarizer = "extractive"\nsummary_model = "{NOTES_MODEL}"')
LLM_TENANT = TENANT.replace('summarizer = "extractive"', 'summarizer = "llm"')
SYSTEM = {"role": "system", "content": "You help the orders team."}
PROFILE = "I'm a data engineer and I prefer answers in metric units."
FACT = "We decided to use PostgreSQL 16 for the orders service database."
ROUNDS = [
    (PROFILE, "Noted: metric units."),
    (FACT, "Good choice: PostgreSQL 16 it is for orders."),
    ("The service runs in the Frankfurt region.", "Frankfurt, noted."),
    ("Redis is fine for the cache layer.", "Agreed."),
]
WHO = {"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"}
NOTES = {"user": ["Alice is a data engineer who wants metric units."], "project": ["Orders run on PostgreSQL 16."]}


def history(rounds: int, question: str = "What next?") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for asked, answered in ROUNDS[:rounds]:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return [*messages, {"role": "user", "content": question}]


async def chat(proxy: Proxy, messages: list[dict[str, Any]], headers: dict[str, str]) -> Any:
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers=headers
    ) as client:
        return await client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)  # type: ignore[arg-type]


async def layer(proxy: Proxy, kind: str, ident: str) -> list[str]:
    return [doc.content for doc in await proxy.server.app[MEMORIES].list_layer(Layer("default", kind, ident))]  # type: ignore[arg-type]


async def session_layer(proxy: Proxy, session: str) -> list[str]:
    """Alice's layer of one session (``X-Ctx-Session`` of its requests)."""
    found = Layer("default", "session", f"default:d:{session}", owner="alice")
    return [doc.content for doc in await proxy.server.app[MEMORIES].list_layer(found)]


def notes_calls(upstream: Upstream) -> list[dict[str, Any]]:
    return [r.json() for r in upstream.fake.chat_requests() if r.json()["model"] == NOTES_MODEL]


async def arrived(upstream: Upstream) -> list[dict[str, Any]]:
    """The summary model's calls, once there is one."""
    while not notes_calls(upstream):
        await asyncio.sleep(0.01)
    return notes_calls(upstream)


async def test_every_round_writes_user_and_scope_memory_and_no_session_memory(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 002: "每轮对话后仅抽取 User + Scope；Session 仅在压缩时批量抽取" — after every round only
    User (the profile: "仅抽 Profile") and Scope memory are extracted; Session memory only when
    rounds are compressed."""
    proxy = await make_proxy({"default": TENANT})
    for rounds in (1, 2):  # K < A + B: nothing is compressed yet
        raw = await chat(proxy, history(rounds), WHO)
        assert "X-Ctx-Compacted" not in raw.headers
        await proxy.settle()
    user, scope = await layer(proxy, "user", "alice"), await layer(proxy, "scope", "orders-team")
    assert user == [f"User: {PROFILE}"]  # the profile, not the project
    assert any(FACT[3:] in card for card in scope) and not any("data engineer" in card for card in scope)
    assert await session_layer(proxy, raw.headers["X-Ctx-Session"]) == []

    raw = await chat(proxy, history(4), WHO)  # K = A + B: rounds 1-2 compressed
    assert raw.headers["X-Ctx-Compacted"] == "1"
    await proxy.settle()
    session = await session_layer(proxy, raw.headers["X-Ctx-Session"])
    assert session and any("PostgreSQL 16" in card for card in session)
    # The compression's cards stay in the session: the user layer still holds the profile alone,
    # and the scope layer only what the rounds said.
    assert await layer(proxy, "user", "alice") == [f"User: {PROFILE}"]
    assert not set(session) & set(await layer(proxy, "scope", "orders-team"))


async def test_a_round_is_extracted_once_and_only_for_an_identity(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """A regenerated answer (the same history again) is no new round; a conversation without a
    user or scope has no user or scope layer to write (its memories are its lineage's)."""
    proxy = await make_proxy({"default": LLM_TENANT})
    upstream.fake.model_answers[NOTES_MODEL] = (json.dumps(NOTES), None)
    await chat(proxy, history(2), WHO)
    await proxy.settle()
    await chat(proxy, history(2), WHO)  # regenerate
    await proxy.settle()
    assert len(notes_calls(upstream)) == 1
    await chat(proxy, history(2, "Something else?"), {})  # anonymous
    await proxy.settle()
    assert len(notes_calls(upstream)) == 1


async def test_the_llm_writes_the_notes_off_the_request_path(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Note 002 with the LLM summariser: one small call per finished round, in the request's own
    protocol, never on the request path — the client has its answer while the call is still
    waiting for the model."""
    proxy = await make_proxy({"default": LLM_TENANT})
    released = asyncio.Event()
    upstream.fake.model_answers[NOTES_MODEL] = (f"```json\n{json.dumps(NOTES)}\n```", released)
    raw = await chat(proxy, history(1), WHO)
    assert raw.parse().choices[0].message.content == "echo: What next?"
    assert await layer(proxy, "user", "alice") == []  # the model has not answered yet
    [call] = await asyncio.wait_for(arrived(upstream), 5)
    assert call["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert PROFILE in call["messages"][1]["content"] and "What next?" not in call["messages"][1]["content"]
    assert call["temperature"] == 0 and not call.get("stream")

    released.set()
    await proxy.settle()
    assert await layer(proxy, "user", "alice") == NOTES["user"]
    assert await layer(proxy, "scope", "orders-team") == NOTES["project"]


async def test_an_unusable_answer_falls_back_to_the_extractive_notes(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """The model's answer is not the JSON asked for (here the fake's echo): nothing of the round
    is lost, the deterministic extraction writes it."""
    proxy = await make_proxy({"default": LLM_TENANT})
    await chat(proxy, history(1), WHO)
    await proxy.settle()
    assert len(notes_calls(upstream)) == 1
    assert await layer(proxy, "user", "alice") == [f"User: {PROFILE}"]
