"""Codex's remote compaction served by ctxproxy for an upstream that has none: a request ending with
``compaction_trigger`` (and ``POST /v1/responses/compact``) is answered by ctxproxy's summariser
with one ``compaction`` item; when the item comes back, the upstream reads its summary in its place.
An item the upstream issued goes through untouched, and a tenant that relays compaction gets the
upstream's own."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.wire.openai_responses.compaction_serve import serves_compaction
from ctxproxy.wire.openai_responses.expand import GONE_NOTE, INTRO
from tests.fakes.responses_wire import compaction_content
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import codex_turns, developer, user

HEAD = [developer("You are Codex."), user("<environment_context><cwd>/work</cwd></environment_context>")]
TASK = user("Count the ERROR lines in every log and tell me which file had the most.")
HISTORY = [*HEAD, TASK, *codex_turns(4)]
TRIGGER = {"type": "compaction_trigger"}


async def post(proxy: Any, body: dict[str, Any], path: str = "/v1/responses") -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.make_url(path), data=orjson.dumps(body), headers={"Authorization": "Bearer sk-c"}
        ) as resp:
            return resp.status, dict(resp.headers), await resp.read()


def compaction_of(output: list[Any]) -> dict[str, Any]:
    (item,) = output
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("ctxproxy:")
    return dict(item)


async def test_a_trigger_is_answered_by_ctxproxy_and_the_item_expands_to_its_summary(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    raw = await rig.client(proxy).responses.with_raw_response.create(
        model=MODEL, input=[*HISTORY, TRIGGER], store=False
    )
    assert raw.headers["X-Ctx-Remote-Compaction"] == "served"
    answer = raw.parse()
    item = compaction_of([o.to_dict() for o in answer.output])
    assert answer.usage is not None and answer.usage.input_tokens > answer.usage.output_tokens > 0
    assert rig.fake.requests == []  # the upstream was never asked: it knows no compaction_trigger

    reply = await rig.client(proxy).responses.create(model=MODEL, input=[*HEAD, TASK, item], store=False)
    sent = orjson.loads(rig.fake.response_requests()[-1].body)["input"]
    assert sent[:3] == [*HEAD, TASK]
    (summary,) = sent[3:]
    text = summary["content"][0]["text"]
    assert summary["role"] == "user" and text.startswith(INTRO) and "log3.txt" in text
    assert reply.output_text.startswith("echo: " + INTRO)


async def test_a_streamed_trigger_gets_the_events_of_one_compaction_item(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    client = rig.client(proxy)
    async with client.responses.with_streaming_response.create(
        model=MODEL, input=[*HISTORY, TRIGGER], stream=True
    ) as resp:
        events = [event async for event in await resp.parse()]
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.output_item.done",
        "response.completed"]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(5))
    compaction_of([o.to_dict() for o in events[-1].response.output])
    async with client.responses.stream(model=MODEL, input=[*HISTORY, TRIGGER]) as stream:
        final = await stream.get_final_response()
    compaction_of([o.to_dict() for o in final.output])


async def test_the_compact_endpoint_keeps_the_user_messages_then_the_item(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    raw = await rig.client(proxy).responses.with_raw_response.compact(model=MODEL, input=HISTORY)
    compacted = orjson.loads(raw.content)
    assert compacted["object"] == "response.compaction" and raw.headers["X-Ctx-Remote-Compaction"] == "served"
    assert compacted["output"][:-1] == [item for item in HISTORY if item.get("role") == "user"]
    compaction_of(compacted["output"][-1:])
    assert rig.fake.requests == []


async def test_a_summary_that_is_gone_or_forged_is_a_note_never_forwarded(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    forged = [
        {"type": "compaction", "encrypted_content": "ctxproxy:" + "0" * 32 + ":d:s_abc"},  # no such summary
        {"type": "compaction", "encrypted_content": "ctxproxy:../../etc"},
    ]
    for item in forged:
        status, _, _ = await post(proxy, {"model": MODEL, "input": [*HEAD, item]})
        assert status == 200
        sent = orjson.loads(rig.fake.response_requests()[-1].body)["input"]
        assert sent[-1]["content"][0]["text"] == GONE_NOTE


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_tenant_that_relays_gets_the_upstreams_compaction_and_sends_it_back_untouched(
    rig: ResponsesRig, stream: bool
) -> None:
    rig.fake.serves_compaction = True
    proxy = await rig.proxy(upstream='responses_compaction = "relay"')
    body = {"model": MODEL, "input": [*HISTORY, TRIGGER], "stream": stream}
    status, headers, raw = await post(proxy, body)
    assert status == 200 and headers["X-Ctx-Forwarded-As-Sent"] == f"input[{len(HISTORY)}]"
    assert rig.fake.response_requests()[0].body == orjson.dumps(body)
    number = max(rig.fake.issued)
    item = {"type": "compaction", "id": f"cmp_fake{number:04d}", "encrypted_content": compaction_content(number)}
    await rig.client(proxy).responses.create(model=MODEL, input=[*HEAD, TASK, item], store=False)
    assert orjson.loads(rig.fake.response_requests()[-1].body)["input"] == [*HEAD, TASK, item]

    compacted = await rig.client(proxy).responses.compact(model=MODEL, input=HISTORY)
    assert rig.fake.requests[-1].path == "/v1/responses/compact"
    assert compacted.output[-1].type == "compaction"


def test_auto_relays_to_openai_and_serves_every_other_upstream() -> None:
    def upstream(url: str, setting: str = "auto") -> UpstreamConfig:
        return UpstreamConfig(base_url=url, responses_compaction=setting)  # type: ignore[arg-type]

    assert not serves_compaction(upstream("https://api.openai.com/v1"))
    assert serves_compaction(upstream("https://openrouter.ai/api/v1"))
    assert serves_compaction(upstream("http://127.0.0.1:8000/v1"))
    assert serves_compaction(upstream("https://api.openai.com/v1", "serve"))
    assert not serves_compaction(upstream("http://127.0.0.1:8000/v1", "relay"))


async def test_an_llm_summary_is_asked_of_the_upstream_in_the_responses_api(rig: ResponsesRig) -> None:
    proxy = await rig.proxy(summarizer="llm")
    raw = await rig.client(proxy).responses.with_raw_response.create(model=MODEL, input=[*HISTORY, TRIGGER])
    compaction_of([o.to_dict() for o in raw.parse().output])
    (asked,) = rig.fake.response_requests()  # the summary call: the trigger itself never reaches it
    body = orjson.loads(asked.body)
    assert set(body) == {"model", "instructions", "input", "max_output_tokens", "store"} and body["store"] is False
    assert body["model"] == MODEL and body["input"][0]["role"] == "user" and "log3.txt" in body["input"][0]["content"]
    assert asked.headers["Authorization"] == "Bearer sk-client"  # the client's key, the tenant having none
    item = compaction_of([o.to_dict() for o in raw.parse().output])
    await post(proxy, {"model": MODEL, "input": [*HEAD, item]})
    expanded = orjson.loads(rig.fake.response_requests()[-1].body)["input"][-1]["content"][0]["text"]
    assert expanded.startswith(INTRO) and "echo: " in expanded  # the fake model's summary
