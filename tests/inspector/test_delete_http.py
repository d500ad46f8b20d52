"""Deleting a session from the inspector and from the admin API really deletes it from the Store:
every key of the session is gone, another session's are all still there; ``GET /admin/tenants``."""

from __future__ import annotations

import re

import aiohttp

from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.services import STORE
from ctxproxy.session import SessionKey
from ctxproxy.store import Store
from ctxproxy.store.keys import layer_version_key, page_recalls_key, tenant_prefix
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.inspector.drive import BASIC, KEY, TENANT, converse, get, start

BEARER = {"Authorization": f"Bearer {KEY}"}


async def keys_of(store: Store, key: SessionKey, user: str) -> set[str]:
    """The session's keys in the Store: every key naming its value, and its memory layers."""
    layer = MemoryScope(key.tenant, key.store_id, user=user).session_layer.key
    found = {k for k in await store.keys(tenant_prefix(key.tenant)) if f":{key.value}" in k}
    return found | {k for k in (layer, layer_version_key(layer)) if await store.get(k) is not None}


async def two_sessions(proxy: Proxy, upstream: Upstream) -> tuple[SessionKey, SessionKey, Store]:
    gone, _ = await converse(proxy, user="alice", recall=upstream.fake)
    kept, _ = await converse(proxy, user="alice", session="chat-kept")
    return SessionKey("default", gone, "derived"), SessionKey("default", kept, "header"), proxy.server.app[STORE]


async def test_the_delete_button_deletes_the_session_from_the_store(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy)
    gone, kept, store = await two_sessions(proxy, upstream)
    before, others = await keys_of(store, gone, "alice"), await keys_of(store, kept, "alice")
    assert page_recalls_key(gone) in before and len([k for k in before if ":page:" in k]) >= 2
    assert any(":mem:" in k for k in before)
    everything = set(await store.keys(""))

    path = f"/admin/ui/tenants/default/sessions/derived/{gone.value}"
    _, page, _ = await get(proxy, path, headers=BASIC)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url(path + "/delete"), data={"csrf": csrf}, headers=BASIC, allow_redirects=False
        ) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/admin/ui/tenants/default/sessions"
        async with http.post(
            proxy.url(path + "/delete"), data={"csrf": csrf}, headers=BASIC, allow_redirects=False
        ) as resp:
            assert resp.status == 404
    assert await keys_of(store, gone, "alice") == set()
    left = set(await store.keys(""))
    assert left == everything - before  # nothing else went: the other session, the users' own layers
    assert others <= left
    status, _, _ = await get(proxy, path, headers=BASIC)
    assert status == 404
    _, listed, _ = await get(proxy, "/admin/ui/tenants/default/sessions", headers=BASIC)
    assert gone.value not in listed and kept.value in listed


async def admin(proxy: Proxy, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.request(method, proxy.url(path), headers=BEARER if headers is None else headers) as resp:
            return resp.status, await resp.json()


async def test_the_admin_api_deletes_a_session(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy)
    gone, kept, store = await two_sessions(proxy, upstream)
    before, others = await keys_of(store, gone, "alice"), await keys_of(store, kept, "alice")
    path = f"/admin/tenants/default/sessions/{gone.value}"
    status, body = await admin(proxy, "DELETE", path, {"Authorization": "Bearer nope"})
    assert status == 401 and body["error"]["code"] == "invalid_admin_key"
    assert await keys_of(store, gone, "alice") == before

    status, body = await admin(proxy, "DELETE", path)
    assert status == 200 and body == {"session": gone.value, "source": "derived", "deleted": True}
    assert await keys_of(store, gone, "alice") == set() and await keys_of(store, kept, "alice") == others
    status, body = await admin(proxy, "DELETE", path)
    assert status == 404 and body["error"]["code"] == "not_found" and gone.value in body["error"]["message"]
    status, body = await admin(proxy, "DELETE", "/admin/tenants/nope/sessions/x")
    assert status == 404 and body["error"]["code"] == "tenant_not_found"
    status, body = await admin(proxy, "DELETE", f"/admin/tenants/default/sessions/{kept.value}?source=header")
    assert status == 200 and await keys_of(store, kept, "alice") == set()


async def test_admin_lists_the_tenants(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy, {"default": TENANT, "blue": '[upstream]\nbase_url = "{upstream}"\n'})
    await converse(proxy, session="one")
    await converse(proxy, session="two")
    status, body = await admin(proxy, "GET", "/admin/tenants")
    assert status == 200 and body["object"] == "list"
    assert body["data"] == [
        {"name": "blue", "strategy": "none", "mode": "inline", "sessions": 0},
        {"name": "default", "strategy": "paged", "mode": "inline", "sessions": 2},
    ]
    status, body = await admin(proxy, "GET", "/admin/tenants", {})
    assert status == 401 and body["error"]["code"] == "invalid_admin_key"


async def test_without_a_key_the_new_routes_are_off_like_the_rest(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    for method, path in (("GET", "/admin/tenants"), ("DELETE", "/admin/tenants/default/sessions/x")):
        status, body = await admin(proxy, method, path, {"Authorization": "Bearer "})
        assert status == 401 and body["error"]["code"] == "admin_disabled"
