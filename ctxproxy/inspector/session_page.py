"""The session page: the protocol it speaks, its requests as a chart (the newest
``MAX_HISTORY``, saying so when there were more; each compaction marked with why it ran), its
checkpoints, Contents Page, archived pages and memory cards, and the form that deletes it. Pure."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.inspector.charts import ChartPoint, tokens_chart
from ctxproxy.inspector.layout import card, csrf_field, document, search_form, table, url
from ctxproxy.inspector.markup import Html, join, tag
from ctxproxy.inspector.pages import when
from ctxproxy.inspector.queries import MemoryRow
from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import COMPACTION_KINDS, MAX_HISTORY

# The paths a session's client posts to (its record's ``protocol``), as a person names them.
PROTOCOLS = {"/v1/chat/completions": "OpenAI chat completions", "/v1/messages": "Anthropic Messages"}


@dataclass(frozen=True)
class SessionView:
    key: SessionKey
    record: dict[str, Any] | None
    history: list[dict[str, Any]]
    detail: dict[str, Any] | None  # queries.session_detail
    memories: list[MemoryRow]
    memory_query: str


def chart_points(history: Sequence[dict[str, Any]], requests: Any = None) -> list[ChartPoint]:
    """The recorded requests as chart points, labelled with their number in the session (the
    history keeps the newest ones: the first shown is number ``requests - len(history) + 1``)."""
    first = requests - len(history) + 1 if isinstance(requests, int) and requests >= len(history) else 1
    return [
        ChartPoint(
            e["before"],
            e["after"],
            e["compacted"],
            e["retried"],
            f"#{first + i}",
            time.strftime("at %Y-%m-%d %H:%M:%S UTC", time.gmtime(e["at"])),
            e.get("kind", ""),
        )
        for i, e in enumerate(history)
    ]


def _shown(view: SessionView) -> str:
    """Which requests the chart shows: all of them, or the newest ``MAX_HISTORY``."""
    shown, requests = len(view.history), (view.record or {}).get("requests")
    if not shown:
        return "No requests recorded yet."
    if isinstance(requests, int) and requests > shown:
        first = requests - shown + 1
        return (
            f"Requests #{first}–#{requests}: the newest {shown} of its {requests:,} requests "
            f"(a session's history keeps its newest {MAX_HISTORY})."
        )
    return f"All its {shown} requests."


def _protocol(record: dict[str, Any]) -> str:
    path = record.get("protocol")
    if not isinstance(path, str):
        return "—"
    return f"{PROTOCOLS[path]} (POST {path})" if path in PROTOCOLS else f"POST {path}"


def _compactions(history: Sequence[dict[str, Any]]) -> str:
    kinds = [e.get("kind", "unrecorded") for e in history if e["compacted"]]
    if not kinds:
        return "none"
    counts = [f"{kinds.count(kind)} {kind}" for kind in (*COMPACTION_KINDS, "unrecorded") if kinds.count(kind)]
    return ", ".join(counts)


def _facts(view: SessionView) -> Html:
    r = view.record or {}
    names = [("users", r.get("users")), ("scopes", r.get("scopes"))]
    rows: list[list[Any]] = [
        ["source", view.key.source],
        ["protocol", _protocol(r)],
        ["requests", r.get("requests", "—")],
        ["compactions (requests charted)", _compactions(view.history)],
        ["first seen", when(r.get("created_at"))],
        ["last seen", when(r.get("last_seen"))],
        ["model", r.get("model") or "—"],
        ["messages / tokens of the newest request", f"{r.get('messages', '—')} / {r.get('tokens', '—')}"],
    ]
    rows += [[name, [tag("span", n, class_="tag") for n in found]] for name, found in names if isinstance(found, list)]
    return table(["", ""], rows, id="facts")


def _checkpoints(detail: dict[str, Any] | None) -> Html:
    if detail is None:
        return tag("p", "No checkpoint: this session has not been compacted.", class_="muted")
    items = [
        card(
            tag(
                "details",
                tag(
                    "summary",
                    tag("strong", f"Checkpoint up to message {c['end']}"),
                    tag(
                        "span",
                        f" · made {when(c['created_at'])} by {c['summarizer'] or 'the strategy'}",
                        class_="muted",
                    ),
                ),
                tag("pre", c["summary"], class_="summary"),
                open=i == 0,  # the newest; older ones open on a click
            ),
            class_="card checkpoint",
        )
        for i, c in enumerate(reversed(detail["checkpoints"]))
    ]
    return join(items)


def _contents(detail: dict[str, Any] | None) -> Html:
    if detail is None or detail["contents_page"] is None:
        return tag("p", "No Contents Page (the strategy archives no pages).", class_="muted")
    rows = [
        [
            p["page"],
            f"{p['messages'][0]}–{p['messages'][1]}",
            p["summary"],
            "yes" if p["evicted"] else "no",
            p["recalls"],
        ]
        for p in detail["pages"]
    ]
    return join(
        [
            tag("pre", detail["contents_page"], id="contents-page"),
            tag("h3", "Archived pages"),
            table(["page", "messages", "summary", "evicted", "recalls"], rows, numeric=(0, 4), id="pages"),
        ]
    )


def _memories(view: SessionView, action: str) -> Html:
    """The cards, newest first; searched, best first with the search's score (only then a column)."""
    searched = bool(view.memory_query)
    rows = [
        [
            m.doc.content,
            m.doc.type,
            [tag("span", t, class_="tag") for t in m.doc.tags],
            m.owner or "—",
            when(m.doc.created_at),
            *([f"{m.score:.3f}" if m.score is not None else "—"] if searched else []),
        ]
        for m in view.memories
    ]
    headers = ["memory", "type", "tags", "layer of", "written", *(["score"] if searched else [])]
    found = (
        table(headers, rows, numeric=(5,) if searched else (), id="memories")
        if rows
        else tag("p", "No memory cards" + (" match." if view.memory_query else "."), class_="muted")
    )
    return join([search_form(action, "mq", view.memory_query, "search memories", "Search memories"), found])


def session_page(view: SessionView, csrf: str) -> str:
    key = view.key
    here = url("tenants", key.tenant, "sessions", key.source, key.value)
    delete = tag(
        "form",
        csrf_field(csrf),
        tag("button", "Delete session", type="submit", class_="danger"),
        " ",
        tag("span", "Deletes its checkpoints, pages, recall counts, records and session memories.", class_="muted"),
        method="post",
        action=url("tenants", key.tenant, "sessions", key.source, key.value, "delete"),
        id="delete",
    )
    body = join(
        [
            tag("p", tag("a", f"← sessions of {key.tenant}", href=url("tenants", key.tenant, "sessions"))),
            tag("h1", f"Session {key.value}"),
            _facts(view),
            tag("h2", "Tokens per request"),
            tag("p", _shown(view), class_="muted", id="charted"),
            card(tokens_chart(chart_points(view.history, (view.record or {}).get("requests")), width=1000, height=280)),
            tag("h2", "Checkpoints"),
            _checkpoints(view.detail),
            tag("h2", "Contents Page"),
            _contents(view.detail),
            tag("h2", "Memory cards"),
            _memories(view, here),
            tag("h2", "Delete"),
            delete,
        ]
    )
    return document(f"Session {key.value}", body, csrf)
