"""The overview and the sessions list, rendered from what ``queries`` read. Pure."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.inspector.charts import usage_chart
from ctxproxy.inspector.layout import card, document, search_form, table, url
from ctxproxy.inspector.markup import Html, join, tag
from ctxproxy.inspector.queries import Usage
from ctxproxy.session.tenant_stats import Totals

PAGE_SIZE = 50


@dataclass(frozen=True)
class TenantView:
    name: str
    strategy: str
    mode: str
    sessions: int
    usage: Usage


def when(at: Any) -> str:
    if not isinstance(at, int | float) or isinstance(at, bool):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


COLUMNS = [
    "",
    "requests",
    "tokens sent",
    "tokens forwarded",
    "saved",
    "cost saved",
    "USD saved",
    "compactions",
    "retries",
]
MONEY = (
    "Cost: the prompts priced as providers bill them, a prefix repeated from the session's previous prompt at "
    "the cached price; negative when compaction broke the cache more than it saved. USD for models with a "
    'price ([models."…"] input_price_per_mtok).'
)


def _usd(t: Totals) -> str:
    if not (t.nano_usd_before or t.nano_usd_after):
        return "—"
    return f"{'−' if t.saved_usd < 0 else ''}${abs(t.saved_usd):,.4f}"


def _totals_row(period: str, t: Totals) -> list[Any]:
    return [
        period,
        f"{t.requests:,}",
        f"{t.before:,}",
        f"{t.after:,}",
        f"{t.saved_percent:.1f}%",
        f"{t.cost_saved_percent:.1f}%" if t.billed_before else "—",
        _usd(t),
        t.compactions,
        t.retries,
    ]


_OVERVIEW_NOTE = (
    "requests: every chat completions and Messages request; tokens sent: the prompt tokens clients sent, "
    "tokens forwarded: what ctxproxy sent upstream instead — both only for requests that reached the upstream "
    "(one ctxproxy refused, or could not forward, is a request and no tokens); compactions: checkpoints made; "
    "retries: requests retried after the upstream said the prompt was too long."
)
_SESSIONS_NOTE = (
    "users: the users its requests named (OpenAI's user field, X-Ctx-User, Messages' metadata.user_id), "
    "— when none did; prompt tokens: of its newest request, as the client sent it."
)


def overview_page(tenants: Sequence[TenantView], csrf: str) -> str:
    sections = []
    for t in tenants:
        numbers = table(
            COLUMNS,
            [_totals_row("last hour", t.usage.hour), _totals_row("last day", t.usage.day)],
            numeric=tuple(range(1, len(COLUMNS))),
            id=f"usage-{t.name}",
        )
        sections.append(
            card(
                tag("h2", tag("a", f"Tenant {t.name}", href=url("tenants", t.name, "sessions"))),
                tag("p", f"strategy {t.strategy} · mode {t.mode} · {t.sessions:,} sessions", class_="muted"),
                numbers,
                tag("p", MONEY, class_="muted"),
                tag(
                    "p",
                    "Prompt tokens per hour, last 24 hours (UTC; each bar pair ends at its label's time)",
                    class_="muted",
                ),
                usage_chart(t.usage.hours),
                class_="card tenant",
                data_tenant=t.name,
            )
        )
    note = tag("p", _OVERVIEW_NOTE, class_="muted", id="overview-note")
    body = join([tag("h1", "Overview"), note, sections or tag("p", "No tenants are configured.")])
    return document("Overview", body, csrf)


def _matches(record: dict[str, Any], query: str) -> bool:
    needle = query.casefold()
    names = [record.get("session"), *(record.get("users") or [])]
    return any(isinstance(n, str) and needle in n.casefold() for n in names)


def filter_sessions(records: Sequence[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """The records whose session key or one of whose users contains ``query`` (case-insensitive)."""
    return [r for r in records if _matches(r, query)] if query else list(records)


def _session_row(tenant: str, r: dict[str, Any]) -> list[Any]:
    session, source = str(r.get("session", "")), str(r.get("source", ""))
    link = tag("a", session, href=url("tenants", tenant, "sessions", source, session), class_="session")
    users = [tag("span", u, class_="tag") for u in r.get("users") or [] if isinstance(u, str)]
    return [link, users or "—", r.get("requests"), r.get("tokens"), r.get("model"), when(r.get("last_seen"))]


def sessions_page(tenant: str, records: Sequence[dict[str, Any]], query: str, page: int, csrf: str) -> str:
    """Page ``page`` (from 1) of the sessions matching ``query``, newest first."""
    found = filter_sessions(records, query)
    pages = max(1, -(-len(found) // PAGE_SIZE))
    shown = found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    rows = [_session_row(tenant, r) for r in shown]
    body = join(
        [
            tag("h1", f"Sessions of {tenant}"),
            search_form(url("tenants", tenant, "sessions"), "q", query, "session key or user", "Search sessions"),
            tag("p", f"{len(found):,} sessions" + (f" matching “{query}”" if query else ""), class_="muted"),
            table(
                ["session", "users", "requests", "prompt tokens", "model", "last seen"],
                rows,
                numeric=(2, 3),
                id="sessions",
            )
            if rows
            else tag("p", "No sessions."),
            tag("p", _SESSIONS_NOTE, class_="muted") if rows else None,
            _pager(tenant, query, page, pages),
        ]
    )
    return document(f"Sessions of {tenant}", body, csrf)


def _pager(tenant: str, query: str, page: int, pages: int) -> Html | None:
    if pages <= 1:
        return None
    items = []
    for n in range(1, pages + 1):
        if n == page:
            items.append(tag("span", n, aria_current="page"))
        elif n in (1, pages) or abs(n - page) <= 2:
            items.append(tag("a", n, href=url("tenants", tenant, "sessions", q=query, page=n)))
    return tag("nav", items, class_="pages", aria_label="pages")
