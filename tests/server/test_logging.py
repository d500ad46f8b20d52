"""The per-request log line, request ids, and what must never be logged (DESIGN.md §6)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from structlog.typing import EventDict

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import openai_error

PROXY_KEY = "pk-LOGTEST-proxy-7f3e91c2"
UPSTREAM_KEY = "sk-LOGTEST-upstream-55d0a8b4"
CLIENT_KEY = "sk-LOGTEST-client-own-e19c"
MARKER = "zebra-quasar-MARKER-0c4f2a"
SECRETS = (PROXY_KEY, UPSTREAM_KEY, CLIENT_KEY, MARKER)
REPO = Path(__file__).resolve().parents[2]
REQUEST_FIELDS = {"request_id", "tenant", "session", "status", "latency_ms", "tokens_before", "tokens_after"}


def capture() -> Any:
    # merge_contextvars: request_id is bound as a contextvar, as in the real processor chain.
    return structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars])


def request_lines(logs: list[EventDict]) -> list[EventDict]:
    return [e for e in logs if e["event"] == "request"]


async def wait_for_request_lines(logs: list[EventDict], n: int) -> list[EventDict]:
    for _ in range(200):
        if len(request_lines(logs)) >= n:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # anything that would be a duplicate has had time to show up
    return request_lines(logs)


@pytest.fixture
async def keyed(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy(
        {
            "acme": f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "{{upstream}}"\napi_key = "{UPSTREAM_KEY}"\n',
            "default": '[upstream]\nbase_url = "{upstream}"\n',
        }
    )


def chat(content: str = "hello") -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": content}],
    }


async def test_one_request_line_per_request_with_its_fields(keyed: Proxy, upstream: Upstream) -> None:
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"), json=chat(), headers={"Authorization": f"Bearer {PROXY_KEY}"}
            ) as resp:
                assert resp.status == 200
                headers = resp.headers
                await resp.read()
        lines = await wait_for_request_lines(logs, 1)
    [line] = lines
    assert REQUEST_FIELDS <= set(line)
    assert line["request_id"] == headers["X-Ctx-Request-Id"]
    assert line["tenant"] == "acme"
    assert line["session"] == headers["X-Ctx-Session"]
    assert line["status"] == 200
    assert line["method"] == "POST"
    assert line["path"] == "/t/acme/v1/chat/completions"
    assert isinstance(line["latency_ms"], float) and line["latency_ms"] >= 0
    assert line["tokens_before"] == int(headers["X-Ctx-Tokens-Before"]) > 0
    assert line["tokens_after"] == int(headers["X-Ctx-Tokens-After"])
    assert line["upstream_status"] == 200
    assert line["log_level"] == "info"


async def test_each_of_several_requests_gets_exactly_one_line(proxy: Proxy, upstream: Upstream) -> None:
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            ids = []
            for i in range(3):
                async with http.post(proxy.url("/v1/chat/completions"), json=chat(f"q{i}")) as resp:
                    assert resp.status == 200
                    ids.append(resp.headers["X-Ctx-Request-Id"])
            async with http.get(proxy.url("/healthz")) as resp:
                ids.append(resp.headers["X-Ctx-Request-Id"])
        lines = await wait_for_request_lines(logs, 4)
    assert len(lines) == 4
    assert [line["request_id"] for line in lines] == ids
    assert len(set(ids)) == 4
    assert lines[-1]["path"] == "/healthz" and lines[-1]["status"] == 200


async def test_incoming_request_id_is_used_and_echoed(proxy: Proxy, upstream: Upstream) -> None:
    given = "trace-abc.123:XYZ_9-0"
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                proxy.url("/v1/chat/completions"), json=chat(), headers={"X-Request-Id": given}
            ) as resp:
                assert resp.status == 200
                assert resp.headers["X-Ctx-Request-Id"] == given
            # Errors carry it too.
            async with http.post(
                proxy.url("/v1/chat/completions"), data=b"{", headers={"X-Request-Id": given + "-2"}
            ) as resp:
                assert resp.status == 400
                assert resp.headers["X-Ctx-Request-Id"] == given + "-2"
        lines = await wait_for_request_lines(logs, 2)
    assert [line["request_id"] for line in lines] == [given, given + "-2"]


@pytest.mark.parametrize(
    "bad", ["has space", "a" * 129, "semi;colon", "ünï"], ids=["space", "long", "semicolon", "unicode"]
)
async def test_invalid_incoming_request_id_is_replaced(proxy: Proxy, upstream: Upstream, bad: str) -> None:
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                proxy.url("/v1/chat/completions"), json=chat(), headers={"X-Request-Id": bad.encode().decode("latin-1")}
            ) as resp:
                assert resp.status == 200
                echoed = resp.headers["X-Ctx-Request-Id"]
        [line] = await wait_for_request_lines(logs, 1)
    assert echoed != bad
    assert len(echoed) == 32 and all(c in "0123456789abcdef" for c in echoed)
    assert line["request_id"] == echoed


def assert_nothing_secret(logs: list[EventDict]) -> None:
    assert logs, "expected some log entries"
    text = repr(logs)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} appears in the logs"


async def test_secrets_and_content_not_logged_on_success(keyed: Proxy, upstream: Upstream) -> None:
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"),
                json=chat(MARKER),
                headers={"Authorization": f"Bearer {PROXY_KEY}"},
            ) as resp:
                assert resp.status == 200
                assert MARKER in (await resp.json())["choices"][0]["message"]["content"]
            # Streaming, on the default tenant with the client's own key passed through.
            body = {**chat(MARKER), "stream": True}
            async with http.post(
                keyed.url("/v1/chat/completions"), json=body, headers={"Authorization": f"Bearer {CLIENT_KEY}"}
            ) as resp:
                assert resp.status == 200
                assert MARKER in (await resp.text())
        await wait_for_request_lines(logs, 2)
    # The upstream really got the secrets: their absence from the log is not an accident.
    assert upstream.fake.chat_requests()[0].headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert upstream.fake.chat_requests()[1].headers["Authorization"] == f"Bearer {CLIENT_KEY}"
    assert_nothing_secret(logs)


async def test_secrets_and_content_not_logged_on_400_and_401(keyed: Proxy, upstream: Upstream) -> None:
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            bad = {**chat(MARKER), "stream": MARKER}  # forwarded as sent: the log names the field only
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"), json=bad, headers={"Authorization": f"Bearer {PROXY_KEY}"}
            ) as resp:
                assert resp.headers["X-Ctx-Forwarded-As-Sent"] == "stream"
            bad_role = {"model": "m", "messages": [{"role": MARKER, "content": MARKER}]}
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"),
                json=bad_role,
                headers={"Authorization": f"Bearer {PROXY_KEY}"},
            ) as resp:
                assert resp.headers["X-Ctx-Forwarded-As-Sent"] == "messages[0].role"
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"),
                json=chat(MARKER),
                headers={"Authorization": f"Bearer {CLIENT_KEY}"},
            ) as resp:
                assert resp.status == 401
            async with http.post(
                keyed.url("/t/acme/v1/chat/completions"),
                json=chat(MARKER),
                headers={"X-Session-Id": MARKER + " !", "Authorization": f"Bearer {PROXY_KEY}"},
            ) as resp:
                assert resp.status == 400
        lines = await wait_for_request_lines(logs, 4)
    assert [line["status"] for line in lines] == [200, 200, 401, 400]
    assert [line.get("forwarded_as_sent") for line in lines[:2]] == ["stream", "messages[0].role"]
    assert len(upstream.fake.requests) == 2  # the two forwarded as sent; the 401 and the 400 never
    assert_nothing_secret(logs)


async def test_secrets_and_content_not_logged_on_upstream_500(keyed: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_error(500, openai_error(f"The server had an error ({MARKER})", type="server_error"))
    upstream.fake.reply_error(503, f"<html>overloaded {MARKER}</html>")
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            for expected in (500, 503):
                async with http.post(
                    keyed.url("/t/acme/v1/chat/completions"),
                    json=chat(MARKER),
                    headers={"Authorization": f"Bearer {PROXY_KEY}"},
                ) as resp:
                    assert resp.status == expected
                    await resp.read()
        lines = await wait_for_request_lines(logs, 2)
    assert [(line["status"], line["upstream_status"], line["tenant"]) for line in lines] == [
        (500, 500, "acme"),
        (503, 503, "acme"),
    ]
    assert_nothing_secret(logs)


async def test_secrets_not_logged_when_the_upstream_is_unreachable(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(
        {
            "acme": f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "{UPSTREAM_KEY}"\nconnect_timeout = 2\n'
        }
    )
    with capture() as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                proxy.url("/t/acme/v1/chat/completions"),
                json=chat(MARKER),
                headers={"Authorization": f"Bearer {PROXY_KEY}"},
            ) as resp:
                assert resp.status == 502
        [line] = await wait_for_request_lines(logs, 1)
    assert line["status"] == 502
    assert_nothing_secret(logs)


@pytest.mark.parametrize("kind", ["stream", "passthrough"])
async def test_request_id_echoed_on_streamed_and_passthrough_responses(
    proxy: Proxy, upstream: Upstream, kind: str
) -> None:
    async with aiohttp.ClientSession() as http:
        if kind == "stream":
            request = http.post(
                proxy.url("/v1/chat/completions"), json={**chat(), "stream": True}, headers={"X-Request-Id": "rid-1"}
            )
        else:
            request = http.get(proxy.url("/v1/models"), headers={"X-Request-Id": "rid-1"})
        async with request as resp:
            assert resp.status == 200
            await resp.read()
            assert resp.headers.get("X-Ctx-Request-Id") == "rid-1"


# An unexpected exception (any bug) while a request is handled, in a process whose logging is set
# up exactly as ``ctxproxy serve`` sets it up (JSON on stdout).
_CRASH_SCRIPT = """
import asyncio, sys
from aiohttp.test_utils import TestClient, TestServer
from ctxproxy.config import ConfigHolder
from ctxproxy.logs import configure_logging
from ctxproxy.server.app import create_app
import ctxproxy.upstream.port as port

