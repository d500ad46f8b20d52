"""``before_compact``: a plugin may cancel a compaction or supply its summary.

Note 003, "Extension 钩子": "``session_before_compact`` — 提供自定义 compaction 内容，或取消"
(before a compaction: provide custom compaction content, or cancel it); in the flow, between
``findCutPoint()`` and ``generateSummary``: "[如果有 extension handler → 可自定义摘要或取消]".

The sample hooks veto for tenants named ``veto…`` and supply the summary for ``supply…``.
"""

from __future__ import annotations

from types import ModuleType

import structlog

from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import ask, conversation, events, plugins_toml, tenant_toml

PLUGINS = plugins_toml("sample_every", "sample_hooks")


async def test_a_veto_makes_no_checkpoint(sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Note 003's "取消" (cancel): the plan is not executed, the client's messages go upstream as they came, and
    nothing is stored — the next request, which would use a checkpoint, finds none."""
    proxy = await make_proxy({"veto": tenant_toml()}, PLUGINS)
    messages = conversation("Cox")

    with structlog.testing.capture_logs() as logs:
        first = await ask(proxy, upstream, "veto", messages)
    assert "X-Ctx-Compacted" not in first.headers and "X-Ctx-Summarized" not in first.headers
    assert first.forwarded == messages
    (vetoed,) = [line for line in logs if line["event"] == "compaction.vetoed"]
    assert (vetoed["plugin"], vetoed["range"]) == ("sample_hooks", [1, 10])
    assert not [line for line in logs if line["event"] == "compaction"]
    assert events(sample_plugin, "after_compact", "veto") == []

    longer = [*messages, {"role": "assistant", "content": "Cox first."}, {"role": "user", "content": "And then?"}]
    second = await ask(proxy, upstream, "veto", longer)
    assert "X-Ctx-Summarized" not in second.headers
    assert second.forwarded == longer
    assert len(events(sample_plugin, "before_compact", "veto")) == 2
    await proxy.settle()  # after_compact runs in the background: still nothing after it ends
    assert events(sample_plugin, "after_compact", "veto") == []


async def test_a_supplied_summary_is_forwarded_and_kept(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 003's "提供自定义 compaction 内容" (custom content): the hook's text is the summary of the plan's range, instead of
    the summariser's, rendered by the strategy's block kind, and stored like any summary."""
    from ctxproxy_sample.hooks import supplied

    proxy = await make_proxy({"supply": tenant_toml()}, PLUGINS)
    messages = conversation("Elstar")

    answer = await ask(proxy, upstream, "supply", messages)

    (told,) = events(sample_plugin, "before_compact", "supply")
    assert (told.start, told.end, told.kind, told.previous) == (1, 10, "sample_every", None)
    assert list(told.messages) == messages[1:10]
    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert answer.forwarded[1]["content"] == f"## Sample summary\n\n{supplied(told)}"
    assert answer.forwarded[2:] == messages[10:]

    longer = [*messages, {"role": "assistant", "content": "Elstar first."}, {"role": "user", "content": "Then?"}]
    again = await ask(proxy, upstream, "supply", longer)
    assert again.headers["X-Ctx-Summarized"] == "10" and "X-Ctx-Compacted" not in again.headers
    assert again.forwarded[1]["content"] == f"## Sample summary\n\n{supplied(told)}"
    await proxy.settle()  # after_compact runs in the background
    (done,) = events(sample_plugin, "after_compact", "supply")
    assert done.summarizer == "sample_hooks"


async def test_a_supplied_summary_over_the_budget_is_not_used(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A summary longer than the plan allows (``event.max_tokens``) would crowd the window: the
    summariser writes it instead, and the log says whose and why."""
    proxy = await make_proxy({"toolong": tenant_toml()}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "toolong", conversation("Pinova"))

    assert answer.headers["X-Ctx-Compacted"] == "1"
    summary = answer.forwarded[1]["content"]
    assert "supplied by sample_hooks" not in summary and "Pinova" in summary
    unused = [(line["plugin"], line["reason"]) for line in logs if line["event"] == "plugin.summary_unused"]
    assert unused == [("sample_hooks", "over_budget")]
