"""``ctxproxy serve`` on a port already taken: one JSON log line saying so, one line on stderr
naming the fix (``--port`` / ``CTXPROXY_PORT``), exit status 1."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_taken_port_is_a_json_error_line_a_hint_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "tenants").mkdir(parents=True)
    (config / "proxy.toml").write_text(f'[store]\npath = "{tmp_path / "data"}"\n')
    (config / "tenants" / "default.toml").write_text('[upstream]\nbase_url = "http://127.0.0.1:9/v1"\n')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ctxproxy", "serve", "--config", str(config), "--port", str(port)],
            capture_output=True, text=True, timeout=30, cwd=REPO, check=False,
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"ctxproxy: not starting, port {port} is in use (127.0.0.1:{port}); stop what listens there, "
        "or pick another port with --port N or CTXPROXY_PORT=N"
    ]
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [failed] = [e for e in events if e["event"] == "server.bind_failed"]
    assert failed["level"] == "error" and failed["port"] == port
    assert "address already in use" in failed["error"]
    # It started on uvloop's event loop when uvloop is installed (the ``fast`` extra), asyncio's otherwise.
    [starting] = [e for e in events if e["event"] == "server.starting"]
    assert starting["event_loop"] == ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
