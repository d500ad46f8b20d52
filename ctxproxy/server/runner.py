"""Running the app for real: bind, say where (``server.listening``, and the URL on stderr), serve,
reload on SIGHUP, drain on SIGTERM / SIGINT."""

from __future__ import annotations

import asyncio
import signal
import sys

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


def serve(holder: ConfigHolder, host: str | None = None, port: int | None = None) -> None:
    server = holder.current.settings.server
    app = create_app(holder)
    app.on_startup.append(_reload_on_sighup)
    bind_host, bind_port = host or server.host, port or server.port
    log.info("server.starting", host=bind_host, port=bind_port, tenants=sorted(holder.current.tenants))
    asyncio.run(_run(app, bind_host, bind_port, server.shutdown_timeout))


async def _run(app: web.Application, host: str, port: int, shutdown_timeout: float) -> None:
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
            raise SystemExit(1) from None
        stop = _stop_signal()  # before saying where: whoever reads it may stop the server at once
        log.info("server.listening", url=site.name)
        # For a person at a terminal: stdout is the JSON log, so the address goes to stderr.
        print(f"ctxproxy listening on {site.name} (OpenAI base_url: {site.name}/v1)", file=sys.stderr, flush=True)
        await stop.wait()
        log.info("server.stopping")
    finally:
        await runner.cleanup()  # in-flight requests finish (up to shutdown_timeout), then the app closes


def _stop_signal() -> asyncio.Event:
    """Set on SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
