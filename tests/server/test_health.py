"""Liveness (/healthz) and readiness (/readyz, which needs a writable store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiohttp

from ctxproxy.services import STORE
from tests.conftest import MakeProxy, Proxy


async def get(proxy: Proxy, path: str) -> tuple[int, str, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url(path)) as resp:
            return resp.status, resp.content_type, await resp.json()


async def test_healthz(proxy: Proxy) -> None:
    status, ctype, body = await get(proxy, "/healthz")
    assert (status, ctype, body) == (200, "application/json", {"status": "ok"})


async def test_readyz_ready(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(
        {"default": '[upstream]\nbase_url = "{upstream}"\n', "other": '[upstream]\nbase_url = "{upstream}"\n'}
    )
    status, _, body = await get(proxy, "/readyz")
    assert status == 200
    assert body == {"status": "ready", "config_generation": 1, "tenants": 2}
    # The probe leaves nothing behind in the store.
    assert await proxy.server.app[STORE].keys("ctx:") == []
    # Readiness reflects reloads.
    (proxy.config_dir / "tenants" / "third.toml").write_text("")
    assert proxy.holder.reload()
    status, _, body = await get(proxy, "/readyz")
    assert (status, body["config_generation"], body["tenants"]) == (200, 2, 3)


async def test_health_routes_need_no_tenant_or_key(make_proxy: MakeProxy) -> None:
    # Only a keyed tenant, no default: /v1 is 404, but health checks still answer.
    proxy = await make_proxy({"acme": 'api_keys = ["pk"]\n[upstream]\nbase_url = "{upstream}"\napi_key = "sk"\n'})
    assert (await get(proxy, "/healthz"))[0] == 200
    assert (await get(proxy, "/readyz"))[0] == 200


def assert_not_ready(status: int, ctype: str, body: dict) -> dict:
    assert status == 503
    assert ctype == "application/json"
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "server_error"
    assert error["code"] == "store_unavailable"
    assert error["message"].startswith("Store not writable")
    return error


async def test_readyz_503_when_store_is_closed(proxy: Proxy) -> None:
    assert (await get(proxy, "/readyz"))[0] == 200
    await proxy.server.app[STORE].close()
    assert_not_ready(*await get(proxy, "/readyz"))
    # Liveness is not readiness: the process is alive.
    assert (await get(proxy, "/healthz"))[0] == 200


async def test_readyz_503_while_another_process_locks_the_store(proxy: Proxy) -> None:
    store = proxy.server.app[STORE]
    db = Path(store.path) / "cache.db"
    assert db.exists()
    # The store's SQLite busy timeout is 5 s; shorten it for connections opened from now on
    # (the store's worker threads connect lazily and have not connected yet).
    store._cache._timeout = 0.2  # type: ignore[attr-defined]

    holder = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        error = assert_not_ready(*await get(proxy, "/readyz"))
        assert "check_writable" in error["message"]
        assert (await get(proxy, "/healthz"))[0] == 200
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # The lock is gone: ready again, without a restart.
    status, _, body = await get(proxy, "/readyz")
    assert status == 200 and body["status"] == "ready"
