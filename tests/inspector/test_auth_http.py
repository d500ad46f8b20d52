"""Signing in to the inspector over HTTP: the login form's cookie, HTTP Basic (a page asked for
without credentials is a Basic challenge, so a browser asks), logout (which ends the sign-in, not
only the cookie), CSRF on every POST, and a UI that is not there without an admin key."""

from __future__ import annotations

import base64
import re
from http.cookies import SimpleCookie

import aiohttp

from ctxproxy.services import STORE
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import session_record_key
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.inspector.drive import BASIC, KEY, converse, get, start


async def login(proxy: Proxy, key: str = KEY) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/admin/ui/login"), data={"key": key}, allow_redirects=False) as resp:
            await resp.read()
            return resp


def cookie_of(resp: aiohttp.ClientResponse) -> tuple[str, str]:
    """(the Set-Cookie header, the cookie's value)."""
    header = resp.headers["Set-Cookie"]
    parsed = SimpleCookie()
    parsed.load(header)
    return header, parsed["ctxproxy_ui"].value


def csrf_in(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def test_without_an_admin_key_the_ui_is_not_there(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    for path in ("/admin/ui", "/admin/ui/", "/admin/ui/login", "/admin/ui/tenants/default/sessions"):
        status, text, _ = await get(proxy, path, headers=BASIC)
        assert status == 404, path
    resp = await login(proxy, "")
    assert resp.status == 404 and "Set-Cookie" not in resp.headers


async def test_login_sets_a_signed_httponly_strict_cookie_scoped_to_the_ui(make_proxy: MakeProxy) -> None:
    proxy = await start(make_proxy)
    status, challenge, resp = await get(proxy, "/admin/ui/")
    assert status == 401 and resp.headers["WWW-Authenticate"] == 'Basic realm="ctxproxy inspector", charset="UTF-8"'
    assert (
        'type="password"' in challenge and 'action="/admin/ui/login"' in challenge
    )  # the form, if the prompt is cancelled
    status, form, resp = await get(proxy, "/admin/ui/login")
    assert "WWW-Authenticate" not in resp.headers
    assert status == 200 and 'type="password"' in form and 'method="post"' in form

    wrong = await login(proxy, "nope")
    assert wrong.status == 401 and "Set-Cookie" not in wrong.headers
    right = await login(proxy)
    assert right.status == 303 and right.headers["Location"] == "/admin/ui/"
    header, token = cookie_of(right)
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in header.split(";")}
    assert "httponly" in attributes and attributes["samesite"].lower() == "samesite=strict"
    assert attributes["path"] == "Path=/admin/ui" and KEY not in header
    status, page, resp = await get(proxy, "/admin/ui/", cookies={"ctxproxy_ui": token})
    assert status == 200 and "Overview" in page and "Tenant default" in page
    assert "script-src" not in resp.headers["Content-Security-Policy"]  # default-src 'none': no script at all
    assert resp.headers["X-Frame-Options"] == "DENY" and resp.headers["Cache-Control"] == "no-store"
    # A token that is not ours, or tampered with, is a visitor without a key: back to the form.
    for forged in (token[:-1] + ("0" if token[-1] != "0" else "1"), "1.2.3", KEY):
        status, _, resp = await get(proxy, "/admin/ui/", cookies={"ctxproxy_ui": forged})
        assert status == 303 and resp.headers["Location"] == "/admin/ui/login"


async def test_http_basic_with_the_key_as_password(make_proxy: MakeProxy) -> None:
    proxy = await start(make_proxy)
    status, page, _ = await get(proxy, "/admin/ui/tenants/default/sessions", headers=BASIC)
    assert status == 200 and "Sessions of default" in page
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:nope").decode()}
    for headers in (wrong, {"Authorization": f"Bearer {KEY}"}, {"Authorization": "Basic %%%"}):
        status, _, resp = await get(proxy, "/admin/ui/", headers=headers)
        assert status == 401 and resp.headers["WWW-Authenticate"].startswith("Basic ")  # the browser asks again


async def test_a_post_without_the_forms_csrf_token_is_refused(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy)
    session, _ = await converse(proxy, user="alice")
    path = f"/admin/ui/tenants/default/sessions/derived/{session}"
    _, token = cookie_of(await login(proxy))
    _, other_token = cookie_of(await login(proxy))
    cookies = {"ctxproxy_ui": token}
    _, page, _ = await get(proxy, path, cookies=cookies)
    csrf = csrf_in(page)
    _, other_page, _ = await get(proxy, path, cookies={"ctxproxy_ui": other_token})
    _, basic_page, _ = await get(proxy, path, headers=BASIC)
    assert csrf_in(other_page) != csrf and csrf_in(basic_page) != csrf

    async with aiohttp.ClientSession(cookies=cookies) as http:
        for data in ({}, {"csrf": ""}, {"csrf": csrf_in(other_page)}, {"csrf": csrf_in(basic_page)}, {"csrf": "é"}):
            async with http.post(proxy.url(path + "/delete"), data=data, allow_redirects=False) as resp:
                assert resp.status == 403, data
    async with aiohttp.ClientSession() as http:  # no cookie at all
        async with http.post(proxy.url(path + "/delete"), data={"csrf": csrf}, allow_redirects=False) as resp:
            assert resp.status == 401
    store = proxy.server.app[STORE]
    assert await store.get(session_record_key(SessionKey("default", session, "derived"))) is not None

    async with aiohttp.ClientSession() as http:  # Basic works with its own token
        async with http.post(
            proxy.url(path + "/delete"), data={"csrf": csrf_in(basic_page)}, headers=BASIC, allow_redirects=False
        ) as resp:
            assert resp.status == 303
    assert await store.get(session_record_key(SessionKey("default", session, "derived"))) is None


async def test_logout_clears_the_cookie_and_needs_the_csrf_token(make_proxy: MakeProxy) -> None:
    proxy = await start(make_proxy)
    _, token = cookie_of(await login(proxy))
    cookies = {"ctxproxy_ui": token}
    _, page, _ = await get(proxy, "/admin/ui/", cookies=cookies)
    async with aiohttp.ClientSession(cookies=cookies) as http:
        async with http.post(proxy.url("/admin/ui/logout"), data={}, allow_redirects=False) as resp:
            assert resp.status == 403
        async with http.post(
            proxy.url("/admin/ui/logout"), data={"csrf": csrf_in(page)}, allow_redirects=False
        ) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/admin/ui/login"
            cleared = resp.headers["Set-Cookie"]
    assert cleared.startswith('ctxproxy_ui=""') and "Max-Age=0" in cleared and "Path=/admin/ui" in cleared


async def test_logout_ends_the_sign_in_so_a_kept_cookie_opens_nothing(make_proxy: MakeProxy) -> None:
    """A copy of the cookie kept after logging out (another tab, a stolen header) is refused; another
    sign-in of the same key is not ended with it."""
    proxy = await start(make_proxy)
    _, token = cookie_of(await login(proxy))
    _, other = cookie_of(await login(proxy))
    _, page, _ = await get(proxy, "/admin/ui/", cookies={"ctxproxy_ui": token})
    async with aiohttp.ClientSession(cookies={"ctxproxy_ui": token}) as http:
        async with http.post(
            proxy.url("/admin/ui/logout"), data={"csrf": csrf_in(page)}, allow_redirects=False
        ) as resp:
            assert resp.status == 303
    status, _, resp = await get(proxy, "/admin/ui/", cookies={"ctxproxy_ui": token})
    assert status == 303 and resp.headers["Location"] == "/admin/ui/login"
    status, _, _ = await get(proxy, "/admin/ui/tenants/default/sessions", cookies={"ctxproxy_ui": token})
    assert status == 303
    status, page, _ = await get(proxy, "/admin/ui/", cookies={"ctxproxy_ui": other})
    assert status == 200 and "Overview" in page
    # The store holds a hash of each open sign-in, never the token.
    kept = await proxy.server.app[STORE].keys("ui:login:")
    assert len(kept) == 1 and token not in kept[0] and other not in kept[0]