def crash(*args, **kwargs):
    raise RuntimeError("simulated bug")

port.upstream_target = crash  # fails inside forward_chat's post, after the upstream headers are built

async def main():
    configure_logging("json", "info")
    app = create_app(ConfigHolder.load(sys.argv[1], {}))
    async with TestClient(TestServer(app)) as client:
        body = {"model": "m", "messages": [{"role": "user", "content": sys.argv[2]}]}
        resp = await client.post("/t/acme/v1/chat/completions", json=body, headers={"Authorization": "Bearer " + sys.argv[3]})
        print("STATUS", resp.status, file=sys.stderr)

asyncio.run(main())
"""


def test_unhandled_error_log_has_no_secrets_or_content(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "tenants").mkdir(parents=True)
    (config / "proxy.toml").write_text(f'[store]\npath = "{tmp_path / "data"}"\n')
    (config / "tenants" / "acme.toml").write_text(
        f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "{UPSTREAM_KEY}"\n'
    )
    script = tmp_path / "crash.py"
    script.write_text(_CRASH_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(config), MARKER, PROXY_KEY],
        capture_output=True, text=True, timeout=30, cwd=REPO, check=False,
    )  # fmt: skip
    assert "STATUS 500" in result.stderr, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    [crash] = [e for e in events if e["event"] == "request.unhandled_error"]
    assert "simulated bug" in json.dumps(crash)  # the traceback itself is logged ...
    [line] = [e for e in events if e["event"] == "request"]
    assert line["status"] == 500
    for secret in SECRETS[:3] + (MARKER,):  # ... but never a key or the message text
        assert secret not in result.stdout, f"{secret!r} in the log"
