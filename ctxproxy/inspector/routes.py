"""The inspector's routes under ``/admin/ui/`` (server-rendered HTML, no script)::

    GET  /admin/ui/                                             overview: every tenant's traffic
    GET  /admin/ui/login, POST /admin/ui/login                  the login form; POST /admin/ui/logout
    GET  /admin/ui/tenants/{t}/sessions[?q=…&page=n]            sessions, newest first, searchable
    GET  /admin/ui/tenants/{t}/sessions/{source}/{id}[?mq=…]    one session (``source``: header | derived)
    POST /admin/ui/tenants/{t}/sessions/{source}/{id}/delete    delete it (with the form's CSRF token)

Without ``[admin] api_key`` every route is a 404, as if the inspector were not there. A page
asked for without credentials is a 401 with ``WWW-Authenticate: Basic``, so a browser asks for
the key (HTTP Basic, the key as the password), with the login form as its body for whoever
cancels the browser's prompt; so are wrong Basic credentials, so the browser asks again. A
request from the login form's flow — its cookie no longer opens a page: it expired, or its
sign-in ended (``logins``) — is sent to the login form. A POST without the right CSRF token is a
403. Every answer forbids scripts, framing and caching (``_HEADERS``). A refused page's request
log line says why (``error_code``, ``cause``), as an API error's does.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from aiohttp import web

from ctxproxy.config.models import AdminSettings, TenantConfig
from ctxproxy.inspector import queries
from ctxproxy.inspector.auth import (
    COOKIE,
    COOKIE_PATH,
    LIFETIME,
    Viewer,
    csrf_valid,
    issue_token,
    session_secret,
    token_valid,
    viewer,
)
from ctxproxy.inspector.layout import ROOT, login_page, message_page, url
from ctxproxy.inspector.logins import end_login, login_open, open_login
from ctxproxy.inspector.pages import TenantView, overview_page, sessions_page
from ctxproxy.inspector.session_page import SessionView, session_page
from ctxproxy.services import COMPACTOR, CONFIG, LOG_FIELDS, MEMORIES, RECORDER, STORE
from ctxproxy.session.identity import SessionKey
from ctxproxy.store import StoreError

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_PAGE = re.compile(r"[0-9]{1,6}")
_REFUSED_CODES = {400: "bad_request", 403: "csrf_refused", 404: "not_found", 503: "store_unavailable"}
# A browser that gets this asks for a user name and password; the key is the password.
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="ctxproxy inspector", charset="UTF-8"'}
MAX_QUERY = 200
MEMORIES_SHOWN = 25
Page = Callable[[web.Request, Viewer], Awaitable[web.StreamResponse]]


class _Refused(Exception):
    """Answer with an HTML page saying why."""

    def __init__(self, status: int, title: str, text: str, cause: str | None = None) -> None:
        super().__init__(text)
        self.status, self.title, self.text = status, title, text
        self.cause = cause or title.lower()  # for the log: never ``text``, which may quote the request


def add_inspector_routes(app: web.Application) -> None:
    app.router.add_get(ROOT, _off_or(_to_overview))
    app.router.add_get(ROOT + "/", _signed_in(overview))
    app.router.add_get(ROOT + "/login", _off_or(login_form))
    app.router.add_post(ROOT + "/login", _off_or(login))
    app.router.add_post(ROOT + "/logout", _signed_in(logout, post=True))
    sessions = ROOT + "/tenants/{tenant}/sessions"
    app.router.add_get(sessions, _signed_in(list_sessions))
    app.router.add_get(sessions + "/{source}/{session}", _signed_in(show_session))
    app.router.add_post(sessions + "/{source}/{session}/delete", _signed_in(delete_session, post=True))


def html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=text, status=status, content_type="text/html", charset="utf-8", headers={**_HEADERS, **(headers or {})}
    )


def redirect(location: str, status: int = 303) -> web.Response:
    """A redirect returned, not raised: the request middleware renders raised HTTP errors as JSON."""
    return web.Response(status=status, headers={**_HEADERS, "Location": location})


def _explain(request: web.Request, code: str, cause: str) -> None:
    """What the request's log line says of a refused page (``ctxproxy.server.middleware``)."""
    request[LOG_FIELDS].update(error_code=code, cause=cause)


def _admin(request: web.Request) -> AdminSettings:
    return request.app[CONFIG].current.settings.admin


