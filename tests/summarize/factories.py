"""Tiny message factories and body helpers for the summariser tests."""

from __future__ import annotations

import re
from typing import Any

from ctxproxy.summarize.base import FILES_SECTION, SECTIONS


def user(text: Any, name: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": text}
    if name is not None:
        message["name"] = name
    return message


def assistant(text: Any = None, *calls: tuple[str, str], name: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": tool, "arguments": arguments}}
            for i, (tool, arguments) in enumerate(calls)
        ]
    if name is not None:
        message["name"] = name
    return message


def tool(text: str, call_id: str = "call_0") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def headings(body: str) -> list[str]:
    return re.findall(r"^### (.+)$", body, re.M)


def section(body: str, name: str) -> list[str]:
    """The lines under ``### name`` (empty when the section is absent)."""
    lines = body.splitlines()
    if f"### {name}" not in lines:
        return []
    start = lines.index(f"### {name}") + 1
    out = []
    for line in lines[start:]:
        if line.startswith("### "):
            break
        if line.strip():
            out.append(line)
    return out


def assert_contract_shape(body: str) -> None:
    """Only contract headings, in contract order, each with at least one line."""
    found = headings(body)
    order = [*SECTIONS, FILES_SECTION]
    assert found, body
    assert all(name in order for name in found), found
    assert found == sorted(found, key=order.index), found
    assert len(found) == len(set(found)), found
    for name in found:
        assert section(body, name), (name, body)


def completion_client(
    http: Any,
    base_url: str,
    *,
    api_key: str | None = "sk-sum",
    timeout: float = 5.0,
    client_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    completion: Any = None,
) -> Any:
    """The tenant upstream at ``base_url`` asked in ``completion``'s protocol (OpenAI chat
    completions unless given), on behalf of a client that sent ``client_headers``."""
    from ctxproxy.config.models import UpstreamConfig
    from ctxproxy.upstream.completion import CompletionClient
    from ctxproxy.wire.openai_chat.completion import CHAT_COMPLETION

    completion = completion or CHAT_COMPLETION
    upstream = UpstreamConfig(base_url=base_url, api_key=api_key, headers=headers or {})  # type: ignore[arg-type]
    return CompletionClient(http, upstream, completion, completion.credential(client_headers or {}), timeout)


def make_llm(
    http: Any,
    base_url: str,
    counter: Any,
    *,
    api_key: str | None = "sk-sum",
    timeout: float = 5.0,
    context_window: int = 128_000,
    authorization: str | None = None,
    client_headers: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    completion: Any = None,
    **llm: Any,
) -> Any:
    """An LLM summariser of ``summary-mini`` on the upstream at ``base_url`` (see
    ``completion_client``; ``authorization``: the client's ``Authorization`` header)."""
    from ctxproxy.summarize import ExtractiveSummarizer, LLMSummarizer

    client_headers = {**({"Authorization": authorization} if authorization else {}), **(client_headers or {})}
    client = completion_client(
        http,
        base_url,
        api_key=api_key,
        timeout=timeout,
        client_headers=client_headers,
        headers=headers,
        completion=completion,
    )
    return LLMSummarizer(
        client,
        model="summary-mini",
        counter=counter,
        context_window=context_window,
        fallback=ExtractiveSummarizer(counter),
        **llm,
    )
