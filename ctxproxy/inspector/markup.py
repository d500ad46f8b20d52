"""HTML and SVG built from elements, escaped by construction.

``tag(name, *children, **attrs)`` escapes every child that is not already ``Html`` and every
attribute value with ``html.escape`` (quotes included), so a session id, a user name or a
summary that holds ``<script>`` is shown as text, never run. ``Html`` marks text that is
markup already (made by ``tag`` or ``raw``); nothing else is ever trusted. Pure.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TypeAlias

__all__ = ["Child", "Html", "esc", "join", "raw", "tag"]


class Html(str):
    """Markup: inserted as it is."""

    __slots__ = ()


Child: TypeAlias = "Html | str | int | float | None | Iterable[Child]"
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link"})


def esc(value: object) -> Html:
    """``value`` as text: markup passes through, anything else is escaped."""
    return value if isinstance(value, Html) else Html(html.escape(str(value), quote=True))


def raw(text: str) -> Html:
    """Markup written in this package (styles, fixed snippets); never a value from outside."""
    return Html(text)


def join(children: Iterable[Child]) -> Html:
    return Html("".join(_render(child) for child in children))


def _render(child: Child) -> str:
    if child is None:
        return ""
    if isinstance(child, str | int | float):
        return esc(child)
    return join(child)


def _attribute(name: str, value: object) -> str:
    name = name.rstrip("_").replace("_", "-")
    if value is True:
        return f" {name}"
    if value is False or value is None:
        return ""
    return f' {name}="{esc(value)}"'


def tag(name: str, /, *children: Child, **attrs: object) -> Html:
    """``<name attrs>children</name>``; ``class_="x"`` → ``class="x"``, ``data_n=1`` →
    ``data-n="1"``, ``True`` → a bare attribute, ``None``/``False`` → left out."""
    opened = f"<{name}{''.join(_attribute(k, v) for k, v in attrs.items())}>"
    if name in _VOID:
        return Html(opened)
    return Html(f"{opened}{join(children)}</{name}>")
