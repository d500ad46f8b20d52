"""Tool outputs compressed, masked and retrieved (issue 23): by content type on real output, and
on a long coding-agent session replayed through ctxproxy, priced with a prompt cache.

    .venv/bin/python bench/tool_outputs.py             # ~3 minutes on 2 quiet cores
    .venv/bin/python bench/tool_outputs.py --quick     # 4 agent tasks, the default settings only

Part 1, by content type: every sample is real output produced now (``_tool_output_samples``:
``pytest -v`` with one failing test, ``git log --stat``, ``git diff``, ``git grep -n``, ``pip list
--format json``, ``pip show -f``, a LoCoMo conversation as JSON, a module read with line numbers).
For each: its kind, tokens before and after compression (cl100k, ``ctxproxy.tokens``), and its
questions answered by the compressed text (the answer string is in it) and by one
``ctxproxy_retrieve`` call with the obvious query (``tool_outputs.select`` clipped to
``[tools] result_max_tokens``, as the tool answers). CPU: process time of compressing all samples,
per MB of input.

Part 2, the agent session (``_agent``: git, pytest, pip on this repository, cut at 8,000
characters a result as agents cut them) replayed over chat completions and Messages through one
in-process ctxproxy with one tenant per setting — tool outputs off, and on with each
``keep_turns`` of ``--keep`` and each ``min_tokens`` of ``--min-tokens`` — all ``strategy =
"none"`` with ``[compaction.tool_outputs] enabled`` set, so nothing else rewrites the prompt. A
local upstream records each body; forwarded tokens, cached prefix and cost (uncached +
``--cache-discount`` × cached) are measured on them (``_prompt_cost``), and every body is
checked for a call without its result or a result
without its call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _agent  # noqa: E402
from _locomo import read_release  # noqa: E402
from _tool_output_samples import Sample, samples  # noqa: E402
from _tool_output_session import SessionResult, replay_session  # noqa: E402

from ctxproxy.config.models import DEFAULT_KEEP_TURNS, ToolOutputsConfig  # noqa: E402
from ctxproxy.tokens import TokenCounter  # noqa: E402
from ctxproxy.tool_outputs import compress, detect, select  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
TOOL = "ctxproxy_retrieve"
RESULT_MAX_TOKENS = 4000  # [tools] result_max_tokens' default
CPU_ROUNDS = 5
DEFAULT_MIN_TOKENS = ToolOutputsConfig().min_tokens


def by_type(found: Sequence[Sample], counter: TokenCounter) -> tuple[int, int, int]:
    """Print part 1; the questions asked, answered by the compressed texts, and by retrieval."""
    print("| output | kind | chars | tokens before | after | saved | answered compressed | by one retrieve |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    asked = in_compressed = in_retrieved = 0
    kinds: dict[str, list[int]] = {}
    for sample in found:
        made = compress(sample.text, TOOL)
        after = made.text if made is not None else sample.text
        before_t, after_t = counter.count_text(sample.text), counter.count_text(after)
        compressed = sum(q.answered_by(after) for q in sample.questions)
        retrieved = sum(
            q.answered_by(counter.clip_text(select(sample.text, q.query), RESULT_MAX_TOKENS)) for q in sample.questions
        )
        asked, in_compressed, in_retrieved = (
            asked + len(sample.questions),
            in_compressed + compressed,
            in_retrieved + retrieved,
        )
        n = len(sample.questions)
        kind = kinds.setdefault(detect(sample.text).value, [0, 0])
        kind[0], kind[1] = kind[0] + before_t, kind[1] + after_t
        print(
            f"| `{sample.name}` | {detect(sample.text).value} | {len(sample.text):,} | {before_t:,} | {after_t:,} | "
            f"{1 - after_t / before_t:.0%} | {compressed}/{n} | {retrieved}/{n} |"
        )
    print("\nby kind, all its samples: " + ", ".join(f"{k} {1 - a / b:.0%} saved" for k, (b, a) in kinds.items()))
    return asked, in_compressed, in_retrieved


def cpu(found: Sequence[Sample]) -> float:
    """Process seconds per MB of input, compressing every sample ``CPU_ROUNDS`` times."""
    size = sum(len(s.text.encode()) for s in found) * CPU_ROUNDS
    start = time.process_time()
    for _ in range(CPU_ROUNDS):
        for sample in found:
            compress(sample.text, TOOL)
    return (time.process_time() - start) / (size / 1e6)


def report_session(results: Sequence[SessionResult], discount: float) -> None:
    print(
        "| protocol | setting | requests | forwarded tokens | cached | cost (full-price tokens) | vs off "
        "| compressed / masked (last request) | broken pairs |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    off = {r.protocol: r.meter.cost(discount) for r in results if r.setting == "off"}
    for r in results:
        cost = r.meter.cost(discount)
        print(
            f"| {r.protocol} | {r.setting} | {r.meter.requests} | {r.meter.forwarded:,} | {r.meter.cached:,} | "
            f"{cost:,.0f} | {cost / off[r.protocol]:.0%} | {r.last_header or '-'} | {r.broken} |"
        )


async def main_async(args: argparse.Namespace) -> int:
    release = read_release(args.data)  # exits 2 with one line when the data is absent or unreadable
    counter = TokenCounter()
    with tempfile.TemporaryDirectory(prefix="ctx-tool-outputs-") as tmp:
        found = samples(release, Path(tmp))
        print(f"## By content type ({len(found)} real outputs)\n")
        asked, compressed, retrieved = by_type(found, counter)
        print(
            f"\nanswerable: {compressed}/{asked} from the compressed text ({compressed / asked:.0%}), "
            f"{retrieved}/{asked} with one retrieve ({retrieved / asked:.0%})"
        )
        print(f"CPU: {cpu(found) * 1000:.0f} ms per MB compressed\n")
        session = _agent.build(args.agent_tasks)
        print(f"## Agent session: {args.agent_tasks} tasks, {session.requests} requests, {session.commands} commands\n")
        results = await replay_session(session, args.keep, args.min_tokens, Path(tmp))
        report_session(results, args.cache_discount)
    broken = sum(r.broken for r in results)
    print(f"\nbroken call/result pairs: {broken}")
    return 0 if broken == 0 else 1


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    parser.add_argument("--agent-tasks", type=int, default=12, help="user requests in the agent session")
    parser.add_argument("--keep", type=int, nargs="+", default=[2, 4, 8], help="keep_turns settings replayed")
    parser.add_argument(
        "--min-tokens", type=int, nargs="+", default=[250, 500, 1000], help="min_tokens settings replayed"
    )
    parser.add_argument("--cache-discount", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true", help="4 agent tasks, the defaults only")
    args = parser.parse_args(argv)
    if args.quick:
        args.agent_tasks, args.keep, args.min_tokens = 4, [DEFAULT_KEEP_TURNS], [DEFAULT_MIN_TOKENS]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(main_async(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
