"""The session page, rendered from what the store holds (pure): which protocol the session speaks,
which requests its chart shows (the history keeps the newest 200), why each compaction ran, and
a memory score column only for a search, which has scores."""

from __future__ import annotations

import html
import re

from ctxproxy.inspector.session_page import SessionView, session_page
from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import MAX_HISTORY

KEY = SessionKey("default", "chat-1", "header")


def history(n: int, kinds: dict[int, str]) -> list[dict[str, object]]:
    return [
        {"at": 1_764_000_000.0 + i, "before": 1000 + i, "after": 900, "compacted": i in kinds, "retried": False}
        | ({"kind": kinds[i]} if i in kinds else {})
        for i in range(n)
    ]


def facts(page: str) -> dict[str, str]:
    table = page[page.index('id="facts"') : page.index("</table>", page.index('id="facts"'))]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table, re.S)
    return {name: re.sub(r"<[^>]+>", "", value) for name, value in rows}


def test_a_long_session_says_its_chart_shows_the_newest_requests_only() -> None:
    record = {"requests": 420, "protocol": "/v1/messages", "source": "header"}
    view = SessionView(KEY, record, history(MAX_HISTORY, {3: "planned", 9: "emergency", 10: "recovery"}), None, [], "")
    page = session_page(view, "csrf")
    said = "Requests #221–#420: the newest 200 of its 420 requests (a session's history keeps its newest 200)."
    assert html.escape(said) in page
    shown = facts(page)
    assert shown["protocol"] == "Anthropic Messages (POST /v1/messages)"
    assert shown["compactions (requests charted)"] == "1 planned, 1 emergency, 1 recovery"


def test_a_record_from_before_protocols_were_kept_says_it_does_not_know() -> None:
    page = session_page(SessionView(KEY, {"requests": 2}, history(2, {}), None, [], ""), "csrf")
    assert facts(page)["protocol"] == "—" and facts(page)["compactions (requests charted)"] == "none"
    assert "All its 2 requests." in page
