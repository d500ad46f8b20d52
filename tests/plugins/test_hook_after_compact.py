"""``after_compact``: a plugin hears of every checkpoint made, and can change nothing.

Note 003, "Extension 钩子": "``session_compact`` — compaction 完成后通知" (notified once a
compaction is done). The sample hooks' ``after_compact`` is a plain function: it runs in a worker
thread, in the background — its answer is ignored, so nothing waits for it: a slow one costs the
request nothing, while the hooks whose answer counts (``before_compact``) are waited for, and
what they cost the request is in its log line (``hooks_ms``) and in ``plugin.hooks``.
"""

from __future__ import annotations

import dataclasses
import time
from types import ModuleType

import pytest
import structlog

from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import ask, conversation, events, plugins_toml, tenant_toml


async def test_after_compact_observes_the_new_checkpoint(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Told "compaction 完成后通知": tenant, session, the range summarised, the summary's length, who
    wrote it and whether it was saved — and the event is frozen."""
    proxy = await make_proxy({"observed": tenant_toml()}, plugins_toml("sample_every", "sample_hooks"))
    messages = conversation("Honeycrisp")

    answer = await ask(proxy, upstream, "observed", messages)
    await proxy.settle()  # after_compact runs in the background

    (done,) = events(sample_plugin, "after_compact", "observed")
    assert done.session == answer.headers["X-Ctx-Session"]
    assert (done.strategy, done.reason, done.start, done.end) == ("sample_every", "every", 1, 10)
    assert str(done.end) == answer.headers["X-Ctx-Summarized"]
    assert done.summary_chars == len(answer.forwarded[1]["content"])
    assert (done.summarizer, done.saved) == ("extractive", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.end = 3  # type: ignore[misc]

    fits = await ask(proxy, upstream, "observed", [*messages, {"role": "assistant", "content": "Pack Honeycrisp."}])
    await proxy.settle()
    assert "X-Ctx-Compacted" not in fits.headers
    assert len(events(sample_plugin, "after_compact", "observed")) == 1  # told of compactions only


async def test_a_slow_after_compact_costs_the_request_nothing(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``sample_late``'s ``after_compact`` sleeps an hour; with ``hook_timeout = 2`` the request
    that compacts is answered at once, and the hook's timeout is logged afterwards."""
    proxy = await make_proxy({"observed": tenant_toml()}, plugins_toml("sample_every", "sample_late", hook_timeout=2))
    with structlog.testing.capture_logs() as logs:
        started = time.perf_counter()
        answer = await ask(proxy, upstream, "observed", conversation("Gala"))
        took = time.perf_counter() - started
        assert not [line for line in logs if line["event"] == "plugin.hook_failed"]  # still running
        await proxy.settle()
    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert took < 1.5, f"the answer waited {took:.1f}s for after_compact"
    (failed,) = [line for line in logs if line["event"] == "plugin.hook_failed"]
    assert (failed["plugin"], failed["hook"], failed["error"]) == ("sample_late", "after_compact", "timeout")
    (request,) = [line for line in logs if line["event"] == "request"]
    assert "hooks_ms" not in request  # no hook whose answer counts: nothing waited for
    assert not [line for line in logs if line["event"] == "plugin.hooks"]


async def test_what_before_compact_costs_the_request_is_logged(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``sample_sleeping``'s ``before_compact`` is given up on after ``hook_timeout`` (0.3 s): the
    request waited that long, and its log line and ``plugin.hooks`` say so."""
    plugins = plugins_toml("sample_every", "sample_hooks", "sample_sleeping", hook_timeout=0.3)
    proxy = await make_proxy({"observed": tenant_toml()}, plugins)
    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "observed", conversation("Jonagold"))
        await proxy.settle()
    assert answer.headers["X-Ctx-Compacted"] == "1"
    (waited,) = [line for line in logs if line["event"] == "plugin.hooks"]
    assert (waited["hook"], waited["plugins"]) == ("before_compact", ["sample_hooks", "sample_sleeping"])
    assert 300 <= waited["duration_ms"] < 1500
    (request,) = [line for line in logs if line["event"] == "request"]
    assert waited["duration_ms"] - 1 <= request["hooks_ms"] <= request["latency_ms"]
