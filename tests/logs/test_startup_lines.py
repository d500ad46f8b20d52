"""What the proxy says when it starts and stops: a ``tenant.ready`` line per tenant (upstream host,
strategy, mode, whose key, effective windows; never a key or a credential of the URL), a
``server.stopped`` line, and ``ctxproxy serve`` prints the URL it listens on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.conftest import MakeProxy, Upstream
from tests.logs.lines import capture, named
from tests.server.test_reload import free_port

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_KEY = "sk-STARTUP-upstream-4c1d"
PROXY_KEY = "pk-STARTUP-proxy-8a2e"
URL_SECRET = "hunter2-STARTUP"
ACME = f"""
api_keys = ["{PROXY_KEY}"]
[upstream]
base_url = "https://bob:{URL_SECRET}@llm.example.com:8443/v1"
api_key = "{UPSTREAM_KEY}"
[compaction]
strategy = "cut_point"
mode = "background"
[models."gpt-4o*"]
context_window = 64000
[models."claude*"]
input_price_per_mtok = 3.0
"""
PLAIN = '[upstream]\nbase_url = "{upstream}"\n'


async def test_one_line_per_tenant_at_start_and_one_at_stop(make_proxy: MakeProxy, upstream: Upstream) -> None:
    with capture() as logs:
        proxy = await make_proxy({"acme": ACME, "default": PLAIN})
        await proxy.server.close()
    acme, default = named(logs, "tenant.ready")
    assert acme["tenant"] == "acme" and default["tenant"] == "default"
    assert acme["upstream_host"] == "llm.example.com:8443"
    assert (acme["strategy"], acme["mode"], acme["auth"], acme["proxy_keys"]) == (
        "cut_point",
        "background",
        "own_key",
        1,
    )
    # Each pattern's effective window: its own, else the built-in table's.
    assert acme["windows"] == {"gpt-4o*": 64000, "claude*": 200_000}
    assert default["auth"] == "client_key" and default["strategy"] == "none" and default["windows"] == {}
    assert default["upstream_host"] == upstream.server.make_url("/").raw_authority
    [stopped] = named(logs, "server.stopped")
    assert stopped["config_generation"] == 1
    assert logs.index(stopped) > logs.index(default)
    text = repr(logs)
    for secret in (UPSTREAM_KEY, PROXY_KEY, URL_SECRET, "bob"):
        assert secret not in text


def test_serve_prints_its_url_and_logs_start_and_stop(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "tenants").mkdir(parents=True)
    (config / "proxy.toml").write_text(f'[store]\npath = "{tmp_path / "data"}"\n')
    (config / "tenants" / "acme.toml").write_text(ACME)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxproxy", "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the server is bound (or the process ends)
        url = f"http://127.0.0.1:{port}"
        assert line.strip() == (
            f"ctxproxy listening on {url} (OpenAI base_url: {url}/v1, Anthropic base_url: {url}, "
            f"Gemini base_url: {url}; config: {config.resolve()})"
        )
        # the base URLs it names are the ones the server's own root answers with
        with urllib.request.urlopen(f"{url}/", timeout=10) as probe:
            bases = json.loads(probe.read())["base_urls"]
        assert {kind: url + path.rstrip("/") for kind, path in bases.items()} == {
            "openai": f"{url}/v1",
            "anthropic": url,
            "gemini": url,
        }
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    names = [e["event"] for e in events]
    assert names.index("tenant.ready") < names.index("server.listening") < names.index("server.stopped")
    [listening] = [e for e in events if e["event"] == "server.listening"]
    assert listening["url"] == url
    [ready] = [e for e in events if e["event"] == "tenant.ready"]
    assert ready["upstream_host"] == "llm.example.com:8443" and ready["auth"] == "own_key"
    for secret in (UPSTREAM_KEY, PROXY_KEY, URL_SECRET):
        assert secret not in out + err
