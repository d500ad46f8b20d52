"""The window a client asks for, when it says: a hint pre-flight honours (``windows``). Pure.

A hint comes from the model's name, whatever the protocol, or from a protocol's own headers (its
wire adapter reads them: ``WireAdapter.window_asked``; Anthropic's ``anthropic-beta:
context-1m-…``). Two forms of name are read:

* a bracketed size ending the name, ``claude-sonnet-4-5[1m]``, ``my-model[256k]`` (Claude Code's
  form, honoured for any model). The name without it is the model's: it is what the tenant's
  ``[models]`` patterns, the built-in table and prices match. The model is still forwarded as the
  client named it (ctxproxy never rewrites it).
* a size ending the name itself, ``-<n>k`` or ``-<n>m``, before an OpenRouter variant
  (``:free``) if there is one: Moonshot's ``moonshot-v1-128k``, Qwen's ``qwen2.5-7b-instruct-1m``,
  ``gpt-3.5-turbo-16k``. Millions only up to :data:`MAX_NAMED_MILLIONS`: ``gemma-3-270m`` or
  ``smollm2-360m`` count parameters, not tokens.

OpenRouter's ``:extended`` asks for a larger window without saying how large: not a hint.

Sizes are decimal, ``32k`` = 32,000 and ``1m`` = 1,000,000: never more than the provider means
(Moonshot's 32k is 32,768 tokens, Qwen's 1M 1,010,000), so a hint never makes a prompt overflow.
When several hints apply, the smallest wins (:func:`narrowest`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["WindowHint", "hinted_name", "name_hint", "narrowest", "sized", "without_size_suffix"]

UNITS = {"k": 1_000, "m": 1_000_000}
MAX_HINT = 100_000_000  # tokens: a larger size is a mistake, not a window
MAX_NAMED_MILLIONS = 10  # "-<n>m" ending a name above this counts parameters ("-270m")
_BRACKET = re.compile(r"\[([0-9]{1,9})([km])\]\Z", re.IGNORECASE)
_ENDING = re.compile(r"-([0-9]{1,9})([km])(?::[a-z]+)?\Z", re.IGNORECASE)


@dataclass(frozen=True)
class WindowHint:
    tokens: int
    source: str  # what asked for it, for ``config check`` and logs: 'model name "[1m]"'

    @property
    def label(self) -> str:
        """The size as a name's bracketed suffix writes it (``1m``, ``256k``)."""
        millions, rest = divmod(self.tokens, UNITS["m"])
        return f"{millions}m" if millions and not rest else f"{self.tokens // UNITS['k']}k"


def sized(number: str, unit: str, source: str) -> WindowHint | None:
    """``number`` thousands (``k``) or millions (``m``) of tokens; None for 0 or an absurd size."""
    tokens = int(number) * UNITS[unit.lower()]
    return WindowHint(tokens, source) if 0 < tokens <= MAX_HINT else None


def narrowest(*hints: WindowHint | None) -> WindowHint | None:
    """The smallest of the hints given, None when there is none."""
    given = [hint for hint in hints if hint is not None]
    return min(given, key=lambda hint: hint.tokens) if given else None


def without_size_suffix(name: str) -> str:
    """``name`` without a bracketed size ending it (``claude-sonnet-4-5[1m]`` → ``claude-sonnet-4-5``)."""
    found = _BRACKET.search(name)
    return name if found is None else name[: found.start()]


def name_hint(model: str | None) -> WindowHint | None:
    """The window ``model``'s name asks for: the smaller of its bracketed suffix and a size
    ending the name without it."""
    name = (model or "").strip()
    bracket = _BRACKET.search(name)
    from_bracket = None if bracket is None else sized(bracket[1], bracket[2], f'model name "{bracket.group(0)}"')
    return narrowest(from_bracket, _ending_hint(without_size_suffix(name)))


def hinted_name(model: str | None, asked: WindowHint) -> str:
    """``model`` with the window a header asked for written as its bracketed suffix (the smaller
    one when the name had its own): a name that alone says the window, so that what is learned of
    a model asked for at 1M is kept apart from what is learned of it at its usual size, and its
    configured window can be found again from the name (``ctxproxy.compaction.learning``)."""
    name = model or ""
    own = _BRACKET.search(name)
    hint = narrowest(asked, None if own is None else sized(own[1], own[2], "")) or asked
    return f"{without_size_suffix(name)}[{hint.label}]"


def _ending_hint(name: str) -> WindowHint | None:
    found = _ENDING.search(name)
    if found is None:
        return None
    number, unit = found.groups()
    if unit.lower() == "m" and int(number) > MAX_NAMED_MILLIONS:
        return None
    return sized(number, unit, f'model name "-{number}{unit.lower()}"')
