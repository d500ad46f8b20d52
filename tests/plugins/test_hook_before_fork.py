"""``before_fork``: a plugin hears when a conversation forks, once per fork.

Note 003, "Extension 钩子": "``session_before_fork`` — 提供自定义 branch summary，或取消"; and
§4: "当用户跳到 session 树的另一个分支时，旧分支的工作上下文会丢失" (when the user jumps to another
branch of the session tree, the old branch's context is lost). A proxy sees a branch when the
client resends a history that does not carry on the previous one (``ctxproxy.session.fork``, the
detection the branch summaries use): an earlier message edited, or a shorter history going on
differently. The hook is told what the branch left held (its messages, the checkpoint it had)
and what the request keeps; its answer may veto or supply the branch summary
(``test_hook_before_fork_summary.py``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from ctxproxy.strategies.branch import BRANCH_HEADER
from tests.conftest import MakeProxy, Upstream
from tests.plugins.sample import ask, conversation, events, plugins_toml, tenant_toml

PLUGINS = plugins_toml("sample_every", "sample_hooks")


def edited(messages: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    changed = list(messages)
    changed[index] = {**changed[index], "content": changed[index]["content"] + " (edited)"}
    return changed


@pytest.mark.parametrize("how", ["edited", "shorter"])
async def test_a_resent_history_that_leaves_the_checkpoint_tells_before_fork_once(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream, how: str
) -> None:
    """Note 003's "跳到 session 树的另一个分支" (jumping to another branch): the abandoned checkpoint, its summary, and where the request
    still agrees with the chain (nowhere here); a request going on from the fork is no new fork.

    A conversation that names nobody must share its first two user messages with the branch it
    left (two strangers who open alike share a session key): the edit is to the third."""
    proxy = await make_proxy({"forks": tenant_toml(options="every = 6\nkeep = 2")}, PLUGINS)
    messages = conversation("Boskoop")
    first = await ask(proxy, upstream, "forks", messages)
    assert first.headers["X-Ctx-Summarized"] == "10"
    going_on = [*messages, {"role": "assistant", "content": "Boskoop."}, {"role": "user", "content": "And then?"}]
    await ask(proxy, upstream, "forks", going_on)
    assert events(sample_plugin, "before_fork", "forks") == []

    branch = edited(messages[:6], 5) if how == "edited" else [*messages[:4], {"role": "user", "content": "Start over."}]
    forked = await ask(proxy, upstream, "forks", branch)

    (fork,) = events(sample_plugin, "before_fork", "forks")
    point = len(branch) - 1
    assert (fork.session, fork.messages, fork.point) == (forked.headers["X-Ctx-Session"], len(branch), point)
    assert (fork.abandoned_end, fork.kept_end) == (10, None)
    assert fork.abandoned_summary == first.forwarded[1]["content"]
    assert list(fork.branch) == going_on[point:] and fork.max_tokens == 400
    assert "X-Ctx-Summarized" not in forked.headers and forked.headers["X-Ctx-Branch-Summaries"] == "1"
    assert [m for m in forked.forwarded if not str(m["content"]).startswith(BRANCH_HEADER)] == branch

    on_the_branch = [*branch, {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "Next?"}]
    await ask(proxy, upstream, "forks", on_the_branch)
    assert len(events(sample_plugin, "before_fork", "forks")) == 1


async def test_a_fork_between_two_checkpoints_keeps_the_older_one(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """An edit after the first checkpoint's end: the request still begins with that checkpoint
    (``kept_end``), and is forwarded with it."""
    proxy = await make_proxy({"forks": tenant_toml()}, PLUGINS)
    messages = conversation("Reinette", pairs=9)  # 20 messages
    first = await ask(proxy, upstream, "forks", messages[:12])
    second = await ask(proxy, upstream, "forks", messages)
    assert (first.headers["X-Ctx-Summarized"], second.headers["X-Ctx-Summarized"]) == ("10", "18")

    branch = edited(messages[:15], 13)
    forked = await ask(proxy, upstream, "forks", branch)

    (fork,) = events(sample_plugin, "before_fork", "forks")
    assert (fork.abandoned_end, fork.kept_end, fork.messages) == (18, 10, 15)
    assert forked.headers["X-Ctx-Summarized"] == "10"
