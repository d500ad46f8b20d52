"""What one rolling summary costs the extractive summariser, by history size.

    .venv/bin/python bench/summaries.py                          # at ~100 and ~3,000 messages
    .venv/bin/python bench/summaries.py --proxy-src /tmp/old     # the same with another ctxproxy/ tree

In-process, no HTTP: the synthetic LoCoMo conversation of bench/compaction.py, summarised as
``rolling_summary`` does at the 8k window — every ``--stride`` messages the range since the last
summary is folded into it (``update``, 1,200 tokens), the whole history through the request as
the task's ``context`` (read for repeated scaffolding). At each size one summariser first
summarises the history up to it (not timed, as a proxy that got there did along the way), then
``--summaries`` more are timed by the process's CPU. Prints the mean and median milliseconds per
summary and a digest of all the summaries' texts (equal digests: the same summaries).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"


def measure(messages: list[dict[str, Any]], size: int, args: argparse.Namespace) -> tuple[list[float], list[str]]:
    from ctxproxy.cache import CachePool
    from ctxproxy.summarize.base import SummaryTask
    from ctxproxy.summarize.extractive import ExtractiveSummarizer
    from ctxproxy.tokens import TokenCounter

    summarizer = ExtractiveSummarizer(TokenCounter(), cache=CachePool().lru("summary_analysis"))
    previous: str | None = None
    times: list[float] = []
    texts: list[str] = []
    ends = [size - args.stride, *range(size, size + args.stride * args.summaries, args.stride)]
    start = 1
    for i, end in enumerate(ends):
        flavour = "update" if previous else "fresh"
        task = SummaryTask(flavour, messages[start:end], previous, 1200, context=messages[: end + args.stride // 2])
        began = time.process_time()
        previous = summarizer.summarize_text(task)
        if i:
            times.append(time.process_time() - began)
        texts.append(previous)
        start = end
    return times, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 3000])
    parser.add_argument("--summaries", type=int, default=20, help="timed summaries per size")
    parser.add_argument("--stride", type=int, default=40, help="messages between two summaries")
    parser.add_argument("--proxy-src", type=Path, default=ROOT, help="directory holding the ctxproxy/ package to run")
    args = parser.parse_args()
    sys.path[:0] = [str(args.proxy_src.resolve()), str(ROOT / "bench")]
    import _locomo

    import ctxproxy

    longest = max(args.sizes) + args.stride * (args.summaries + 1)
    messages = _locomo.synthetic(_locomo.load(args.data), longest).messages
    print(f"ctxproxy from {Path(ctxproxy.__file__).parent}; {args.summaries} summaries every {args.stride} messages\n")
    print("| history | mean ms / summary | median | digest of the summaries |")
    print("|---|---|---|---|")
    for size in args.sizes:
        times, texts = measure(messages, size, args)
        digest = hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()[:12]
        mean, median = 1000 * statistics.fmean(times), 1000 * statistics.median(times)
        print(f"| ~{size:,} messages | {mean:.2f} | {median:.2f} | {digest} |")


if __name__ == "__main__":
    main()