def _off_or(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[..., Awaitable[web.StreamResponse]]:
    async def page(request: web.Request) -> web.StreamResponse:
        if session_secret(_admin(request)) is None:
            _explain(request, "inspector_off", "no [admin] api_key configured")
            return html(message_page("Not found", "There is nothing here."), 404)
        return await handler(request)

    return page


def _signed_in(handler: Page, *, post: bool = False) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Only for a viewer who showed the key (and, for a POST, sent the form's CSRF token back)."""

    async def page(request: web.Request) -> web.StreamResponse:
        who: Viewer | None = None
        try:
            who = await _viewer(request)
            if who is None:
                return _not_signed_in(request, post)
            if post:
                given = (await request.post()).get("csrf")
                if not isinstance(given, str) or not given.isascii() or not csrf_valid(who, given):
                    reload = "The form's CSRF token is missing or wrong: reload the page."
                    raise _Refused(403, "Refused", reload, cause="missing or wrong CSRF token")
            return await handler(request, who)
        except _Refused as refused:
            _explain(request, _REFUSED_CODES[refused.status], refused.cause)
            return html(message_page(refused.title, refused.text, who.csrf if who else None), refused.status)

    return _off_or(page)


async def _viewer(request: web.Request) -> Viewer | None:
    """Who the request's credentials show: a login-form cookie whose sign-in is still open, else
    Basic credentials with the key."""
    admin, now = _admin(request), time.time()
    cookie = request.cookies.get(COOKIE)
    secret = session_secret(admin)
    if cookie and secret is not None and token_valid(secret, cookie, now):
        if not await _store_call(login_open(request.app[STORE], cookie)):
            cookie = None  # signed out: the cookie counts for nothing
    return viewer(admin, cookie, request.headers.get("Authorization"), now)


def _not_signed_in(request: web.Request, post: bool) -> web.StreamResponse:
    if post:
        _explain(request, "not_signed_in", "no valid session cookie or admin key")
        return html(message_page("Not signed in", "Sign in with the admin key first."), 401)
    if COOKIE in request.cookies:  # the login form's flow: back to the form
        return redirect(url("login"))
    _explain(request, "not_signed_in", "no session cookie, no or wrong HTTP Basic credentials")
    return html(login_page(), 401, _CHALLENGE)


async def _store_call(call: Awaitable[bool | None]) -> bool | None:
    """A store call the sign-in needs; a store that does not answer is a 503 page, not a 500."""
    try:
        return await call
    except StoreError:
        raise _Refused(503, "Store unavailable", "The store does not answer: sign-ins cannot be checked.") from None


async def _to_overview(request: web.Request) -> web.StreamResponse:
    return redirect(url(""), 301)


async def login_form(request: web.Request) -> web.StreamResponse:
    return html(login_page())


async def login(request: web.Request) -> web.StreamResponse:
    admin = _admin(request)
    given = (await request.post()).get("key")
    secret = session_secret(admin)
    if secret is None or not isinstance(given, str) or not admin.accepts(given):
        _explain(request, "invalid_admin_key", "wrong admin key at the login form")
        return html(login_page("That is not the admin key."), 401)
    token = issue_token(secret, time.time())
    try:
        await _store_call(open_login(request.app[STORE], token, LIFETIME))
    except _Refused as refused:
        _explain(request, _REFUSED_CODES[refused.status], refused.cause)
        return html(message_page(refused.title, refused.text), refused.status)
    response = redirect(url(""))
    response.set_cookie(
        COOKIE,
        token,
        path=COOKIE_PATH,
        max_age=LIFETIME,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    return response


async def logout(request: web.Request, who: Viewer) -> web.StreamResponse:
    """End the sign-in (``logins``), so the cookie opens nothing even where it is kept, and clear it."""
    cookie = request.cookies.get(COOKIE)
    if who.by_cookie and cookie:
        await _store_call(end_login(request.app[STORE], cookie))
    response = redirect(url("login"))
    response.del_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="Strict", secure=request.secure)
    return response


async def overview(request: web.Request, who: Viewer) -> web.StreamResponse:
    store = request.app[STORE]
    tenants = sorted(request.app[CONFIG].current.tenants.values(), key=lambda t: t.name)
    usages = await asyncio.gather(*(queries.tenant_usage(store, t.name) for t in tenants))
    counts = await asyncio.gather(*(queries.tenant_sessions(store, t.name) for t in tenants))
    views = [
        TenantView(t.name, t.compaction.strategy, t.compaction.mode, n, u)
        for t, n, u in zip(tenants, counts, usages, strict=True)
    ]
    return html(overview_page(views, who.csrf))


def _tenant(request: web.Request) -> TenantConfig:
    name = request.match_info["tenant"]
    tenant = request.app[CONFIG].current.tenants.get(name)
    if tenant is None:
        raise _Refused(404, "Not found", f"There is no tenant {name!r}.")
    return tenant


def _query(request: web.Request, name: str) -> str:
    value = request.query.get(name, "").strip()
    if len(value) > MAX_QUERY:
        raise _Refused(400, "Search too long", f"A search is at most {MAX_QUERY} characters.")
    return value


async def list_sessions(request: web.Request, who: Viewer) -> web.StreamResponse:
    tenant = _tenant(request)
    raw = request.query.get("page", "1")
    page = int(raw) if _PAGE.fullmatch(raw) else 0
    if page < 1:
        raise _Refused(400, "Bad page", "page must be a whole number from 1.")
    records = await queries.session_records(request.app[STORE], tenant.name)
    return html(sessions_page(tenant.name, records, _query(request, "q"), page, who.csrf))


def _session(request: web.Request) -> SessionKey:
    tenant, source = _tenant(request), request.match_info["source"]
    if source not in ("header", "derived"):
        raise _Refused(404, "Not found", "A session's source is 'header' or 'derived'.")
    kind: Literal["header", "derived"] = "header" if source == "header" else "derived"
    return SessionKey(tenant.name, request.match_info["session"], kind)


async def show_session(request: web.Request, who: Viewer) -> web.StreamResponse:
    key = _session(request)
    app = request.app
    store = app[STORE]
    record, history, detail = await asyncio.gather(
        queries.session_record(store, key),
        queries.session_history(store, key),
        queries.session_detail(store, app[COMPACTOR].kinds, key),
    )
    if record is None and detail is None and not history:
        raise _Refused(404, "Not found", f"Tenant {key.tenant!r} has no session {key.value!r}.")
    mq = _query(request, "mq")
    memories = await queries.session_memories(store, app[MEMORIES], key, record, mq, MEMORIES_SHOWN)
    return html(session_page(SessionView(key, record, history, detail, memories, mq), who.csrf))


async def delete_session(request: web.Request, who: Viewer) -> web.StreamResponse:
    key = _session(request)
    if not await request.app[RECORDER].forget(key):
        raise _Refused(404, "Not found", f"Tenant {key.tenant!r} has no session {key.value!r}.")
    return redirect(url("tenants", key.tenant, "sessions"))
