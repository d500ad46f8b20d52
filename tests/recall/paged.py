"""A `paged` tenant that archives one page per request (two stay raw), and a conversation for it:
shared by the HTTP tests that need archived pages behind a Contents Page. One page per request
is the note's rule as it is, ``optimise = "tokens"``: with "cost" a request right after an
archival does not archive again while its prompt fits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RECALL = "ctxproxy_recall_page"
SEARCH = "ctxproxy_search_memory"
PAGED_TENANT = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "paged"
summarizer = "extractive"
optimise = "tokens"
[compaction.paged]
active_pages = 2
archive_batch = 1
# The archive alone: no memory cards, no injection (memory is on by default for paged).
[memory]
enabled = false
"""
FACTS = (
    "My locker code is 4417, please remember it.",
    "We moved the standup to 9:30 on Tuesdays.",
    "The staging database is called orders-stg.",
    "Our on-call rotation starts with Priya.",
    "The launch is planned for the 14th of March.",
)
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {}}},
}


def paged_history(turns: int = 5, facts: Sequence[str] = FACTS) -> list[dict[str, Any]]:
    """``turns`` answered pages (the facts in turn, repeating) and a question: a ``PAGED_TENANT``
    archives the older ones as pages 1, 2, …"""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(turns):
        messages.append({"role": "user", "content": facts[i % len(facts)]})
        messages.append({"role": "assistant", "content": f"Noted ({i + 1})."})
    messages.append({"role": "user", "content": "What is my locker code?"})
    return messages
