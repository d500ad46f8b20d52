"""What a new last message costs over a resent body: CPU per request, the two side by side.

    .venv/bin/python bench/newmessage.py                    # body A (50 x 380 characters), 3 rounds
    .venv/bin/python bench/newmessage.py --body B --requests 400
    .venv/bin/python bench/newmessage.py --src /work/base   # the ctxproxy package of another tree
    .venv/bin/python bench/newmessage.py --tools-kb 30      # an agent's body: 30 KB of tool definitions

The ctxproxy app (``create_app``, the shipped ``config/tenants/default.toml``, a diskcache store in
a temporary directory) and the client run in this process; the upstream is bench/overhead.py's
(``_servers.py upstream``), in a process of its own. The client sends overhead.py's body A or B
(``make_body``), strategy ``none``, sequentially, in rounds that alternate two variants: the same
body every request (``same``: its token counts and identification known) and a new last user
message every request (``new``: the previous request's last message replaced, as a regenerated
question). Printed per variant: this process's CPU per request (client and proxy; the client's
share is alike in both), each round, and the difference of the medians — what ctxproxy spends on
the new message. ``--src DIR`` imports ``ctxproxy`` from DIR (another tree's code, this tree's
bench helpers), so two trees are compared by two runs. ``--tools-kb N`` adds, after the
messages, a ``tools`` array of about N KB of function definitions, the same every request (what a
coding agent sends besides its history).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"A": (50, 380), "B": (200, 2480)}  # messages, characters each: overhead.py's bodies


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    from _config import proxy_toml
    from _procs import free_ports, start, stop, wait_ready
    from hotpath import serve
    from overhead import make_body

    from ctxproxy.config import ConfigHolder
    from ctxproxy.logs import configure_logging
    from ctxproxy.server.app import create_app

    configure_logging("json", "warning")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        port = free_ports(1)[0]
        upstream = start("upstream", [str(ROOT / "bench" / "_servers.py"), "upstream", "--port", str(port)], port, root)
        try:
            async with aiohttp.ClientSession() as http:
                await wait_ready(http, [upstream])
            (root / "tenants").mkdir()
            extra = f'[defaults.upstream]\nbase_url = "{upstream.url}/v1"\n'
            (root / "proxy.toml").write_text(proxy_toml(root / "store", "warning", extra))
            shutil.copy(ROOT / "config" / "tenants" / "default.toml", root / "tenants" / "default.toml")
            proxy, url = await serve(create_app(ConfigHolder.load(root, {})))
            messages, chars = SIZES[args.body]
            body = make_body(args.body, messages, chars, False)
            if args.tools_kb:
                body = dataclasses.replace(body, suffix=body.suffix[:-1] + b',"tools":' + _tools(args.tools_kb) + b"}")
            try:
                async with aiohttp.ClientSession() as http:
                    return await _rounds(http, url + "/v1/chat/completions", body, args)
            finally:
                await proxy.cleanup()
        finally:
            stop([upstream])


def _tools(kb: int) -> bytes:
    """About ``kb`` KB of function definitions (JSON), each with a description and parameters."""
    tools: list[dict[str, Any]] = []
    while len(json.dumps(tools)) < kb * 1000:
        n = len(tools)
        params = {f"arg{j}": {"type": "string", "description": f"argument {j} of tool {n}, " * 3} for j in range(4)}
        schema = {"type": "object", "properties": params, "required": ["arg0"]}
        description = f"Tool {n} does one thing to the workspace and reports what it did. " * 4
        tools.append(
            {"type": "function", "function": {"name": f"tool_{n}", "description": description, "parameters": schema}}
        )
    return json.dumps(tools, separators=(",", ":")).encode()


async def _rounds(http: aiohttp.ClientSession, url: str, body: Any, args: argparse.Namespace) -> dict[str, list[float]]:
    """``body``: overhead.py's ``Body``."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}

    async def send(data: bytes) -> None:
        async with http.post(url, data=data, headers=headers) as response:
            answer = await response.read()
            if response.status != 200:
                raise SystemExit(f"HTTP {response.status}: {answer[:300]!r}")

    cpu: dict[str, list[float]] = {"same": [], "new": []}
    uid = 0
    for _ in range(args.rounds):
        for variant in cpu:
            bodies = []
            for _ in range(args.warmup + args.requests):
                uid += 1
                bodies.append(body.build(0 if variant == "same" else uid))
            for data in bodies[: args.warmup]:
                await send(data)
            c0 = time.process_time()
            for data in bodies[args.warmup :]:
                await send(data)
            cpu[variant].append((time.process_time() - c0) / args.requests * 1e6)
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body", choices=sorted(SIZES), default="A")
    parser.add_argument("--requests", type=int, default=1000, help="measured requests per variant and round")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", default="", help="import ctxproxy from this tree instead of this one")
    parser.add_argument("--tools-kb", type=int, default=0, help="add a tools array of about this many KB")
    args = parser.parse_args()
    sys.path[:0] = [args.src or str(ROOT), str(ROOT / "bench")]
    import ctxproxy  # first: the bench helpers put this tree on the path too

    cpu = asyncio.run(run(args))

    messages, chars = SIZES[args.body]
    tools = f", {args.tools_kb} KB of tools" if args.tools_kb else ""
    where = Path(ctxproxy.__file__).parent.parent
    print(f"ctxproxy from {where}; body {args.body} ({messages} x {chars} characters{tools})")
    print(f"CPU per request of this process (client + proxy), µs, {args.rounds} rounds of {args.requests}:")
    for variant, values in cpu.items():
        each = ", ".join(f"{v:.0f}" for v in values)
        print(f"  {variant:>4}: {each}  (median {statistics.median(values):.0f})")
    print(f"  a new last message costs {statistics.median(cpu['new']) - statistics.median(cpu['same']):.0f} µs more")


if __name__ == "__main__":
    main()
