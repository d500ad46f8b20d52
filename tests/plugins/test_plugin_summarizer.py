"""A plugin's summariser, named by a tenant's ``[compaction] summarizer``, writes its summaries.

Note 003: "[如果有 extension handler → 可自定义摘要或取消]" — an extension may make the summary its
own way. The sample plugin's ``sample_digest`` says how many messages it summarised and what the
first one asked. It is held to the summariser's contract: when it fails, ctxproxy's extractive
summariser writes the summary and the log says why, never with the plugin's message.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import structlog

from ctxproxy.config import ConfigError, load_config
from tests.conftest import MakeProxy, Proxy, Upstream, write_config
from tests.plugins.sample import ask, conversation, plugins_toml, tenant_toml

SLIDING = "context_size = 10\ntail_keep_size = 2\ncompression_window_size = 4"


async def digest_proxy(make_proxy: MakeProxy) -> Proxy:
    """Tenant ``digest``: ``sliding_window`` plans, the plugin's ``sample_digest`` summarises."""
    return await make_proxy(
        {"digest": tenant_toml("sliding_window", "sample_digest", SLIDING)}, plugins_toml("sample_digest")
    )


async def test_a_tenant_naming_the_plugin_summariser_forwards_its_summary(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A built-in strategy (``sliding_window``) plans; the plugin writes the summary body."""
    proxy = await digest_proxy(make_proxy)
    messages = conversation("Braeburn")

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "digest", messages)

    assert answer.headers["X-Ctx-Summarized"] == "10"
    summary = answer.forwarded[1]["content"]
    first = messages[1]["content"][:40]
    assert summary == f"## Context Summary\n\n### Key facts\n- sample digest of 9 messages; first: {first}"
    assert answer.forwarded[2:] == messages[10:]
    (compaction,) = [line for line in logs if line["event"] == "compaction"]
    assert compaction["summarizer"] == "sample_digest"


async def test_a_failing_plugin_summariser_falls_back_to_the_extractive_one(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    from ctxproxy_sample.summarizer import FAIL

    proxy = await digest_proxy(make_proxy)
    messages = conversation("Jonagold")
    messages[3] = {"role": "user", "content": f"{FAIL}, row 2: how many crates of Jonagold apples?"}

    with structlog.testing.capture_logs() as logs:
        answer = await ask(proxy, upstream, "digest", messages)

    assert answer.headers["X-Ctx-Compacted"] == "1"
    summary = answer.forwarded[1]["content"]
    assert summary.startswith("## Context Summary") and "sample digest" not in summary
    assert "Jonagold" in summary  # the extractive summary of the same range
    fallbacks = [line for line in logs if line["event"] == "summary.plugin_fallback"]
    assert [(f["plugin"], f["reason"]) for f in fallbacks] == [("sample_digest", "RuntimeError")]
    assert not any("refused" in str(value) for line in logs for value in line.values())
    (compaction,) = [line for line in logs if line["event"] == "compaction"]
    assert compaction["summarizer"] == "extractive"


def test_an_unknown_summariser_is_a_config_error_naming_the_plugin_ones(
    sample_plugin: ModuleType, tmp_path: Path
) -> None:
    text = tenant_toml("sliding_window", "sample_digst", SLIDING).replace("{upstream}", "http://x.test")
    root = write_config(tmp_path, {"digest": text})
    with pytest.raises(ConfigError) as caught:
        load_config(root, {})
    (issue,) = caught.value.issues
    assert issue.key == "compaction.summarizer"
    assert issue.reason == (
        "unknown summarizer 'sample_digst' (available: llm, extractive, sample_digest); did you mean `sample_digest`?"
    )
