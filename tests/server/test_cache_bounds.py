"""Many large conversations: what the proxy keeps in memory stays within ``[server]
cache_max_bytes``, and every request is still answered.

Memory is measured two ways: the bytes the caches account for (``CachePool``), and what
tracemalloc says is still allocated from ``ctxproxy/`` code once the requests are done (so an
estimate that undercounts, or a cache that is not bounded, fails the test too).
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

import ctxproxy
from ctxproxy.services import CACHES, KNOWN, PROMPTS
from ctxproxy.wire.incremental import BODIES
from tests.conftest import MakeProxy, Upstream

CAP = 2 * 1024 * 1024
MESSAGE = 256 * 1024
SLACK = 1024 * 1024  # what the proxy holds besides its caches (config, pending records, …)
PROXY_CODE = str(Path(ctxproxy.__file__).parent / "*")


def conversation(i: int, turns: int) -> list[dict[str, str]]:
    """A conversation whose every user message is ~``MESSAGE`` bytes, unique to it."""
    messages = [{"role": "system", "content": f"conversation {i}"}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{i}/{turn} " + "lorem ipsum " * (MESSAGE // 12)})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def held_by_proxy_code() -> int:
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, PROXY_CODE)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def test_caches_stay_within_cache_max_bytes(make_proxy: MakeProxy, upstream: Upstream, traced: None) -> None:
    proxy = await make_proxy(proxy_toml=f"[server]\ncache_max_bytes = {CAP}\n")
    url = proxy.url("/v1/chat/completions")
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={"model": "gpt-4o", "messages": conversation(-1, 1)}) as resp:
            assert resp.status == 200  # warm: whatever is allocated once is in the baseline
        before = held_by_proxy_code()
        for i in range(40):
            for turns in (1, 2):  # a new conversation, then its next turn (which reuses the first)
                async with http.post(url, json={"model": "gpt-4o", "messages": conversation(i, turns)}) as resp:
                    assert resp.status == 200
                    answer = await resp.json()
                assert answer["choices"][0]["message"]["content"].startswith(f"echo: {i}/{turns - 1} ")
    assert len(upstream.fake.chat_requests()) == 81

    held = held_by_proxy_code() - before
    assert held <= CAP + SLACK, f"{held} bytes still held from ctxproxy/ code after 80 requests of 256 KiB"

    caches = proxy.server.app[CACHES]
    assert caches.max_bytes == CAP
    usage = caches.usage()
    assert 0 < caches.nbytes == sum(usage.values()) <= CAP
    assert set(usage) == {
        "known_conversations",
        "memory_indexes",
        "token_counts",
        "summary_analysis",
        "session_keys",
        "unknown_models",
        "learned_windows",
        "forks_told",
        "memory_rounds",
        "memory_pins",
        "prompt_prints",
        "raw_bodies",
        "checkpoints",
        "memory_readers",
        "memory_searches",
    }
    assert usage["raw_bodies"] == proxy.server.app[BODIES].nbytes <= caches.share("raw_bodies")
    assert 0 < usage["prompt_prints"] == proxy.server.app[PROMPTS].nbytes <= caches.share("prompt_prints")
    assert 0 < usage["known_conversations"] == proxy.server.app[KNOWN].nbytes <= caches.share("known_conversations")
    assert usage["token_counts"] > 0


COMPACTING_TENANT = """
default_context_window = 4096
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "rolling_summary"
summarizer = "extractive"
summary_max_tokens = 256
[compaction.rolling_summary]
headroom_min_tokens = 256
summary_max_tokens = 256
[memory]
enabled = true
"""


def long_chat(i: int, turns: int) -> list[dict[str, str]]:
    """A conversation long enough to be compacted, with sentences the summariser keeps."""
    messages = [{"role": "system", "content": f"You help with project {i}."}]
    for turn in range(turns):
        fact = f"We decided that release {i}.{turn} ships on Monday with the Berlin team. " * 12
        messages.append({"role": "user", "content": f"Turn {turn} of {i}. {fact} What should we do next?"})
        messages.append({"role": "assistant", "content": f"I will track release {i}.{turn}. " * 10})
    messages.append({"role": "user", "content": f"Remind me about project {i}, please."})
    return messages


async def test_compaction_caches_stay_within_cache_max_bytes(make_proxy: MakeProxy, upstream: Upstream) -> None:
    cap = 1024 * 1024
    proxy = await make_proxy({"default": COMPACTING_TENANT}, proxy_toml=f"[server]\ncache_max_bytes = {cap}\n")
    caches = proxy.server.app[CACHES]
    async with aiohttp.ClientSession() as http:
        for i in range(12):
            body = {"model": "local-model", "messages": long_chat(i, 14)}
            async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
                assert resp.status == 200, await resp.text()
                assert resp.headers["X-Ctx-Compacted"] == "1"
            assert caches.nbytes <= cap
    usage = caches.usage()
    # The summariser's analyses, the memory indexes, the unknown model and what its usage taught were all
    # cached, within their shares.
    names = ("summary_analysis", "memory_indexes", "unknown_models", "known_conversations", "token_counts")
    for name in (*names, "learned_windows"):
        assert 0 < usage[name] <= caches.share(name), (name, usage)
    assert caches.nbytes <= cap
