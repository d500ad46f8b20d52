"""ctxproxy's tools offered to a Responses request, as Responses function tools (pure).

The tools are the protocol-neutral ones of ``ctxproxy.tools.definitions`` — descriptions, argument
schemas, names that never clash with the client's, their order — each defined as the Responses API
defines a function tool, flat: ``{"type": "function", "name", "description", "parameters"}``, after
the client's ``tools``. Every named tool of the client's counts for the clash (functions, custom
tools, namespaced ones).

A request declines them when its ``tool_choice`` is anything but ``auto`` (or absent): ``none``
wants text, ``required`` a call of the client's tools, an object names the tools the model may
call (one function, a hosted tool, ``allowed_tools``), which ours are not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.tools.definitions import ProxyTools, proxy_tools

__all__ = ["client_tool_names", "offer_tools", "tool_definition"]


def tool_definition(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A Responses function tool."""
    return {"type": "function", "name": name, "description": description, "parameters": schema}


def client_tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    tools = body.get("tools")
    named = (tool.get("name") for tool in tools if isinstance(tool, Mapping)) if isinstance(tools, list) else ()
    return frozenset(name for name in named if isinstance(name, str))


def offer_tools(body: Mapping[str, Any], available: Sequence[str]) -> ProxyTools | None:
    """The proxy tools to add to this request, or None when none should be (see the module)."""
    declined = body.get("tool_choice") not in (None, "auto")
    return proxy_tools(available, client_tool_names(body), tool_definition, declined=declined)
