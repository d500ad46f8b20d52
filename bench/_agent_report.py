"""bench/agent_clis.py's tables (Markdown): one row per CLI run, and one cell per session and
strategy."""

from __future__ import annotations

import collections
from dataclasses import dataclass

from _agent_runs import Ran
from _agent_tap import Seen


@dataclass(frozen=True)
class Row:
    ran: Ran
    strategy: str
    upstream_requests: int
    seen: list[Seen]  # what the CLI got back for this run, request by request

    @property
    def compacted(self) -> bool:
        return any(s.ctx.get("x-ctx-compacted") == "1" for s in self.seen)

    def statuses(self) -> str:
        counts = collections.Counter(s.status for s in self.seen)
        return " ".join(f"{status}×{n}" if n > 1 else str(status) for status, n in sorted(counts.items()))

    def ctx(self) -> str:
        """The largest prompt ctxproxy saw in the run, before → after, and C if any compacted."""
        counted = [s.ctx for s in self.seen if "x-ctx-tokens-before" in s.ctx]
        if not counted:
            return "-"
        peak = max(counted, key=lambda c: int(c["x-ctx-tokens-before"]))
        return f"{peak['x-ctx-tokens-before']}→{peak.get('x-ctx-tokens-after', '?')}" + (" C" if self.compacted else "")


def _markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def runs_table(rows: list[Row]) -> str:
    head = ["client", "scenario", "strategy", "exit", "upstream saw", "client got", "X-Ctx-Strategy",
            "tokens before→after", "worked", "s"]  # fmt: skip
    cells = [
        [
            r.ran.client,
            r.ran.scenario,
            r.strategy,
            str(r.ran.exit_code),
            str(r.upstream_requests),
            r.statuses(),
            ",".join(sorted({s.ctx["x-ctx-strategy"] for s in r.seen if "x-ctx-strategy" in s.ctx})) or "-",
            r.ctx(),
            "yes" if r.ran.worked else "NO",
            f"{r.ran.seconds:.1f}",
        ]  # fmt: skip
        for r in rows
    ]
    return _markdown(head, cells)


def sessions_table(rows: list[Row], strategies: list[str]) -> str:
    """Per session, per strategy: runs that worked of those run, ``C`` when one compacted."""
    sessions = list(dict.fromkeys(r.ran.session for r in rows))
    cells = []
    for session in sessions:
        line = [session]
        for strategy in strategies:
            mine = [r for r in rows if r.ran.session == session and r.strategy == strategy]
            worked = sum(r.ran.worked for r in mine)
            line.append(f"{worked}/{len(mine)}" + (" C" if any(r.compacted for r in mine) else ""))
        cells.append(line)
    return _markdown(["session", *strategies], cells)
