"""``after_compact``: a plugin hears of every checkpoint made, and can change nothing.

Note 003, "Extension 钩子": "``session_compact`` — compaction 完成后通知" (notified once a
compaction is done). The sample hooks' ``after_compact`` is a plain function: it runs in a worker
thread and is awaited before the request goes on.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

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

    (done,) = events(sample_plugin, "after_compact", "observed")
    assert done.session == answer.headers["X-Ctx-Session"]
    assert (done.strategy, done.reason, done.start, done.end) == ("sample_every", "every", 1, 10)
    assert str(done.end) == answer.headers["X-Ctx-Summarized"]
    assert done.summary_chars == len(answer.forwarded[1]["content"])
    assert (done.summarizer, done.saved) == ("extractive", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.end = 3  # type: ignore[misc]

    fits = await ask(proxy, upstream, "observed", [*messages, {"role": "assistant", "content": "Pack Honeycrisp."}])
    assert "X-Ctx-Compacted" not in fits.headers
    assert len(events(sample_plugin, "after_compact", "observed")) == 1  # told of compactions only
