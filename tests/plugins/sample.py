"""What the sample plugin's tests share: installing it, tenants, conversations, one request."""

from __future__ import annotations

import shutil
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import openai

from tests.conftest import Proxy, Upstream

SOURCE = Path(__file__).parent / "sample_plugin"
MODEL = "ctx-test-model"
SYSTEM = {"role": "system", "content": "You help a small orchard plan its harvest."}


def install(source: Path, site: Path) -> None:
    """Install the plugin at ``source`` into ``site`` as a wheel installer would (``tests/plugins/conftest.py``)."""
    pyproject = tomllib.loads((source / "pyproject.toml").read_text())
    project = pyproject["project"]
    for package in pyproject["tool"]["setuptools"]["packages"]:
        shutil.copytree(source / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    sections = [
        "\n".join([f"[{group}]", *(f"{name} = {target}" for name, target in points.items())])
        for group, points in project["entry-points"].items()
    ]
    (info / "entry_points.txt").write_text("\n\n".join(sections) + "\n")


def events(hooks: ModuleType, name: str, tenant: str) -> list[Any]:
    """What the sample hooks were told of ``name`` for ``tenant``."""
    return [event for told, event in hooks.EVENTS if told == name and event.tenant == tenant]


def tenant_toml(
    strategy: str = "sample_every",
    summarizer: str = "extractive",
    options: str = "every = 4\nkeep = 2",
    window: int = 100_000,
) -> str:
    table = f"[compaction.{strategy}]\n{textwrap.dedent(options)}\n" if options else ""
    return (
        f'default_context_window = {window}\n[upstream]\nbase_url = "{{upstream}}"\n'
        f'[compaction]\nstrategy = "{strategy}"\nsummarizer = "{summarizer}"\n{table}'
    )


def plugins_toml(*enabled: str, hook_timeout: float | None = None) -> str:
    names = ", ".join(f'"{name}"' for name in enabled)
    timeout = f"hook_timeout = {hook_timeout}\n" if hook_timeout is not None else ""
    return f"[plugins]\nenabled = [{names}]\n{timeout}"


def conversation(topic: str, pairs: int = 5, first: int = 1) -> list[dict[str, Any]]:
    """The system prompt, ``pairs`` user/assistant turns about ``topic``, and a question."""
    messages: list[dict[str, Any]] = [SYSTEM]
    for n in range(first, first + pairs):
        messages.append({"role": "user", "content": f"{topic}, row {n}: how many crates of apples by week {n + 30}?"})
        messages.append({"role": "assistant", "content": f"Row {n} gives about {n * 12} crates of {topic} apples."})
    messages.append({"role": "user", "content": f"So what do we pack first for {topic}?"})
    return messages


@dataclass(frozen=True)
class Answer:
    headers: Mapping[str, str]
    forwarded: list[dict[str, Any]]  # the messages that reached the upstream


async def ask(proxy: Proxy, upstream: Upstream, tenant: str, messages: Sequence[dict[str, Any]]) -> Answer:
    """One chat request through the proxy with the openai SDK, as tenant ``tenant`` (by path)."""
    async with openai.AsyncOpenAI(base_url=proxy.url(f"/t/{tenant}/v1"), api_key="sk-client", max_retries=0) as client:
        raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=list(messages))  # type: ignore[arg-type]
    raw.parse()
    return Answer(raw.headers, upstream.fake.chat_requests()[-1].json()["messages"])
