"""Many agent-sized sessions at once, and what a memory layer of 2,000 pages costs a request.

    .venv/bin/python bench/sessions.py                         # 1,000 sessions of 200 messages, 2,000 pages
    .venv/bin/python bench/sessions.py --sessions 200 --pages 500
    .venv/bin/python bench/sessions.py --proxy-src /tmp/old    # the same against another ctxproxy/ tree

**Sessions.** The ctxproxy app (``create_app``, strategy ``none``, a diskcache store in a
temporary directory) and a local upstream run in this process. ``--sessions`` conversations of
``--messages`` messages (~``--message-chars`` characters each, every conversation its own text)
are sent at concurrency ``--concurrency``, then each conversation's next turn (two messages more),
as clients that resend their history do. Prints the resident memory before, after each wave and
its peak (``VmHWM``), the bytes the caches account for, and the CPU seconds of each wave (this
process: the client and the upstream included, alike for every ctxproxy version).

**A memory layer of ``--pages`` pages.** A ``MemoryStore`` on a diskcache store holds a session
layer of that many archived pages; after a search built its index, one more page is archived (as
a ``paged`` archival does) and the next search, the first request to need the index, is timed:
that is how long a request waits for the index to catch up. The archival's write is timed too
(it runs in a background task, off the request path), and the same search once more (the
search's own cost, nothing to update). Median of ``--repeats``.
Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
WORDS = "agent tool file read patch test build error trace module import class function value branch".split()
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    }
)


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def text(seed: int, chars: int) -> str:
    words = [WORDS[(seed * 7 + i * 13 + i * i) % len(WORDS)] + str((seed + i) % 97) for i in range(chars // 6 + 1)]
    return " ".join(words)[:chars]


def messages(session: int, count: int, chars: int) -> list[dict[str, str]]:
    out = [{"role": "system", "content": "You are a coding agent. Use the tools."}]
    for i in range(1, count):
        out.append(
            {"role": "user" if i % 2 else "assistant", "content": f"s{session} m{i} " + text(session + i, chars)}
        )
    return out


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def upstream_chat(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=COMPLETION, content_type="application/json")


async def sessions(args: argparse.Namespace) -> None:
    from ctxproxy.config import ConfigHolder
    from ctxproxy.logs import configure_logging
    from ctxproxy.server.app import create_app
    from ctxproxy.services import CACHES

    configure_logging("json", "warning")
    up = web.Application(client_max_size=1 << 30)
    up.router.add_post("/v1/chat/completions", upstream_chat)
    up_runner, up_url = await serve(up)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tenants").mkdir()
        (root / "proxy.toml").write_text(f'[server]\nlog_level = "warning"\n[store]\npath = "{root / "data"}"\n')
        (root / "tenants" / "default.toml").write_text(f'[upstream]\nbase_url = "{up_url}/v1"\n')
        app = create_app(ConfigHolder.load(root, {}))
        runner, url = await serve(app)
        convs = [messages(s, args.messages + 2, args.message_chars) for s in range(args.sessions)]
        print("| after | RSS MiB | peak RSS MiB | caches account MiB | CPU s | wall s |")
        print("|---|---|---|---|---|---|")

        def row(label: str, cpu: float, wall: float) -> None:
            gc.collect()
            caches = app[CACHES].nbytes / 2**20
            rss, peak = status_mib("VmRSS"), status_mib("VmHWM")
            print(f"| {label} | {rss:.0f} | {peak:.0f} | {caches:.1f} | {cpu:.1f} | {wall:.1f} |", flush=True)

        try:
            row("start", 0.0, 0.0)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency)) as http:
                for label, n in (("first turn", args.messages), ("second turn", args.messages + 2)):
                    bodies = [orjson.dumps({"model": "gpt-4.1", "messages": conv[:n]}) for conv in convs]
                    c0, t0 = time.process_time(), time.perf_counter()
                    await send_all(http, url, bodies, args.concurrency)
                    row(f"{label} ({args.sessions} × {n} messages)", time.process_time() - c0, time.perf_counter() - t0)
        finally:
            await runner.cleanup()
            await up_runner.cleanup()


async def send_all(http: aiohttp.ClientSession, url: str, bodies: list[bytes], concurrency: int) -> None:
    queue = iter(bodies)

    async def worker() -> None:
        for data in queue:
            async with http.post(
                url + "/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}
            ) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"HTTP {r.status}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def memory_index(args: argparse.Namespace) -> None:
    from ctxproxy.memory.cards import MemoryCard
    from ctxproxy.memory.memories import MemoryStore
    from ctxproxy.memory.scopes import MemoryScope
    from ctxproxy.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("diskcache", Path(tmp) / "store")
        memories = MemoryStore(store, max_docs_per_layer=args.pages + args.repeats + 10)
        scope = MemoryScope("bench", "session-1", user="u1")

        def page(n: int) -> MemoryCard:
            return MemoryCard(f"page-{n}", text(n, 600), "fact", (), 1e9 + n, "session-1", n, "page")

        for start in range(0, args.pages, 200):
            await memories.add(scope, [page(n) for n in range(start, min(start + 200, args.pages))], to=["session"])
        await memories.search(scope, "tool error trace", 5)
        waits, writes, again = [], [], []
        for k in range(args.repeats):
            t0 = time.perf_counter()
            await memories.add(scope, [page(args.pages + k)], to=["session"])
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await memories.search(scope, "tool error trace", 5)
            waits.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await memories.search(scope, "tool error trace", 5)
            again.append(time.perf_counter() - t0)
        await store.close()
    print(
        f"\nMemory layer of {args.pages:,} pages: the first search after an archival waited "
        f"{1000 * statistics.median(waits):.1f} ms (median of {args.repeats}; max {1000 * max(waits):.1f} ms; "
        "aim ≤ 20 ms); the archival's write itself (a background task's) took "
        f"{1000 * statistics.median(writes):.1f} ms (max {1000 * max(writes):.1f} ms); the same search again, "
        f"nothing to update, {1000 * statistics.median(again):.1f} ms (max {1000 * max(again):.1f} ms)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--message-chars", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-only", action="store_true", help="only the memory layer part")
    parser.add_argument("--proxy-src", type=Path, default=ROOT, help="directory holding the ctxproxy/ package to run")
    args = parser.parse_args()
    sys.path.insert(0, str(args.proxy_src.resolve()))
    if not args.memory_only:
        asyncio.run(sessions(args))
    asyncio.run(memory_index(args))


if __name__ == "__main__":
    main()
