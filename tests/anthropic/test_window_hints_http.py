"""The window the client asked for, over HTTP with the real ``anthropic`` SDK: Claude Code's
``anthropic-beta: context-1m-…`` gives its model a 1,000,000-token window, so a conversation of
~300k tokens goes out as it came, where without the beta the same conversation is compacted to
the model's usual 200k; a window the upstream states when it refuses still wins over the one the
client asked for (README "Learned windows")."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from tests.anthropic.conftest import ADMIN_KEY, SENTENCES, Claude, MakeProxy, check_shape
from tests.fakes.anthropic_prompt import AnthropicWindow

ADMIN = f'[admin]\napi_key = "{ADMIN_KEY}"\n'
MODEL = "claude-opus-4-8"  # the built-in table's claude* window: 200,000
BETAS = ["claude-code-20250219", "context-1m-2025-08-07", "interleaved-thinking-2025-05-14"]
LONG = 300_000  # tokens, as the upstream counts them
STATED = 250_000  # the window an upstream without the 1M window states


def long_conversation(claude: Claude, tokens: int, opening: str = "") -> list[dict[str, Any]]:
    """User/assistant turns about a trip, then a question: at least ``tokens`` as ``claude`` counts."""
    text = " ".join(SENTENCES) * 6
    messages: list[dict[str, Any]] = []
    while claude.fake.prompt_tokens({"messages": messages}) < tokens:
        i = len(messages) // 2
        messages.append({"role": "user", "content": f"{opening}Turn {i}. {text}"})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Noted {i}. {text}"}]})
    messages.append({"role": "user", "content": "What did we decide about the car?"})
    return messages


async def ask(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], betas: list[str] | None) -> Any:
    """As Claude Code asks: ``client.beta.messages`` with its betas, or the plain API without."""
    if betas is None:
        return await client.messages.with_raw_response.create(model=MODEL, max_tokens=100, messages=messages)  # type: ignore[arg-type]
    return await client.beta.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=100,
        messages=messages,  # type: ignore[arg-type]
        betas=BETAS,
    )


async def learned_rows(url: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(url + "/admin/tenants/default/windows", headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return list((await resp.json())["data"])


async def test_the_1m_beta_forwards_a_long_conversation_whole(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await make_proxy(strategy="none")
    messages = long_conversation(claude, LONG)

    raw = await ask(client, messages, BETAS)
    assert raw.http_response.status_code == 200
    sent = claude.fake.message_requests()[-1]
    assert sent.json()["messages"] == messages  # nothing left out
    assert "X-Ctx-Compacted" not in raw.headers
    assert raw.headers["X-Ctx-Tokens-After"] == raw.headers["X-Ctx-Tokens-Before"]
    assert "context-1m-2025-08-07" in sent.headers["anthropic-beta"]  # and the beta goes on upstream

    # The same conversation without the beta: the model's usual 200k, so it is compacted first.
    raw = await ask(client, messages, None)
    assert raw.http_response.status_code == 200
    sent_body = claude.fake.message_requests()[-1].json()
    check_shape(sent_body)
    assert len(sent_body["messages"]) < len(messages)
    assert int(raw.headers["X-Ctx-Tokens-After"]) < int(raw.headers["X-Ctx-Tokens-Before"])
    assert claude.fake.prompt_tokens(sent_body) + 100 <= 200_000


async def test_the_model_names_1m_suffix_asks_the_same(make_proxy: MakeProxy, claude: Claude) -> None:
    """``claude-opus-4-8[1m]`` (Claude Code's form): 1M too; the model goes upstream as named."""
    client, _ = await make_proxy(strategy="none")
    messages = long_conversation(claude, LONG)
    raw = await client.messages.with_raw_response.create(
        model=MODEL + "[1m]",
        max_tokens=100,
        messages=messages,  # type: ignore[arg-type]
    )
    assert raw.http_response.status_code == 200
    sent = claude.fake.message_requests()[-1].json()
    assert sent["model"] == MODEL + "[1m]" and sent["messages"] == messages


async def test_a_window_the_upstream_states_wins_over_the_one_asked_for(make_proxy: MakeProxy, claude: Claude) -> None:
    """The account has no 1M window: the upstream refuses the first long prompt, stating 250k; that
    is learned, for the model asked for at 1M, and the next long session is compacted before it
    is sent instead of overflowing."""
    client, url = await make_proxy(strategy="none", proxy_toml=ADMIN)
    claude.fake.window = AnthropicWindow(STATED)

    raw = await ask(client, long_conversation(claude, LONG), BETAS)
    assert raw.headers["X-Ctx-Retried"] == "1"
    (row,) = await learned_rows(url)
    assert (row["model"], row["configured_window"], row["learned_window"]) == (MODEL + "[1m]", 1_000_000, STATED)

    refused = len(claude.fake.message_requests())
    raw = await ask(client, long_conversation(claude, LONG, opening="Another trip. "), BETAS)
    assert "X-Ctx-Retried" not in raw.headers
    assert len(claude.fake.message_requests()) == refused + 1  # sent once
    sent = claude.fake.message_requests()[-1].json()
    check_shape(sent)
    assert claude.fake.prompt_tokens(sent) + 100 <= STATED


@pytest.mark.parametrize("betas", [None, ["claude-code-20250219"]])
async def test_without_the_beta_nothing_is_learned_for_1m(
    make_proxy: MakeProxy, claude: Claude, betas: list[str] | None
) -> None:
    """A short request without the 1M beta learns under the model's own name: what the 1M variant
    learns stays apart."""
    client, url = await make_proxy(strategy="none", proxy_toml=ADMIN)
    messages = long_conversation(claude, 2_000)
    if betas is None:
        await client.messages.create(model=MODEL, max_tokens=100, messages=messages)  # type: ignore[arg-type]
    else:
        await client.beta.messages.create(model=MODEL, max_tokens=100, messages=messages, betas=betas)  # type: ignore[arg-type]
    (row,) = await learned_rows(url)
    assert (row["model"], row["configured_window"]) == (MODEL, 200_000)
