"""Learned windows for Messages clients: an overflow error teaches the model's window, the usage
of an answer (input plus cache tokens) teaches how Claude counts, and a later session is
compacted before it is sent instead of overflowing (README "Learned windows"). The admin API's
row says what pre-flight uses for each protocol: until a model's own count ratio is learned,
each protocol divides its room by its prior (Claude's calibration for Messages clients, none for
chat completions); once a ratio is learned, it replaces every prior."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from ctxproxy.compaction.learned import Learned, preflight_window
from ctxproxy.strategies.base import Window
from ctxproxy.wire.anthropic.count import CALIBRATION
from tests.anthropic.conftest import ADMIN_KEY, MODEL, SENTENCES, Claude, MakeProxy, check_shape, conversation
from tests.fakes.anthropic_prompt import AnthropicWindow, PromptMeter
from tests.fakes.anthropic_upstream import anthropic_error

ADMIN = f'[admin]\napi_key = "{ADMIN_KEY}"\n'
LIMIT = 3_000
CONFIGURED = 200_000
WINDOW_ONLY = 20_000
CHAT, MESSAGES = "/v1/chat/completions", "/v1/messages"


async def learned(url: str) -> dict[str, Any]:
    """The admin API's one learned row (the only model used)."""
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(url + "/admin/tenants/default/windows", headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
        (row,) = (await resp.json())["data"]
    assert row["model"] == MODEL
    return dict(row)


async def with_cached_system(client: Any, claude: Claude, repeats: int) -> tuple[Any, float]:
    """Ask with a system prompt of ``repeats`` times the sentences, marked for the prompt cache:
    the answer's usage, and the upstream's count of the prompt over ctxproxy's."""
    system = [{"type": "text", "text": " ".join(SENTENCES) * repeats, "cache_control": {"type": "ephemeral"}}]
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, system=system, messages=conversation(2)
    )
    sent = claude.fake.message_requests()[-1].json()
    return (await raw.parse()).usage, claude.fake.prompt_tokens(sent) / int(raw.headers["X-Ctx-Tokens-After"])


async def test_an_overflow_and_usage_teach_the_window_and_ratio(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await make_proxy(window=1_000_000, proxy_toml=ADMIN)
    claude.fake.window = AnthropicWindow(LIMIT)
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=100, messages=conversation(30))
    assert raw.headers["X-Ctx-Retried"] == "1"
    taught = await learned(url)
    assert taught["learned_window"] == LIMIT and taught["window_source"] == "overflow"
    assert taught["samples"] >= 1 and taught["count_ratio"] > 1  # the fake counts more than cl100k

    # Claude now counts more (denser text); a cached system prompt puts most of the prompt in
    # cache_creation_input_tokens, which belongs to its size as much as input_tokens does.
    claude.fake.meter = PromptMeter(chars_per_token=2.5)
    usage, sample = await with_cached_system(client, claude, 10)
    assert usage.cache_creation_input_tokens and usage.cache_creation_input_tokens > usage.input_tokens
    calibrated = await learned(url)
    assert calibrated["samples"] == taught["samples"] + 1
    assert taught["count_ratio"] < calibrated["count_ratio"] < sample

    # A new session as long as the first: compacted before it went out, sent once.
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, system="Another trip.", messages=conversation(31)
    )
    assert "X-Ctx-Retried" not in raw.headers
    assert len(claude.fake.message_requests()) == 4
    sent = claude.fake.message_requests()[-1].json()
    check_shape(sent)
    assert claude.fake.prompt_tokens(sent) + 100 <= LIMIT


async def test_each_protocols_prior_applies_until_a_ratio_is_learned(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await make_proxy(window=CONFIGURED, proxy_toml=ADMIN)
    # An overflow that states the window, and a prompt size no ratio can be learned from (a
    # prompt this short says nothing of how the model counts): only the window is learned.
    claude.fake.reply_error(400, anthropic_error(f"prompt is too long: 250000 tokens > {WINDOW_ONLY} maximum"))
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hi!"}])
    row = await learned(url)
    assert (row["learned_window"], row["count_ratio"]) == (WINDOW_ONLY, None)
    # 5 % of the learned window is kept free; Messages clients' room is divided by Claude's prior.
    assert row["protocols"] == {
        CHAT: {"prior_ratio": None, "preflight_window": 19_000},
        MESSAGES: {"prior_ratio": CALIBRATION, "preflight_window": int(19_000 / CALIBRATION)},
    }
    record = Learned(MODEL, "", window=WINDOW_ONLY)
    for entry in row["protocols"].values():
        assert (
            entry["preflight_window"]
            == preflight_window(Window(CONFIGURED), record, entry["prior_ratio"]).context_window
        )
    assert row["preflight_window"] == row["protocols"][CHAT]["preflight_window"]

    # An answer's usage teaches the model's own ratio: it replaces every protocol's prior.
    await client.messages.create(model=MODEL, max_tokens=100, messages=conversation(2))  # type: ignore[arg-type]
    row = await learned(url)
    assert row["samples"] == 1 and row["applied_ratio"] is not None
    expected = int((WINDOW_ONLY - 0.05 * WINDOW_ONLY) / row["applied_ratio"])
    assert {entry["preflight_window"] for entry in row["protocols"].values()} == {row["preflight_window"]}
    assert abs(row["preflight_window"] - expected) <= 1  # the row's ratio is rounded to 4 places


async def test_an_answer_read_from_the_prompt_cache_teaches_the_ratio_too(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    """``input_tokens`` leaves out what the cache served, but the sum with both cache counts is
    the whole prompt: an answer mostly read from the cache is a sample like any other."""
    client, url = await make_proxy(window=1_000_000, proxy_toml=ADMIN)
    written, _ = await with_cached_system(client, claude, 15)
    assert written.cache_creation_input_tokens and not written.cache_read_input_tokens
    taught = await learned(url)

    claude.fake.meter.chars_per_token = 2.5  # Claude counts more: the ratio moves (so it is stored)
    usage, sample = await with_cached_system(client, claude, 15)
    assert usage.cache_read_input_tokens and usage.cache_read_input_tokens > usage.input_tokens
    read = await learned(url)
    assert read["samples"] == taught["samples"] + 1
    assert taught["count_ratio"] < read["count_ratio"] < sample
