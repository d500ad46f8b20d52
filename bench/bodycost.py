"""The request body's cost in process: bench/overhead.py's bodies parsed and identified as a
relayed chat request has them parsed and identified, each step timed by the thread's CPU.

    .venv/bin/python bench/bodycost.py
    .venv/bin/python bench/bodycost.py --base-src DIR --rounds 3   # DIR's code too, alternately

Bodies A (50 messages, ~20 KB) and B (200 messages, ~490 KB), each sent again whole (``same``) or
with a new last user message each time (``uniq``), as overhead.py sends them. Per workload a
fresh TokenCounter, known conversations and previous bodies (the app's caches, default budget):
``--warmup`` requests, then ``--requests`` timed ones, whose bodies are made before they are
timed. Printed: the median µs of ``parse_body`` (with the incremental loader, as
``server/chat.py`` calls it) and of ``identify`` (``pipeline/identify.py``). The client's, the
upstream's and aiohttp's work is not in these figures: bench/overhead.py measures the whole.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("CTXPROXY_BODYCOST_SRC") or Path(__file__).resolve().parent.parent)
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from overhead import make_body  # noqa: E402
from steps import _without_values  # noqa: E402

SIZES = {"A": (50, 380), "B": (200, 2480)}  # overhead.py's bodies: messages, characters each


def run(name: str, unique: bool, requests: int, warmup: int) -> tuple[float, float]:
    """Median µs of parsing and of identifying one workload's requests."""
    from ctxproxy.cache import CachePool
    from ctxproxy.pipeline.identify import identify
    from ctxproxy.session.known import KnownConversations
    from ctxproxy.tokens import TokenCounter, TokenSettings
    from ctxproxy.wire.incremental import RawBodies
    from ctxproxy.wire.openai_chat import OPENAI_CHAT
    from ctxproxy.wire.openai_chat.body import parse_body

    body = make_body(name, *SIZES[name], False)
    caches = CachePool()
    counter = TokenCounter(TokenSettings(), caches.lru("token_counts", max_entries=TokenSettings().cache_size))
    known = KnownConversations(caches.lru("known_conversations"))
    bodies = RawBodies(caches.lru("raw_bodies"))
    raws = [body.build(n if unique else None) for n in range(warmup + requests)]
    clock = time.thread_time_ns
    parsing: list[int] = []
    identifying: list[int] = []
    for raw in raws:
        started = clock()
        turn = parse_body(raw, bodies.loader("default", None))
        parsed = clock()
        identify(OPENAI_CHAT, turn, "default", None, counter, known)
        parsing.append(parsed - started)
        identifying.append(clock() - parsed)
    return statistics.median(parsing[warmup:]) / 1000, statistics.median(identifying[warmup:]) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="timed requests per workload")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--base-src", default="", help="also run on DIR's code, alternately")
    parser.add_argument("--rounds", type=int, default=3, help="with --base-src: alternating runs of each tree")
    args = parser.parse_args()
    if args.base_src:
        forwarded = _without_values(sys.argv[1:], ("--base-src", "--rounds"))
        for n in range(args.rounds):
            for label, tree in (("base", Path(args.base_src).resolve()), ("this", ROOT)):
                print(f"\n# {label} ({tree}), round {n + 1}, load average {os.getloadavg()[0]:.2f}", flush=True)
                env = {**os.environ, "CTXPROXY_BODYCOST_SRC": str(tree)}
                subprocess.run([sys.executable, str(Path(__file__).resolve()), *forwarded], check=True, env=env)
        return
    print("| body | workload | parse_body µs | identify µs |\n|---|---|---|---|")
    for name in SIZES:
        for unique in (False, True):
            parse, ident = run(name, unique, args.requests, args.warmup)
            print(f"| {name} | {'uniq' if unique else 'same'} | {parse:.1f} | {ident:.1f} |", flush=True)


if __name__ == "__main__":
    main()
