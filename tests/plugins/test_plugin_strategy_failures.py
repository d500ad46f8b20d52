"""A plugin strategy that raises costs the request nothing: its plan counts as none, its block
kind's text falls back to the common layout, and the log says whose and what type of error.

Note 003 lets an extension bring "比默认更智能的压缩策略" (a smarter compaction strategy than the
default); ctxproxy runs it for every request of the tenants that name it, so its failures are
isolated like a hook's. The sample plugin's ``sample_crashing`` raises when a message asks it to,
and its block kind can never render.
"""

from __future__ import annotations

from types import ModuleType

import structlog

from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import ask, conversation, plugins_toml, tenant_toml

PLUGINS = plugins_toml("sample_crashing")


def crashing(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    from ctxproxy_sample.strategy import CRASH

    return [*messages[:-1], {"role": "user", "content": f"{CRASH}, then tell me what to pack."}]


async def test_a_plan_that_raises_is_no_plan(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"fragile": tenant_toml("sample_crashing")}, PLUGINS)
    messages = crashing(conversation("Cortland"))

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "fragile", messages)

    assert "X-Ctx-Compacted" not in answer.headers and answer.forwarded == messages
    failed = [(line["plugin"], line["error"]) for line in logs if line["event"] == "plugin.plan_failed"]
    assert failed == [("sample_crashing", "ZeroDivisionError")]
    assert not any("please crash" in str(value) for line in logs for value in line.values())


async def test_the_emergency_plan_still_fits_a_prompt_the_plugin_failed_to_plan_for(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"fragile": tenant_toml("sample_crashing", window=1024)}, PLUGINS)
    messages = crashing(conversation("Cortland", pairs=40))

    answer = await ask(proxy, upstream, "fragile", messages)

    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert answer.forwarded[1]["content"].startswith("## Context Summary")
    assert int(answer.headers["X-Ctx-Tokens-After"]) < 1024


async def test_a_block_kind_that_cannot_render_reads_in_the_common_layout(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"fragile": tenant_toml("sample_crashing")}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "fragile", conversation("Empire"))

    assert answer.headers["X-Ctx-Compacted"] == "1"
    summary = answer.forwarded[1]
    assert summary["content"].startswith("## Context Summary\n\n") and "Empire" in summary["content"]
    failed = {(line["kind"], line["method"], line["error"]) for line in logs if line["event"] == "plugin.kind_failed"}
    assert failed == {("sample_crashing", "render", "LookupError")}
