"""ctxproxy's tools offered to a Messages request, in Anthropic's shape (pure).

The tools are the protocol-neutral ones of ``ctxproxy.tools.definitions`` — descriptions, argument
schemas, names that never clash with the client's, their order — each defined as Anthropic defines a
tool, ``{"name", "description", "input_schema"}``
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use), and appended after
the client's ``tools`` (``ctxproxy.tools.definitions.with_tools``). Every tool a client can define
has a ``name`` — its own tools, Anthropic-defined client tools (``bash``, ``str_replace_based_edit_tool``
…) and server tools (``web_search`` …) alike — and ours never take one of them.

A request declines them (none are offered) when its ``tool_choice`` leaves the model no choice the
client did not make:

- ``{"type": "none"}``: the client wants text only;
- ``{"type": "any"}``: the client wants a call of one of *its* tools; a round of ours would end in
  ctxproxy's forced text answer and hand the client text instead;
- ``{"type": "tool", "name": …}``: the client wants that one tool called.

``{"type": "auto"}`` (the API's default) takes them, with or without ``disable_parallel_tool_use``:
that only limits how many calls one answer makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.tools.definitions import ProxyTools, proxy_tools

__all__ = ["DECLINING_CHOICES", "client_tool_names", "offer_tools", "tool_definition"]

DECLINING_CHOICES = frozenset({"none", "any", "tool"})  # ``tool_choice.type`` values that decline ours


def tool_definition(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A Messages tool definition."""
    return {"name": name, "description": description, "input_schema": schema}


def client_tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    """The name of every tool the client defined."""
    tools = body.get("tools")
    named = (tool.get("name") for tool in tools if isinstance(tool, Mapping)) if isinstance(tools, list) else ()
    return frozenset(name for name in named if isinstance(name, str))


def offer_tools(body: Mapping[str, Any], available: Sequence[str]) -> ProxyTools | None:
    """The proxy tools to add to this Messages request, or None when none should be (see the module).

    ``available``: internal names that have something behind them now."""
    choice = body.get("tool_choice")
    declined = isinstance(choice, Mapping) and choice.get("type") in DECLINING_CHOICES
    return proxy_tools(available, client_tool_names(body), tool_definition, declined=declined)
