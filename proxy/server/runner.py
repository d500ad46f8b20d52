"""Running the app for real: bind, serve, reload on SIGHUP, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import signal

import structlog
from aiohttp import web

from proxy.config import ConfigHolder
from proxy.server.app import create_app
from proxy.server.keys import CONFIG

log = structlog.get_logger(__name__)

# The same options for every way the server is started (tests use them too): a client that
# disconnects cancels its handler, and with it the upstream call.
RUNNER_OPTIONS = {"handler_cancellation": True, "access_log": None}


async def _reload_on_sighup(app: web.Application) -> None:
    holder = app[CONFIG]
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, holder.reload)


def serve(holder: ConfigHolder, host: str | None = None, port: int | None = None) -> None:
    server = holder.current.settings.server
    app = create_app(holder)
    app.on_startup.append(_reload_on_sighup)
    bind_host, bind_port = host or server.host, port or server.port
    log.info("server.starting", host=bind_host, port=bind_port, tenants=sorted(holder.current.tenants))
    web.run_app(
        app,
        host=bind_host,
        port=bind_port,
        shutdown_timeout=server.shutdown_timeout,
        print=None,
        **RUNNER_OPTIONS,  # type: ignore[arg-type]
    )
