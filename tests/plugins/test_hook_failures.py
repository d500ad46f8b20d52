"""A hook that raises, answers nonsense or takes too long is logged and ignored; the request
goes on as if it had answered nothing.

Note 003 lets extensions step into every compaction ("[如果有 extension handler → 可自定义摘要或
取消]"); ctxproxy runs a proxy for many clients, so an extension's failure must cost nothing but a
log line: each call has a deadline (``[plugins] hook_timeout``), its exception is reduced to its
type (its message could hold anything), and a veto or summary from a call that failed does not
count.
"""

from __future__ import annotations

from types import ModuleType

import structlog

from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import ask, conversation, events, plugins_toml, tenant_toml


async def test_raising_and_odd_hooks_are_logged_and_ignored(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    plugins = plugins_toml("sample_every", "sample_raising", "sample_odd", "sample_hooks")
    proxy = await make_proxy({"unlucky": tenant_toml()}, plugins)

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "unlucky", conversation("Topaz"))
        await proxy.settle()  # after_compact runs in the background

    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert answer.forwarded[1]["content"].startswith("## Sample summary")
    failed = sorted(
        (line["plugin"], line["hook"], line["error"]) for line in logs if line["event"] == "plugin.hook_failed"
    )
    assert failed == [
        ("sample_odd", "before_compact", "bad_answer"),
        ("sample_raising", "after_compact", "ValueError"),
        ("sample_raising", "before_compact", "RuntimeError"),
    ]
    assert not any(sample_plugin.SECRET in str(value) for line in logs for value in line.values())
    # The well-behaved plugin next to them was told of both events.
    assert len(events(sample_plugin, "before_compact", "unlucky")) == 1
    assert len(events(sample_plugin, "after_compact", "unlucky")) == 1


async def test_a_hook_past_its_deadline_is_logged_and_its_veto_does_not_count(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``sample_sleeping`` would veto every compaction after an hour; with ``hook_timeout = 0.2``
    it is given up on, and the compaction is made."""
    proxy = await make_proxy(
        {"patient": tenant_toml()}, plugins_toml("sample_every", "sample_sleeping", hook_timeout=0.2)
    )

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "patient", conversation("Rubinette"))
        await proxy.settle()  # after_compact runs in the background

    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert answer.forwarded[1]["content"].startswith("## Sample summary")
    failed = sorted(
        (line["plugin"], line["hook"], line["error"], line["timeout_s"])
        for line in logs
        if line["event"] == "plugin.hook_failed"
    )
    assert failed == [
        ("sample_sleeping", "after_compact", "timeout", 0.2),
        ("sample_sleeping", "before_compact", "timeout", 0.2),
    ]
    assert not [line for line in logs if line["event"] == "compaction.vetoed"]
