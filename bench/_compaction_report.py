"""bench/compaction.py's Markdown: the cost figure per workload, today's columns beside it, the
proxy's CPU, and the aims of issue 22."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from _replay import ReplayStats
from _workloads import ClientSide, Workload

NARROW = ("sliding_window", "rounds", "paged")  # held to 50 % of none where the history is long


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def aim(ok: bool) -> str:
    return "met" if ok else "**missed**"


def window_name(window: int) -> str:
    return f"{window // 1000}k" if window % 1000 == 0 else f"{window / 1024:g}k"


@dataclass(frozen=True)
class Run:
    """Everything one replay made, keyed by (workload, strategy, window)."""

    workloads: Sequence[Workload]
    clients: Mapping[str, ClientSide]
    strategies: Sequence[str]
    windows: Sequence[int]
    stats: Mapping[tuple[str, str, int], ReplayStats]
    discount: float

    def of(self, workload: str, strategy: str, window: int) -> ReplayStats:
        return self.stats[(workload, strategy, window)]

    def vs_none(self, s: ReplayStats) -> float | None:
        none = self.stats.get((s.workload, "none", s.window))
        return None if none is None else s.meter.cost(self.discount) / none.meter.cost(self.discount)

    def vs_floor(self, s: ReplayStats) -> float:
        return s.meter.cost(self.discount) / self.clients[s.workload].meter.floor

    def long_history(self, workload: str, window: int) -> bool:
        """The conversations' histories are at least twice the window, on average."""
        final = self.clients[workload].final
        return sum(final) / len(final) >= 2 * window


def _emergency(s: ReplayStats) -> str:
    share = s.emergency_share
    return "–" if share is None else f"{s.kinds.get('emergency', 0)}/{s.compactions}"


def _cell(run: Run, s: ReplayStats) -> str:
    ratio = run.vs_none(s)
    cost = "–" if ratio is None else f"**{pct(ratio)}**"
    over = f"{s.over_window}" + (f" ({s.failed} failed)" if s.failed else "")
    return f"{cost} · {run.vs_floor(s):.2f}× · {s.meter.extends}/{s.meter.pairs} · {_emergency(s)} · {over}"


def report_figure(run: Run) -> None:
    d = run.discount
    print(f"## Cost with a prompt cache (discount {d:g})\n")
    print(
        "Each cell: **cost vs `none`** (cache-priced: uncached tokens + "
        f"{d:g} × tokens of the leading units byte-identical to the previous forwarded prompt of the "
        "conversation; tools, system and each message are units) · cost vs the floor (each client request paying "
        "only its new tokens, at full price) · requests that extend the previous forwarded prompt (n/N pairs) · "
        "emergency compactions / all compactions (the proxy's `compaction` log events) · prompts over the window "
        "(forwarded tokens + max_tokens > window).\n"
    )
    for w in run.workloads:
        client = run.clients[w.key]
        print(f"### {w.title}\n")
        print(
            f"{len(w.conversations)} conversation(s), {w.requests:,} requests per strategy and window; full history "
            f"{_sizes(client.final)} tokens; forwarded as sent (no compaction) the client's requests cost "
            f"{client.meter.cost(d) / client.meter.floor:.2f}× the floor "
            f"({client.meter.extends}/{client.meter.pairs} extend the previous one).\n"
        )
        print("| strategy | " + " | ".join(window_name(x) for x in run.windows) + " |")
        print("|---|" + "---|" * len(run.windows))
        for strategy in run.strategies:
            cells = [_cell(run, run.of(w.key, strategy, x)) for x in run.windows]
            print(f"| {strategy} | " + " | ".join(cells) + " |")
        print()


def _sizes(final: Sequence[int]) -> str:
    if len(final) == 1:
        return f"{final[0]:,}"
    return f"{min(final):,}–{max(final):,} (mean {sum(final) // len(final):,})"


