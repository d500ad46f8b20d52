"""Per-request A and B for ``rounds``: ``X-Ctx-Rounds-Full`` and ``X-Ctx-Rounds-Cached``.

Note 002: "请求体：fullContextTurns、cachedContextTurns 可覆盖单次请求" (the request may override
A and B for itself). Here they are headers, whole numbers from 1 to 100 (at least one round stays
raw, at least one is compressed at a time); anything else is a 400 in the client's protocol
naming the header, and a strategy without such options ignores them."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.test_layered_rounds_http import TENANT as LAYERED

MODEL = "ctx-test-model"
ROUNDS = LAYERED[: LAYERED.index("[compaction.rounds]")]  # rounds with its defaults, A = 4 and B = 3
ROLLING = ROUNDS.replace('"rounds"', '"rolling_summary"')
SYSTEM = {"role": "system", "content": "You plan deliveries."}


def history(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, rounds + 1):
        messages += [
            {"role": "user", "content": f"Delivery {n} leaves the depot at {n + 6}:00 for the north route."},
            {"role": "assistant", "content": f"Delivery {n} is planned."},
        ]
    return [*messages, {"role": "user", "content": "Which deliveries leave before ten?"}]


async def ask(proxy: Proxy, messages: list[dict[str, Any]], headers: dict[str, str] | None = None) -> Any:
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers=headers or {}
    ) as client:
        return await client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)  # type: ignore[arg-type]


async def test_the_headers_set_a_and_b_for_that_request_alone(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Five rounds with the defaults A = 4, B = 3: nothing compressed (5 < 7). The same request
    with A = 2, B = 2 compresses its oldest two rounds; the next request without the headers uses
    that Session Memory block and compresses nothing more (3 uncompressed rounds < 7)."""
    proxy = await make_proxy({"default": ROUNDS})
    assert "X-Ctx-Compacted" not in (await ask(proxy, history(4))).headers
    raw = await ask(proxy, history(4), {"X-Ctx-Rounds-Full": "2", "X-Ctx-Rounds-Cached": "2"})
    assert raw.headers["X-Ctx-Compacted"] == "1" and raw.headers["X-Ctx-Summarized"] == "5"
    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert sent[1]["content"].startswith("## Session Memory") and sent[2:] == history(4)[5:]
    assert not any(name.lower().startswith("x-ctx") for name in upstream.fake.chat_requests()[-1].headers)

    later = [*history(4), {"role": "assistant", "content": "Deliveries 1-3."}, {"role": "user", "content": "And?"}]
    raw = await ask(proxy, later)
    assert "X-Ctx-Compacted" not in raw.headers and raw.headers["X-Ctx-Summarized"] == "5"


BAD = ["0", "101", "-1", "1.5", "1e2", "two", "٣", "9" * 40, "3, 4"]


@pytest.mark.parametrize("header", ["X-Ctx-Rounds-Full", "X-Ctx-Rounds-Cached"])
@pytest.mark.parametrize("value", BAD)
async def test_a_bad_value_is_a_400_naming_the_header(
    make_proxy: MakeProxy, upstream: Upstream, header: str, value: str
) -> None:
    proxy = await make_proxy({"default": ROUNDS})
    async with aiohttp.ClientSession() as http:
        body = {"model": MODEL, "messages": history(1)}
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers={header: value}) as resp:
            assert resp.status == 400
            error = (await resp.json())["error"]
    assert error["param"] == header and error["code"] == "invalid_header"
    assert error["type"] == "invalid_request_error" and "from 1 to 100" in error["message"]
    assert upstream.fake.chat_requests() == []


async def test_the_openai_sdk_sees_a_bad_request(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": ROUNDS})
    with pytest.raises(openai.BadRequestError) as raised:
        await ask(proxy, history(1), {"X-Ctx-Rounds-Cached": "0"})
    assert raised.value.param == "X-Ctx-Rounds-Cached"  # type: ignore[attr-defined]


async def test_a_strategy_without_these_options_ignores_them(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": ROLLING})
    raw = await ask(proxy, history(4), {"X-Ctx-Rounds-Full": "two", "X-Ctx-Rounds-Cached": "1"})
    assert raw.parse().choices[0].message.content == "echo: Which deliveries leave before ten?"
    assert upstream.fake.chat_requests()[-1].json()["messages"] == history(4)
