"""What ctxproxy's response side costs above a bare aiohttp client call, per request, in-process.

    .venv/bin/python bench/portcost.py                  # 20 KB JSON body, ~20 s
    .venv/bin/python bench/portcost.py --chars 2480 --messages 200    # bench/overhead.py's body B

bench/overhead.py's upstream runs in a process of its own (``_servers.py upstream``); this process
posts overhead.py's body to it, alternately (1) as the bare forwarder does (one pooled
``ClientSession``, ``post`` and ``read``) and (2) as ctxproxy's chat path does after the request
side is done: ``UpstreamPort.post`` (headers filtered, the path checked, the tenant's timeouts,
the stopwatch), ``read``, the ``UsageTap`` reading the answer's usage and ``relay_body`` building
the client's response (not sent: there is no server here). It prints this process's CPU per
call for each, best of ``--rounds``, and the difference: the response side's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from multidict import CIMultiDict

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from _procs import free_ports, start, stop, wait_ready  # noqa: E402
from overhead import make_body  # noqa: E402

BARE, CTX = "bare client", "ctxproxy's response side"
CLIENT_HEADERS = {
    "Content-Type": "application/json",
    "Authorization": "Bearer sk-bench",
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": "bench",
}


async def run(args: argparse.Namespace) -> None:
    from ctxproxy.config.models import UpstreamConfig
    from ctxproxy.upstream.client import open_session
    from ctxproxy.upstream.port import UpstreamPort
    from ctxproxy.upstream.relay import relay_body
    from ctxproxy.upstream.usage import UsageTap

    with tempfile.TemporaryDirectory() as tmp:
        port = free_ports(1)[0]
        upstream = start(
            "upstream", [str(ROOT / "bench" / "_servers.py"), "upstream", "--port", str(port)], port, Path(tmp)
        )
        bare = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )
        http = await open_session()
        try:
            await wait_ready(bare, [upstream])
            body = make_body("A", args.messages, args.chars, False).build(1)
            url = upstream.url + "/v1/chat/completions"
            proxy = UpstreamPort(http, UpstreamConfig.model_validate({"base_url": upstream.url + "/v1"}))
            sent = CIMultiDict(CLIENT_HEADERS)

            async def forwarder() -> None:
                headers = {h: CLIENT_HEADERS[h] for h in ("Content-Type", "Authorization")}
                async with bare.post(url, data=body, headers=headers) as response:
                    await response.read()

            async def ctxproxy() -> None:
                tap = UsageTap()
                async with proxy.post("/chat/completions", body, sent) as response:
                    answer = await proxy.read(response)
                    tap.see_json(answer)
                    await relay_body(response, answer, {"X-Ctx-Tokens-Before": "1"})

            best: dict[str, float] = {}
            for _ in range(args.rounds):
                for name, call in ((BARE, forwarder), (CTX, ctxproxy)):
                    best[name] = min(best.get(name, float("inf")), await per_call(call, args.requests))
            print(f"body {len(body) / 1024:.0f} KB, {args.requests} calls a round, best of {args.rounds} rounds")
            for name, seconds in best.items():
                print(f"  {name}: {seconds * 1e6:.1f} µs CPU per call")
            print(f"  difference: {(best[CTX] - best[BARE]) * 1e6:.1f} µs")
        finally:
            await bare.close()
            await http.close()
            stop([upstream])


async def per_call(call: Callable[[], Awaitable[None]], n: int) -> float:
    for _ in range(n // 10):
        await call()
    started = time.process_time()
    for _ in range(n):
        await call()
    return (time.process_time() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=380, help="characters per message (380: overhead.py's body A)")
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--requests", type=int, default=1500, help="calls a round, each way")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
