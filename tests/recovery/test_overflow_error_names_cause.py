"""When an upstream overflow cannot be recovered, the 400 says why: retries are switched off, or
nothing but the newest turn is left to compact. Never a guess between the two."""

from __future__ import annotations

import openai
import pytest

from tests.conftest import MakeProxy, Upstream
from tests.recovery.test_overflow_retry import OVERFLOW, TENANT, history


async def refused(make_proxy: MakeProxy, tenant: str, messages: list[dict[str, str]]) -> openai.BadRequestError:
    proxy = await make_proxy({"default": tenant})
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    finally:
        await client.close()
    assert caught.value.code == "context_length_exceeded"
    return caught.value


async def test_with_overflow_retries_off_the_error_says_so_and_how_to_turn_it_on(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    upstream.fake.reply_error(400, OVERFLOW)
    tenant = TENANT.format(window=100_000, strategy="none") + "overflow_retries = 0\n"
    error = await refused(make_proxy, tenant, history(30))
    assert "overflow_retries is 0" in error.message
    assert "overflow_retries = 1" in error.message
    assert "newest turn" not in error.message
    assert len(upstream.fake.chat_requests()) == 1  # no compaction, no retry


async def test_when_only_the_newest_turn_is_left_the_error_says_that(make_proxy: MakeProxy, upstream: Upstream) -> None:
    upstream.fake.reply_error(400, OVERFLOW)
    messages = [
        {"role": "system", "content": "You are a helpful planner."},
        {"role": "user", "content": "Plan the lake trip. " * 400},
    ]
    error = await refused(make_proxy, TENANT.format(window=100_000, strategy="none"), messages)
    assert "nothing but the newest turn is left to compact" in error.message
    assert "overflow_retries" not in error.message
    assert len(upstream.fake.chat_requests()) == 1
