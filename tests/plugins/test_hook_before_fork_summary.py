"""``before_fork`` may cancel the branch summary of a fork or supply it.

Note 003, "Extension 钩子": "``session_before_fork`` — 提供自定义 branch summary，或取消" (before a
fork: provide a custom branch summary, or cancel it). ctxproxy asks once the branch summary is
planned and before it is written: a ``Veto()`` makes none, a ``UseSummary(text)`` is the branch
summary (within ``branch_summary_max_tokens``, else the summariser writes it and the log says
why). The answer holds for the fork: a later request of the new branch that sees the same fork
(through the stored checkpoints) gets the same answer without asking again. The hook keeps its
deadline and isolation: one that fails or is too slow costs nothing but a log line.

The sample hooks veto for tenants named ``branchveto…`` and supply the summary for
``branchsupply…`` (one far over the budget for ``branchtoolong``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import structlog

from ctxproxy.strategies.branch import BRANCH_HEADER, BRANCH_INTRO
from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import Answer, ask, conversation, events, plugins_toml, tenant_toml

PLUGINS = plugins_toml("sample_every", "sample_hooks")


def edited(messages: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    changed = list(messages)
    changed[index] = {**changed[index], "content": changed[index]["content"] + " (edited)"}
    return changed


def branch_summaries(answer: Answer) -> list[str]:
    return [m["content"] for m in answer.forwarded if str(m.get("content", "")).startswith(BRANCH_HEADER)]


async def fork_twice(proxy: Any, upstream: Upstream, tenant: str) -> tuple[Answer, Answer]:
    """Two checkpoints (10, then 18 made over it), then a fork at message 13 and a request that
    goes on from it: its session's newest checkpoint is still the one the fork left (18), so it
    sees the same fork again through the stored chain."""
    messages = conversation("Gala", pairs=9)  # 20 messages
    await ask(proxy, upstream, tenant, messages[:12])
    await ask(proxy, upstream, tenant, messages)
    branch = edited(messages[:15], 13)
    forked = await ask(proxy, upstream, tenant, branch)
    going_on = [*branch, {"role": "assistant", "content": "Gala first."}, {"role": "user", "content": "And then?"}]
    return forked, await ask(proxy, upstream, tenant, going_on)


async def test_a_veto_makes_no_branch_summary_for_that_fork(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 003's "取消" (cancel): no branch summary, now or for the requests of the new branch."""
    proxy = await make_proxy({"branchveto": tenant_toml()}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        forked, going_on = await fork_twice(proxy, upstream, "branchveto")

    (fork,) = events(sample_plugin, "before_fork", "branchveto")
    assert (fork.point, fork.abandoned_end, fork.kept_end, fork.max_tokens) == (13, 18, 10, 400)
    for answer in (forked, going_on):
        assert "X-Ctx-Branch-Summaries" not in answer.headers and branch_summaries(answer) == []
    # Seen again through the stored chain, the fork parts at the checkpoint both still share (10).
    vetoed = [(line["plugin"], line["at"]) for line in logs if line["event"] == "branch_summary.vetoed"]
    assert vetoed == [("sample_hooks", 13), ("sample_hooks", 10)]
    assert not [line for line in logs if line["event"] == "branch_summary"]


async def test_a_supplied_branch_summary_is_forwarded_and_kept(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 003's "提供自定义 branch summary": the hook's text is the branch summary, rendered as
    any (header, the note's "Earlier, before this point was revisited" introduction), inserted
    where the new branch parts, stored, and given to the requests that go on from it."""
    from ctxproxy_sample.hooks import branch_supplied

    proxy = await make_proxy({"branchsupply": tenant_toml()}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        forked, going_on = await fork_twice(proxy, upstream, "branchsupply")

    (fork,) = events(sample_plugin, "before_fork", "branchsupply")
    assert len(fork.branch) == 7  # messages 13..19 of the branch left, as this process saw them
    expected = f"{BRANCH_HEADER}\n\n{BRANCH_INTRO}\n\n{branch_supplied(fork)}"
    for answer in (forked, going_on):
        assert answer.headers["X-Ctx-Branch-Summaries"] == "1" and branch_summaries(answer) == [expected]
    at = forked.forwarded.index(next(m for m in forked.forwarded if m["content"] == expected))
    assert forked.forwarded[at + 1]["content"].endswith("(edited)")  # before the fork's first message
    (made,) = [line for line in logs if line["event"] == "branch_summary"]
    assert (made["summarizer"], made["saved"], made["at"]) == ("sample_hooks", True, 13)


async def test_a_supplied_branch_summary_over_the_budget_is_not_used(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A text longer than ``branch_summary_max_tokens`` (``event.max_tokens``) would crowd the
    window: the summariser writes the branch summary instead, and the log says whose and why."""
    proxy = await make_proxy({"branchtoolong": tenant_toml()}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        forked, _ = await fork_twice(proxy, upstream, "branchtoolong")

    (summary,) = branch_summaries(forked)
    assert "supplied by sample_hooks" not in summary and "Gala" in summary
    unused = [(line["plugin"], line["reason"]) for line in logs if line["event"] == "plugin.summary_unused"]
    assert unused == [("sample_hooks", "over_budget")]


async def test_a_supplied_branch_summary_where_none_is_made_is_not_used(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """With ``branch_summary_max_tokens = 0`` the hook is still told of the fork (``max_tokens``
    0 says that no branch summary is made); what it supplies is not used, and the log says so."""
    off = tenant_toml().replace(
        'summarizer = "extractive"\n', 'summarizer = "extractive"\nbranch_summary_max_tokens = 0\n'
    )
    proxy = await make_proxy({"branchsupplyoff": off}, PLUGINS)

    with structlog.testing.capture_logs() as logs:
        forked, _ = await fork_twice(proxy, upstream, "branchsupplyoff")

    (fork,) = events(sample_plugin, "before_fork", "branchsupplyoff")
    assert (fork.point, fork.max_tokens) == (13, 0)
    assert "X-Ctx-Branch-Summaries" not in forked.headers and branch_summaries(forked) == []
    unused = [(line["plugin"], line["reason"]) for line in logs if line["event"] == "plugin.summary_unused"]
    assert unused == [("sample_hooks", "no_branch_summary")]


async def test_a_failing_or_slow_before_fork_costs_the_branch_summary_nothing(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``sample_raising`` raises; ``sample_sleeping`` would veto after an hour and is given up on
    after ``hook_timeout``: both are logged, and the summariser writes the branch summary."""
    plugins = plugins_toml("sample_every", "sample_raising", "sample_sleeping", hook_timeout=0.2)
    proxy = await make_proxy({"unlucky": tenant_toml()}, plugins)

    with structlog.testing.capture_logs() as logs:
        forked, going_on = await fork_twice(proxy, upstream, "unlucky")

    for answer in (forked, going_on):
        (summary,) = branch_summaries(answer)
        assert "Gala" in summary
    failed = sorted(
        (line["plugin"], line["error"])
        for line in logs
        if line["event"] == "plugin.hook_failed" and line["hook"] == "before_fork"
    )
    assert failed == [("sample_raising", "RuntimeError"), ("sample_sleeping", "timeout")]
    assert not any(sample_plugin.SECRET in str(value) for line in logs for value in line.values())
