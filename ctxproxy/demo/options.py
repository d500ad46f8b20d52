"""``ctxproxy demo``'s command-line options: the choices come from the strategy registry and the
demo's protocol table, and impossible numbers are refused in the demo's own words."""

from __future__ import annotations

import argparse

from ctxproxy.config.issues import unknown_choice
from ctxproxy.config.models import MIN_CONTEXT_WINDOW
from ctxproxy.demo.protocols import PROTOCOLS
from ctxproxy.strategies.registry import builtin_registry

DEFAULT_STRATEGY = "rolling_summary"


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    strategies = ", ".join(builtin_registry())
    demo.add_argument("--conversation", help="JSON file: a list of {role, content} messages (default: generated)")
    demo.add_argument(
        "--turns", type=_turns, default=60, help="turns of the generated conversation, at least 1 (default 60)"
    )
    demo.add_argument(
        "--strategy",
        type=_strategy,
        default=DEFAULT_STRATEGY,
        help=f"compaction strategy: {strategies} (default {DEFAULT_STRATEGY})",
    )
    demo.add_argument(
        "--window",
        type=_window,
        default=8192,
        help=f"model context window in tokens, at least {MIN_CONTEXT_WINDOW} (default 8192)",
    )
    demo.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default="openai",
        help="the API the client and the local upstream speak: %(choices)s (default openai)",
    )


def _strategy(name: str) -> str:
    registry = builtin_registry()
    if name not in registry:
        raise argparse.ArgumentTypeError(unknown_choice("strategy", name, registry))
    return name


def _turns(text: str) -> int:
    turns = _integer(text)
    if turns < 1:
        raise argparse.ArgumentTypeError(f"the demo needs at least 1 turn, got {turns}")
    return turns


def _window(text: str) -> int:
    window = _integer(text)
    if window < MIN_CONTEXT_WINDOW:
        raise argparse.ArgumentTypeError(
            f"a model window of {window} tokens is too small: ctxproxy needs at least {MIN_CONTEXT_WINDOW}"
        )
    return window


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
