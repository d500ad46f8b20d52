"""Requests the real agent CLIs sent, kept as fixtures in ``tests/fixtures/agents/<client>/``.

Captured with ``bench/agent_clis.py --capture DIR`` (Claude Code 2.1.197 and Codex 0.171.0 against
a fake upstream on loopback), one JSON file per request: ``client``, ``scenario``, ``captured_as``
(the capture's step and request number), ``method``, ``path`` (with the query string), ``headers``
(lower-cased names; credentials dropped) and ``raw``, the body exactly as the CLI sent it (the
client's key replaced, were it ever in a body). The parsed body is derived from ``raw`` here, so a
replay sends the very bytes the CLI sent.

Claude Code (``claude_code/``): ``probe`` (the ``HEAD /`` before each run), ``oneshot`` (``claude
-p "say hi"``, default model), ``title`` (the title request of the tool task), ``tool_result`` (the
task's last request, carrying the results of its two Bash calls), ``continue`` (``claude -p
--continue``), ``older_continue`` (``--continue`` after the tool task, both with ``--model
claude-sonnet-4-5``). Codex (``codex/``): ``exec`` (``codex exec "say hi"``), ``tool_result`` (the
results of two ``exec_command`` calls going back), ``resume`` (``codex exec resume --last``),
``local_compaction`` (the request a custom provider's Codex compacts with), and through the
built-in OpenAI provider (``openai_base_url``): ``websocket`` (its WebSocket upgrade, tried first),
``remote_compaction`` (a ``compaction_trigger`` item last) and ``after_remote_compaction`` (the
turn carrying the ``compaction`` item).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "agents"
# Connection-level headers: the replaying client sets its own (a WebSocket test adds them back).
NOT_REPLAYED = frozenset({"connection", "upgrade", "keep-alive", "accept-encoding"})


@dataclass(frozen=True)
class AgentRequest:
    client: str
    scenario: str
    method: str
    path: str  # with the query string, e.g. /v1/messages?beta=true
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> dict[str, Any]:
        """The body parsed from :attr:`raw` ({} for a request without one)."""
        return json.loads(self.raw) if self.raw else {}

    def replay_headers(self, **extra: str) -> dict[str, str]:
        """The captured headers to send again (not the connection-level ones), with ``extra`` added."""
        kept = {name: value for name, value in self.headers.items() if name not in NOT_REPLAYED}
        return {**kept, **extra}


def load(path: Path) -> AgentRequest:
    data = json.loads(path.read_text(encoding="utf-8"))
    raw = data["raw"].encode("utf-8")
    return AgentRequest(data["client"], data["scenario"], data["method"], data["path"], data["headers"], raw)


def agent_requests(client: str | None = None) -> list[AgentRequest]:
    """Every fixture (of ``client``: ``claude_code`` or ``codex``), in file-name order."""
    pattern = f"{client}/*.json" if client else "*/*.json"
    return [load(path) for path in sorted(FIXTURES.glob(pattern))]


def agent_request(client: str, scenario: str) -> AgentRequest:
    return load(FIXTURES / client / f"{scenario}.json")
