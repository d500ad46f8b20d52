"""ctxproxy's tools as Gemini function declarations, and where they go in ``tools`` (pure).

Ours are ``{"name", "description", "parametersJsonSchema"}`` declarations (their arguments'
JSON Schema as it is, which Gemini takes beside its own ``parameters`` subset), in one tool entry of
their own after the client's: ``{"functionDeclarations": [...]}``. Their names never clash with a
function the client declared in any entry (``functionDeclarations`` / ``function_declarations``).

A request declines them (nothing is offered) when adding them would change what the client asked
for or the API would refuse it: function calling turned off (``toolConfig.functionCallingConfig
.mode`` ``NONE``), or restricted to the client's functions (``ANY`` / ``VALIDATED`` with
``allowedFunctionNames``), and a request with a ``cachedContent``, which may not set ``tools``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxproxy.tools.definitions import ProxyTools, proxy_tools
from ctxproxy.wire.gemini.fields import field, has_field

__all__ = ["DECLARATIONS", "client_function_names", "declaration", "offer_tools", "with_tools"]

DECLARATIONS: Final = "functionDeclarations"


def declaration(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "parametersJsonSchema": parameters}


def client_function_names(body: Mapping[str, Any]) -> frozenset[str]:
    names: set[str] = set()
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        declared = field(tool, DECLARATIONS) if isinstance(tool, Mapping) else None
        for function in declared if isinstance(declared, list) else ():
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return frozenset(names)


def offer_tools(body: Mapping[str, Any], available: Sequence[str]) -> ProxyTools | None:
    return proxy_tools(available, client_function_names(body), declaration, declined=_declines(body))


def with_tools(body: dict[str, Any], definitions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``body`` with our ``definitions`` in a tool entry of their own after the client's."""
    if not definitions:
        return body
    tools = body.get("tools")
    return {**body, "tools": [*(tools if isinstance(tools, list) else []), {DECLARATIONS: list(definitions)}]}


def _declines(body: Mapping[str, Any]) -> bool:
    if has_field(body, "cachedContent") and field(body, "cachedContent") is not None:
        return True
    config = field(body, "toolConfig")
    calling = field(config, "functionCallingConfig") if isinstance(config, Mapping) else None
    if not isinstance(calling, Mapping):
        return False
    mode = calling.get("mode")
    return mode == "NONE" or (mode in ("ANY", "VALIDATED") and bool(field(calling, "allowedFunctionNames")))
