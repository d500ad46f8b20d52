"""Which proxy tools a request is offered, under which names, and where they go in ``tools``.

ctxproxy's own tools share the upstream request with the client's. Two rules keep that safe, for
every protocol (``proxy_tools``: the descriptions, schemas, names and order are protocol-neutral;
each protocol gives the ``ToolShape`` its definitions take and says when a request declines them):

- Names never clash: ours are ``ctxproxy_recall_page`` / ``ctxproxy_search_memory``, with ``_``
  appended until no client tool has the same name. The choice depends only on the client's tool
  names, so the same request always gets the same names (and the same prompt prefix).
- Position is stable: the client's tools come first, then ours in a fixed order. A prompt cache
  keyed on the prefix keeps hitting while the set of offered tools stays the same.

Whatever names a request gets (or no tools at all), the Contents Page it forwards names the same
(``ctxproxy.strategies.paged.contents.name_tools``): the model is never told to call a tool it does not have.

This module also shapes them for OpenAI's chat completions (``offer_tools``, ``with_tools``):
``{"type": "function", "function": {"name", "description", "parameters"}}``. Pure functions; the
caller decides *whether* there is something to recall (``available``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# Re-exported: the tools package names its tools with these.
from ctxproxy.vocabulary import RECALL_PAGE as RECALL_PAGE
from ctxproxy.vocabulary import RETRIEVE as RETRIEVE
from ctxproxy.vocabulary import SEARCH_MEMORY as SEARCH_MEMORY
from ctxproxy.vocabulary import TOOL_KINDS
from ctxproxy.vocabulary import WIRE_PREFIX as WIRE_PREFIX

ORDER = (RECALL_PAGE, SEARCH_MEMORY, RETRIEVE)  # the order ours are appended in, whatever ``available`` says
SEARCH_TOP_K_DEFAULT = 5
SEARCH_TOP_K_MAX = 10

_DESCRIPTIONS = {
    RECALL_PAGE: (
        "Read an archived page of this conversation, listed in the Contents Page, in full. Older parts of the "
        "conversation are archived and shown only as one-line summaries; call this when the answer depends on "
        "details of such a page."
    ),
    SEARCH_MEMORY: (
        "Search the long-term memory of this conversation and user (archived pages, remembered facts, decisions, "
        "constraints, code) for passages relevant to a query. Use it when the information is not in the visible "
        "conversation and the Contents Page does not say which page holds it."
    ),
    RETRIEVE: (
        "Get back a tool output that was shortened or removed from this conversation: give the ref its "
        "[ctxproxy: …] line names. With query, only the lines (or JSON rows) that contain the most of its words."
    ),
}
_PARAMETERS: dict[str, dict[str, Any]] = {
    RECALL_PAGE: {
        "type": "object",
        "properties": {
            "page_index": {
                "type": "integer",
                "minimum": 1,
                "description": "The page number as listed in the Contents Page.",
            }
        },
        "required": ["page_index"],
        "additionalProperties": False,
    },
    SEARCH_MEMORY: {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for: keywords or a short question."},
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": SEARCH_TOP_K_MAX,
                "default": SEARCH_TOP_K_DEFAULT,
                "description": f"How many results to return (default {SEARCH_TOP_K_DEFAULT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    RETRIEVE: {
        "type": "object",
        "properties": {
            "ref": {
                "type": "string",
                "description": 'The reference from the [ctxproxy: …] line, e.g. "r0123456789abcdef".',
            },
            "query": {"type": "string", "description": "Optional: words to look for; omit for the whole output."},
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
}


ToolShape = Callable[[str, str, dict[str, Any]], dict[str, Any]]
"""(wire name, description, JSON schema of the arguments) → one tool definition in a protocol's shape."""


@dataclass(frozen=True)
class ProxyTools:
    """The proxy tools offered to one request: wire name per internal name, and their definitions."""

    wire_names: Mapping[str, str]  # internal name → name on the wire, in ``ORDER``
    definitions: tuple[Mapping[str, Any], ...]

    def internal(self, wire_name: object) -> str | None:
        """The internal name (``RECALL_PAGE`` …) of one of our wire names, else None."""
        for internal, wire in self.wire_names.items():
            if wire == wire_name:
                return internal
        return None

    def wire(self, internal: str) -> str:
        return self.wire_names[internal]


def client_tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    """Every tool name the client defined: function and custom tools, and legacy ``functions``."""
    names: set[str] = set()
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping):
            for kind in TOOL_KINDS:
                spec = tool.get(kind)
                if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
                    names.add(spec["name"])
    functions = body.get("functions")
    for function in functions if isinstance(functions, list) else []:
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


def wire_name(internal: str, taken: frozenset[str]) -> str:
    name = WIRE_PREFIX + internal
    while name in taken:
        name += "_"
    return name


def _declines(body: Mapping[str, Any]) -> bool:
    """Requests where adding our tools would change what the client asked for.

    - ``tool_choice`` "none": the client wants text only; a dict (one named function, allowed_tools):
      the model may call only what the client chose. "required": the client wants a call of *its*
      tools, and a round of ours ending in the forced final answer would hand it text instead.
    - ``n`` > 1: the loop follows one choice; the others would be answered inconsistently.
    - legacy ``functions`` / ``function_call``: mixing them with ``tools`` is rejected upstream.
    """
    choice = body.get("tool_choice")
    if choice in ("none", "required") or isinstance(choice, Mapping):
        return True
    n = body.get("n")
    if n is not None and n != 1:
        return True
    return body.get("functions") is not None or body.get("function_call") is not None


def offer_tools(body: Mapping[str, Any], available: Sequence[str]) -> ProxyTools | None:
    """The proxy tools to add to this chat completions request, or None when none should be.

    ``available``: internal names that have something behind them now (e.g. no archived page yet
    means no ``recall_page``).
    """
    return proxy_tools(available, client_tool_names(body), function_tool, declined=_declines(body))


def proxy_tools(
    available: Sequence[str], taken: frozenset[str], shape: ToolShape, *, declined: bool = False
) -> ProxyTools | None:
    """The tools of ``available`` (in ``ORDER``) under names that are not in ``taken`` (the client's
    tool names), their definitions in ``shape``; None when there are none or the request ``declined``."""
    unknown = set(available) - set(ORDER)
    if unknown:
        raise ValueError(f"unknown proxy tools {sorted(unknown)}; known: {list(ORDER)}")
    offered = [name for name in ORDER if name in available]
    if not offered or declined:
        return None
    names = {internal: wire_name(internal, taken) for internal in offered}
    definitions = tuple(
        shape(names[internal], _DESCRIPTIONS[internal], copy.deepcopy(_PARAMETERS[internal])) for internal in offered
    )
    return ProxyTools(MappingProxyType(names), definitions)


def function_tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A chat completions tool definition."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def with_tools(body: Mapping[str, Any], tools: ProxyTools) -> dict[str, Any]:
    """A new body whose ``tools`` are the client's, then ours; every other field as the client sent it."""
    client = body.get("tools")
    own = list(client) if isinstance(client, list) else []
    return {**body, "tools": own + [copy.deepcopy(dict(definition)) for definition in tools.definitions]}
