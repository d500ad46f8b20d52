"""The admin API: sessions, checkpoints, the Contents Page and pages, a user's memories —
behind the admin key, and a delete that really deletes."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import PAGED_TENANT as PAGED
from tests.recall.paged import paged_history as history
from tests.recall.test_memory_http import DECISION, QUESTION, injected, send, tenant

ADMIN = '[admin]\napi_key = "${ADMIN_KEY}"\n'
KEY = {"Authorization": "Bearer s3cret"}


async def admin(proxy: Proxy, method: str, path: str, headers: dict[str, str] | None = KEY) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        resp = await http.request(method, proxy.url(path), headers=headers)
        return resp.status, await resp.json()


@pytest.mark.parametrize("headers", [None, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}])
async def test_every_route_needs_the_admin_key(make_proxy: MakeProxy, headers: dict[str, str] | None) -> None:
    proxy = await make_proxy(proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    for method, path in [
        ("GET", "/admin/tenants/default/sessions"),
        ("GET", "/admin/tenants/default/users/alice/memories"),
        ("DELETE", "/admin/tenants/default/users/alice/memories"),
        ("GET", "/admin/tenants/nope/sessions"),
    ]:
        status, body = await admin(proxy, method, path, headers)
        assert status == 401, path
        assert body["error"]["code"] == "invalid_admin_key" and "Bearer" in body["error"]["message"]


async def test_without_a_configured_key_the_admin_api_is_off(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    status, body = await admin(proxy, "GET", "/admin/tenants/default/sessions", {"Authorization": "Bearer "})
    assert status == 401 and body["error"]["code"] == "admin_disabled" and "[admin] api_key" in body["error"]["message"]


async def test_sessions_checkpoints_contents_and_pages(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED}, proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    resp = await send(proxy, history())
    session = resp.headers["X-Ctx-Session"]
    status, listed = await admin(proxy, "GET", "/admin/tenants/default/sessions")
    for _ in range(20):  # session records are written in batches off the response path
        if listed["data"]:
            break
        import asyncio

        await asyncio.sleep(0.1)
        status, listed = await admin(proxy, "GET", "/admin/tenants/default/sessions")
    assert status == 200 and [s["session"] for s in listed["data"]] == [session]

    status, detail = await admin(proxy, "GET", f"/admin/tenants/default/sessions/{session}")
    assert status == 200
    assert detail["checkpoints"][-1]["end"] == 9  # system + pages 1-4 (8 messages)
    assert detail["contents_page"].startswith("## Contents Page")
    assert detail["contents_page"] == upstream.fake.chat_requests()[0].json()["messages"][1]["content"]
    assert [p["page"] for p in detail["pages"]] == [1, 2, 3, 4]
    assert detail["pages"][0]["messages"] == [1, 3] and detail["pages"][0]["evicted"] is False

    status, page = await admin(proxy, "GET", f"/admin/tenants/default/sessions/{session}/pages/2")
    assert status == 200 and [m["content"] for m in page["messages"]] == [m["content"] for m in history()[3:5]]
    status, missing = await admin(proxy, "GET", f"/admin/tenants/default/sessions/{session}/pages/9")
    assert status == 404 and "#9" in missing["error"]["message"]
    status, unknown = await admin(proxy, "GET", "/admin/tenants/default/sessions/s_000000000000000000000000")
    assert status == 404
    status, tenantless = await admin(proxy, "GET", "/admin/tenants/nope/sessions")
    assert status == 404 and tenantless["error"]["code"] == "tenant_not_found"


async def test_list_search_and_delete_a_users_memories(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()}, proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    await send(proxy, DECISION, user="alice")
    status, listed = await admin(proxy, "GET", "/admin/tenants/default/users/alice/memories")
    assert status == 200 and listed["data"]
    assert all({"id", "content", "type", "tags", "created_at", "source"} <= set(m) for m in listed["data"])
    status, found = await admin(proxy, "GET", "/admin/tenants/default/users/alice/memories?q=PostgreSQL")
    target = [m for m in found["data"] if "PostgreSQL 16" in m["content"]]
    assert status == 200 and target
    status, none_for_bob = await admin(proxy, "GET", "/admin/tenants/default/users/bob/memories?q=PostgreSQL")
    assert none_for_bob["data"] == []

    for memory in target:
        status, _ = await admin(proxy, "DELETE", f"/admin/tenants/default/users/alice/memories/{memory['id']}")
        assert status == 200
    status, again = await admin(proxy, "DELETE", f"/admin/tenants/default/users/alice/memories/{target[0]['id']}")
    assert status == 404
    status, found = await admin(proxy, "GET", "/admin/tenants/default/users/alice/memories?q=PostgreSQL")
    assert all("PostgreSQL 16" not in m["content"] for m in found["data"])
    await send(proxy, QUESTION, user="alice")
    assert "PostgreSQL 16" not in (injected(upstream) or "")
    # Not even in the session it came from: its copy in that session's layer is gone too.
    same_session = [*DECISION[:-1], {"role": "user", "content": "Which PostgreSQL version do the orders use?"}]
    await send(proxy, same_session, user="alice")
    assert "PostgreSQL 16" not in (injected(upstream) or "")

    status, cleared = await admin(proxy, "DELETE", "/admin/tenants/default/users/alice/memories")
    assert status == 200
    status, listed = await admin(proxy, "GET", "/admin/tenants/default/users/alice/memories")
    assert listed["data"] == []
