"""``ctxproxy demo``'s command-line options: the choices come from the strategy registry and the
demo's protocol table, and impossible numbers are refused in the demo's own words. ``--strategy``
and ``--window`` configure the demo's own proxy, so they are refused with ``--url`` (a running
proxy's config decides them), and ``--model`` only goes with ``--url``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from yarl import URL

from ctxproxy.config.issues import unknown_choice
from ctxproxy.config.models import MIN_CONTEXT_WINDOW
from ctxproxy.demo.protocols import PROTOCOLS
from ctxproxy.strategies.registry import builtin_registry

DEFAULT_STRATEGY = "rolling_summary"
DEFAULT_WINDOW = 8192


@dataclass(frozen=True)
class DemoOptions:
    conversation: str | None  # a JSON file, else a generated conversation of ``turns`` turns
    turns: int
    strategy: str
    window: int
    protocol: str
    url: str | None  # a running proxy's base URL, without /v1; None: the demo's own, offline
    model: str | None  # with ``url``: the model to ask the upstream for (default: the protocol's)


def demo_options(args: argparse.Namespace) -> DemoOptions:
    """The options of a parsed ``ctxproxy demo`` command line; a ``ValueError`` says which do not go together."""
    if args.url is not None and (args.strategy is not None or args.window is not None):
        raise ValueError(
            "--strategy and --window configure the demo's own proxy; with --url the running proxy's tenant "
            "config decides them (leave them out)"
        )
    if args.url is None and args.model is not None:
        raise ValueError("--model goes with --url: the demo's own upstream answers any model")
    return DemoOptions(
        conversation=args.conversation,
        turns=args.turns,
        strategy=args.strategy or DEFAULT_STRATEGY,
        window=args.window or DEFAULT_WINDOW,
        protocol=args.protocol,
        url=args.url,
        model=args.model,
    )


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    strategies = ", ".join(builtin_registry())
    demo.add_argument("--conversation", help="JSON file: a list of {role, content} messages (default: generated)")
    demo.add_argument(
        "--turns", type=_turns, default=60, help="turns of the generated conversation, at least 1 (default 60)"
    )
    demo.add_argument(
        "--strategy",
        type=_strategy,
        help=f"compaction strategy: {strategies} (default {DEFAULT_STRATEGY})",
    )
    demo.add_argument(
        "--window",
        type=_window,
        help=f"model context window in tokens, at least {MIN_CONTEXT_WINDOW} (default {DEFAULT_WINDOW})",
    )
    demo.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default="openai",
        help="the API the client and the local upstream speak: %(choices)s (default openai)",
    )
    demo.add_argument(
        "--url",
        type=_proxy_url,
        help="play against a running `ctxproxy serve` at this address (http://127.0.0.1:8080, or .../t/TENANT) "
        "instead of the demo's own proxy: its config and upstream answer, so each turn is a real model call",
    )
    demo.add_argument(
        "--model", help="with --url: the model to ask for (default gpt-4o-mini, or claude-haiku-4-5 for anthropic)"
    )


def _strategy(name: str) -> str:
    registry = builtin_registry()
    if name not in registry:
        raise argparse.ArgumentTypeError(unknown_choice("strategy", name, registry))
    return name


def _proxy_url(text: str) -> str:
    """A proxy's base URL, without a trailing ``/v1`` (the demo's paths include it)."""
    url = URL(text.strip())
    if url.scheme not in ("http", "https") or not url.host:
        raise argparse.ArgumentTypeError(
            f"expected the proxy's http(s) address, like http://127.0.0.1:8080; got {text!r}"
        )
    return str(url.with_query(None).with_fragment(None)).rstrip("/").removesuffix("/v1")


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
