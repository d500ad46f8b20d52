"""What a Messages request's ``anthropic-beta`` header says of the window the client asked for.

``anthropic-beta`` names beta features, comma-separated, in one header or several. One of them
opens a larger window on the models that have it: ``context-1m-2025-08-07`` (Claude Code sends
it for its default model), 1,000,000 tokens. Any ``context-<n>k-<date>`` or
``context-<n>m-<date>`` is read the same way, whatever its date, so a later version of the beta
is honoured as it is; other betas (``context-management-…``) are not sizes. The beta is a
request, not a promise: a model or an account without the larger window makes the upstream
refuse a longer prompt, and the window it states is learned (``ctxproxy.compaction.learned``).
"""

from __future__ import annotations

import re

from multidict import MultiMapping

from ctxproxy.compaction.window_hints import WindowHint, narrowest, sized

__all__ = ["BETA_HEADER", "asked_window"]

BETA_HEADER = "anthropic-beta"
_CONTEXT_BETA = re.compile(r"context-([0-9]{1,9})([km])-\S+", re.IGNORECASE)


def asked_window(headers: MultiMapping[str]) -> WindowHint | None:
    """The window the ``anthropic-beta`` betas ask for (the smallest if several do), if any."""
    hints: list[WindowHint | None] = []
    for value in headers.getall(BETA_HEADER, ()):
        for beta in value.split(","):
            found = _CONTEXT_BETA.fullmatch(beta.strip())
            if found is not None:
                hints.append(sized(found[1], found[2], f"{BETA_HEADER} {found.group(0)}"))
    return narrowest(*hints)
