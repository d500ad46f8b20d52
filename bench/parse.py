"""What parsing, checking and converting one request's body costs, per protocol, by history size.

    .venv/bin/python bench/parse.py                      # ~100 and ~3,000 messages, 20 requests each
    .venv/bin/python bench/parse.py --sizes 100 1000 3000 --requests 40

In-process, no HTTP: the synthetic LoCoMo conversation of bench/compaction.py (its system
message as each protocol's instructions, the rest alternating user and assistant) as a chat
completions, Messages, Responses and Gemini body, resent whole with one more message each
request, as a client does. Each body is read as the routes read it — with the app's incremental
loader (``ctxproxy.wire.incremental``: only what follows the previous body is parsed, and, for
Messages, Gemini and Responses, checked and converted) and, for comparison, in full — and the CPU
milliseconds per request (median) are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
import _locomo  # noqa: E402

from ctxproxy.cache import ByteLRU  # noqa: E402
from ctxproxy.pipeline.turn import Turn  # noqa: E402
from ctxproxy.wire.anthropic.adapter import parse_turn as parse_messages  # noqa: E402
from ctxproxy.wire.gemini.body import parse_turn as parse_gemini  # noqa: E402
from ctxproxy.wire.incremental import BodyLoader, RawBodies  # noqa: E402
from ctxproxy.wire.openai_chat.body import parse_body as parse_chat  # noqa: E402
from ctxproxy.wire.openai_responses.body import load_body as load_responses  # noqa: E402
from ctxproxy.wire.openai_responses.body import parse_turn as parse_responses  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
Body = Callable[[str, list[dict[str, str]]], dict[str, Any]]
Parse = Callable[[bytes, BodyLoader | None], Turn]


def _gemini_body(system: str, turns: list[dict[str, str]]) -> dict[str, Any]:
    contents = [{"role": "user" if t["role"] == "user" else "model", "parts": [{"text": t["content"]}]} for t in turns]
    return {"systemInstruction": {"parts": [{"text": system}]}, "contents": contents}


PROTOCOLS: dict[str, tuple[str, Body, Parse]] = {
    "chat": (
        "messages",
        lambda system, turns: {"model": "m", "messages": [{"role": "system", "content": system}, *turns]},
        parse_chat,  # its messages are checked by the pipeline, only those it has not seen
    ),
    "messages": (
        "messages",
        lambda system, turns: {"model": "m", "max_tokens": 100, "system": system, "messages": turns},
        parse_messages,
    ),
    "responses": (
        "input",
        lambda system, turns: {"model": "m", "instructions": system, "input": turns},
        lambda raw, load: parse_responses(raw, load_responses(raw, load), load),
    ),
    "gemini": ("contents", _gemini_body, lambda raw, load: parse_gemini(raw, "m", False, load)),
}


def measure(bodies: list[bytes], parse: Parse, field: str, incremental: bool) -> float:
    """The median CPU milliseconds of parsing each of ``bodies`` after the one before it."""
    loaders = RawBodies(ByteLRU(1 << 28))
    times = []
    for raw in bodies:
        load = loaders.loader("bench", None, field) if incremental else None
        start = time.process_time()
        turn = parse(raw, load)
        times.append(time.process_time() - start)
        if turn.as_sent is not None:
            raise SystemExit(f"not compactable: {turn.as_sent}")
    return 1000 * statistics.median(times[2:])  # the first two: a full parse, then locating it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 3000])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    every = _locomo.load(Path(args.data))
    messages = _locomo.synthetic(every, max(args.sizes) + args.requests + 3).messages
    system = str(messages[0]["content"])
    roles = ("user", "assistant")
    turns = [{"role": roles[i % 2], "content": str(m["content"])} for i, m in enumerate(messages[1:])]
    print("| protocol | messages | body KB | incremental ms | full ms |")
    print("|---|---|---|---|---|")
    for name, (field, body, parse) in PROTOCOLS.items():
        for size in args.sizes:
            bodies = [orjson.dumps(body(system, turns[: size + i])) for i in range(args.requests + 2)]
            kb = len(bodies[-1]) / 1000
            warm, full = measure(bodies, parse, field, True), measure(bodies, parse, field, False)
            print(f"| {name} | {size:,} | {kb:,.0f} | {warm:.2f} | {full:.2f} |")


if __name__ == "__main__":
    main()
