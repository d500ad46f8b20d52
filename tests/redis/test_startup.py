"""A proxy on Redis: ``serve`` refuses to start while the server is unreachable, ``/readyz`` says 503
while it is down later and 200 once it is back, and ``config check`` names the store it reads."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import aiohttp

from tests.conftest import MakeProxy
from tests.redis_server import RedisServer
from tests.server.test_reload import REPO, free_port


def redis_config(root: Path) -> Path:
    """A config directory whose store is the Redis at ``${REDIS_URL}``."""
    (root / "tenants").mkdir(parents=True)
    (root / "proxy.toml").write_text('[store]\nbackend = "redis"\nurl = "${REDIS_URL}"\nkey_prefix = "start:"\n')
    (root / "tenants" / "default.toml").write_text('[upstream]\nbase_url = "http://127.0.0.1:9/v1"\n')
    return root


async def run_cli(*argv: str, url: str, timeout: float = 30) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env["REDIS_URL"] = url
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", *argv,
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_serve_refuses_to_start_while_redis_is_unreachable(tmp_path: Path) -> None:
    nobody = f"redis://:hunter2@127.0.0.1:{free_port()}/0"  # nothing listens there
    config = redis_config(tmp_path / "config")
    started = time.monotonic()
    code, out, err = await run_cli("serve", "--config", str(config), "--port", str(free_port()), url=nobody)
    assert code == 1
    assert time.monotonic() - started < 20
    assert "not starting, the redis store cannot take writes" in err
    assert "Connection refused" in err or "connecting to 127.0.0.1" in err
    assert '"event":"server.store_unavailable"' in out
    assert "hunter2" not in out + err


async def test_config_check_validates_the_url_and_reads_the_store(tmp_path: Path, redis_server: RedisServer) -> None:
    config = redis_config(tmp_path / "config")
    code, out, err = await run_cli("config", "check", "--config", str(config), url=redis_server.url)
    assert (code, err) == (0, "")
    assert f"learned windows: none yet (store {redis_server.url})" in out
    code, out, err = await run_cli("config", "check", "--config", str(config), url="redis://:hunter2@cache:99999")
    assert code == 1
    assert "store.url" in err and "Port out of range" in err
    assert "hunter2" not in out + err


async def test_readyz_is_503_while_redis_is_down_and_200_once_it_is_back(
    make_proxy: MakeProxy, own_redis: RedisServer
) -> None:
    proxy = await make_proxy(proxy_toml=f'backend = "redis"\nurl = "{own_redis.url}"\ntimeout = 0.5\n')
    async with aiohttp.ClientSession() as http:

        async def ready() -> tuple[int, dict[str, object]]:
            async with http.get(proxy.url("/readyz")) as resp:
                return resp.status, await resp.json()

        assert (await ready())[0] == 200
        own_redis.stop()
        status, body = await ready()
        assert status == 503
        assert body["error"]["code"] == "store_unavailable"  # type: ignore[index]
        own_redis.start()
        assert (await ready())[0] == 200