def report_details(run: Run) -> None:
    print("## Today's columns\n")
    print(
        "Per workload, window and strategy: forwarded tokens over the client's (all requests); the peak forwarded "
        "prompt (the client's prompt of that request); prompts over the window; prefix kept: of the consecutive "
        "request pairs with no compaction in between, those whose prompts agree up to the previous one's last "
        "unit; pairs with a compaction in between; cached tokens over forwarded tokens; the proxy's compactions "
        "by kind.\n"
    )
    print(
        "| workload | window | strategy | forwarded / full | peak (full) | over window | prefix kept | "
        "pairs with a compaction | cached / forwarded | compactions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in run.workloads:
        full = run.clients[w.key].meter.forwarded
        for x in run.windows:
            for strategy in run.strategies:
                s = run.of(w.key, strategy, x)
                m = s.meter
                kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.kinds.items())) or "0"
                print(
                    f"| {w.key} | {window_name(x)} | {strategy} | {pct(m.forwarded / full)} | {s.peak:,} "
                    f"({s.peak_full:,}) | {s.over_window} | {s.hits_plain}/{s.pairs_plain} | {s.pairs_compacted} "
                    f"| {pct(m.cached / max(m.forwarded, 1))} | {kinds} |"
                )
    print()
    problems = [s for s in run.stats.values() if s.failed or s.header_mismatch]
    for s in problems:
        print(
            f"- {s.workload} {window_name(s.window)} {s.strategy}: {s.failed} failed requests "
            f"({'; '.join(s.errors)}), {s.header_mismatch} with X-Ctx-Tokens-After ≠ the count of the forwarded body"
        )
    if not problems:
        print(
            "- Every request was answered; on chat completions `X-Ctx-Tokens-After` agrees with the count of "
            "every forwarded body."
        )
    print()


def report_cpu_per_strategy(run: Run, cpu: Mapping[str, float]) -> None:
    print(
        "Proxy CPU per request over the whole replay (one process per strategy and window, all replaying at once, "
        "log level info):\n"
    )
    print("| strategy | requests | CPU / request |")
    print("|---|---|---|")
    for strategy in run.strategies:
        n = sum(s.meter.requests + s.failed for s in run.stats.values() if s.strategy == strategy)
        print(f"| {strategy} | {n:,} | {1000 * cpu[strategy] / max(n, 1):.2f} ms |")
    print()


def _misses(checks: Sequence[tuple[bool, str]]) -> str:
    missed = [what for ok, what in checks if not ok]
    head = f"{aim(not missed)} (met in {len(checks) - len(missed)} of {len(checks)})"
    return head + (": missed by " + "; ".join(missed) if missed else "")


def report_aims(run: Run) -> None:
    """Issue 22's aims, each over every (workload, window, strategy) it names."""
    cost, narrow, extend, emergency, over, split = [], [], [], [], [], []
    for s in run.stats.values():
        where = f"{s.strategy} {window_name(s.window)} {s.workload}"
        ratio = run.vs_none(s)
        if s.strategy != "none" and ratio is not None:
            cost.append((ratio <= 0.9, f"{where} {pct(ratio)}"))
            if s.strategy in NARROW and (run.long_history(s.workload, s.window) or s.window >= 200_000):
                narrow.append((ratio <= 0.5, f"{where} {pct(ratio)}"))
        if s.workload == "locomo" and s.window >= 200_000:
            share = s.meter.extends / max(s.meter.pairs, 1)
            extend.append((share >= 0.9, f"{where} {pct(share)}"))
        if s.strategy != "none" and s.compactions:
            share = s.emergency_share or 0.0
            emergency.append((share <= 0.05, f"{where} {pct(share)} of {s.compactions}"))
        if s.strategy == "cut_point" and s.compactions:
            share = s.split_turns / s.compactions
            split.append((share <= 0.1, f"{where} {s.split_turns} of {s.compactions}"))
        over.append((s.over_window == 0 and not s.failed, f"{where} {s.over_window} over, {s.failed} failed"))
    print("## Aims (issue 22)\n")
    print(f"- Every strategy costs at most 90 % of `none`: {_misses(cost)}")
    print(
        "- `sliding_window`, `rounds`, `paged` at most 50 % of `none` where the history is at least twice the "
        f"window (on average) or at 200k: {_misses(narrow)}"
    )
    print(f"- At 200k on LoCoMo, ≥ 90 % of requests extend the previous prompt: {_misses(extend)}")
    print(
        "- Emergency compactions ≤ 5 % of all compactions (strategies other than `none`, whose every compaction "
        f"is the emergency cut by design; where there were compactions): {_misses(emergency)}"
    )
    print(f"- Prompts over the window: 0 (and no failed request): {_misses(over)}")
    print(f"- `cut_point` split-turn summaries ≤ 10 % of its compactions (issue 27): {_misses(split)}")
    print("- Recall figures: `bench/recall.py`, not run here.\n")
