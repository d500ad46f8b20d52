"""Running the app for real: bind, say where (``server.listening``, and on stderr one line with
the base URL each client kind takes and where the config came from), serve, reload on SIGHUP,
drain on SIGTERM / SIGINT. A port that cannot be bound is refused in words that name the fix."""

from __future__ import annotations

import asyncio
import errno
import gc
import importlib
import importlib.util
import signal
import sys
from collections.abc import Callable

import structlog
from aiohttp import web

from ctxproxy.config import ConfigHolder
from ctxproxy.server.app import create_app
from ctxproxy.server.protocol import ProxyAppRunner
from ctxproxy.services import CONFIG
from ctxproxy.store import StoreError

log = structlog.get_logger(__name__)


async def _reload_on_sighup(app: web.Application) -> None:
    holder = app[CONFIG]
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, holder.reload)


def listening_line(url: str, config: str) -> str:
    """What a person at a terminal reads once the port is bound: the base URL for each client kind
    (OpenAI's SDKs include ``/v1``, Anthropic's and Gemini's add their version themselves) and
    where the config came from."""
    bases = f"OpenAI base_url: {url}/v1, Anthropic base_url: {url}, Gemini base_url: {url}"
    return f"ctxproxy listening on {url} ({bases}; config: {config})"


def bind_failure(host: str, port: int, exc: OSError) -> str:
    """Why ``host:port`` cannot be listened on, and what to change."""
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"ctxproxy: not starting, port {port} is in use ({where}); stop what listens there, "
            f"or pick another port with --port N or CTXPROXY_PORT=N"
        )
    if exc.errno == errno.EACCES:
        return f"ctxproxy: not starting, no permission to listen on {where}; pick a port above 1023 with --port N"
    reason = exc.strerror or type(exc).__name__
    return f"ctxproxy: not starting, cannot listen on {where} ({reason}); check --host (or [server] host) and --port"


def serve(holder: ConfigHolder, host: str | None = None, port: int | None = None, config: str = "") -> None:
    """Serve until SIGTERM / SIGINT; ``config`` says where the config came from (the start-up line)."""
    server = holder.current.settings.server
    app = create_app(holder)
    app.on_startup.append(_reload_on_sighup)
    bind_host, bind_port = host or server.host, port or server.port
    config = config or str(holder.directory)
    loop_factory = uvloop_factory()
    log.info(
        "server.starting",
        host=bind_host,
        port=bind_port,
        tenants=sorted(holder.current.tenants),
        config=config,
        event_loop="asyncio" if loop_factory is None else "uvloop",
    )
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_run(app, bind_host, bind_port, server.shutdown_timeout, config))


def uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``pip install 'ctxproxy[fast]'``), else None
    (asyncio's own)."""
    if importlib.util.find_spec("uvloop") is None:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = importlib.import_module("uvloop").new_event_loop
    return factory


async def _run(app: web.Application, host: str, port: int, shutdown_timeout: float, config: str) -> None:
    runner = ProxyAppRunner(app, shutdown_timeout=shutdown_timeout)
    try:
        await runner.setup()
    except StoreError as exc:
        store = app[CONFIG].current.settings.store
        log.error("server.store_unavailable", backend=store.backend, error=str(exc))
        raise SystemExit(f"ctxproxy: not starting, the {store.backend} store cannot take writes: {exc}") from None
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            log.error("server.bind_failed", host=host, port=port, error=exc.strerror or type(exc).__name__)
            raise SystemExit(bind_failure(host, port, exc)) from None
        # What is alive once the server listens (modules, config, the stores, the tokenizer) stays
        # for good: out of the collector's sight, a full collection walks only what requests made.
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        stop = _stop_signal()  # before saying where: whoever reads it may stop the server at once
        log.info("server.listening", url=site.name)
        # For a person at a terminal: stdout is the JSON log, so the address goes to stderr.
        print(listening_line(site.name, config), file=sys.stderr, flush=True)
        await stop.wait()
        log.info("server.stopping")
    finally:
        await runner.cleanup()  # in-flight requests finish (up to shutdown_timeout), then the app closes


# The cyclic collector's thresholds once the server listens (CPython's are 700, 10, 10). A young
# collection walks every object still alive since the last one, and at any moment that includes
# the objects of every request in flight (most of what it walks at 50 concurrent requests): with
# 700 one ran every ~7 requests, and the collector cost ~40 µs of CPU a request in all; with
# 20,000 one runs every ~60 requests, ~5 µs (bench/overhead.py's quick counts, README "The relay,
# collected less and answered first"). A request leaves no reference cycle, so what waits longer is
# a cycle made elsewhere (an error's traceback); a full collection keeps CPython's ratio to the
# middle one.
GC_THRESHOLDS = (20_000, 20, 10)


def _stop_signal() -> asyncio.Event:
    """Set on SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
