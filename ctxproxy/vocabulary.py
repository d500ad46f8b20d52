"""The words of the OpenAI Chat Completions wire format that several modules must agree on.

ctxproxy's messages are OpenAI chat messages, so these are its own words too: the roles and the
sets of them that mean something, where a summary message is placed, the names of ctxproxy's own
tools, the kinds of tool a client defines, the paths called upstream, and the tokens every
prompt spends priming the reply. Constants and one sum; this module imports nothing of
ctxproxy, so every layer may use it. Another protocol's words belong in that protocol's module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

# --- roles -----------------------------------------------------------------------------------
ROLE_SYSTEM: Final = "system"
ROLE_DEVELOPER: Final = "developer"  # the newer name of a system message (o-series models)
ROLE_USER: Final = "user"
ROLE_ASSISTANT: Final = "assistant"
ROLE_TOOL: Final = "tool"
ROLE_FUNCTION: Final = "function"  # the legacy form of a tool result

ROLES: Final = (ROLE_SYSTEM, ROLE_DEVELOPER, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, ROLE_FUNCTION)
# Instructions to the model: forwarded verbatim, never summarised.
SYSTEM_ROLES: Final = frozenset({ROLE_SYSTEM, ROLE_DEVELOPER})
# A tool's answer: never separated from the assistant message that called it.
RESULT_ROLES: Final = frozenset({ROLE_TOOL, ROLE_FUNCTION})

# --- where a summary (or injected memory) message goes -----------------------------------------
# ``assistant_named``: an assistant message with a ``name``; the others: a message of that role
# (some providers reject ``name`` on assistant messages).
Placement = Literal["assistant_named", "assistant", "user", "system"]
PLACEMENT_ASSISTANT_NAMED: Final = "assistant_named"

# --- ctxproxy's own tools ----------------------------------------------------------------------
RECALL_PAGE: Final = "recall_page"
SEARCH_MEMORY: Final = "search_memory"
RETRIEVE: Final = "retrieve"  # a tool output ctxproxy compressed or masked, back whole (ctxproxy.tool_outputs)
WIRE_PREFIX: Final = "ctxproxy_"  # their names on the wire: ``ctxproxy_recall_page`` unless a client tool has it
# The kinds of tool object whose spec carries a ``name`` (``{"type": kind, kind: {"name": …}}``).
TOOL_KINDS: Final = ("function", "custom")

# --- paths under the upstream's base_url (which ends in /v1) ------------------------------------
CHAT_COMPLETIONS_PATH: Final = "/chat/completions"
EMBEDDINGS_PATH: Final = "/embeddings"

# --- tokens ------------------------------------------------------------------------------------
# Every reply is primed with ``<|start|>assistant<|message|>``: 3 tokens on top of the messages.
REPLY_PRIMING_TOKENS: Final = 3
# On a content part of a type the counter does not know (another protocol's opaque block): what
# the part costs, in the counter's tokens, set by the wire adapter that knows the block. A hint,
# not content: never sent upstream, not part of a message's digest.
PART_TOKENS_HINT: Final = "ctx_tokens"


def prompt_tokens(per_message: Iterable[int], tools: int = 0) -> int:
    """A prompt's tokens: its messages', the reply priming, and ``tools`` (tool definitions)."""
    return sum(per_message) + REPLY_PRIMING_TOKENS + tools
