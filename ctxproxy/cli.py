"""``ctxproxy`` command line (DESIGN.md §6)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ctxproxy.commands.check import print_plugins, print_warnings, print_windows
from ctxproxy.commands.init import DEFAULT_DIRECTORY as DEFAULT_CONFIG
from ctxproxy.commands.init import write_starter
from ctxproxy.config import ConfigError, ConfigHolder, load_config
from ctxproxy.config.loader import Config
from ctxproxy.demo.options import add_demo_arguments

PORT_ENV = "CTXPROXY_PORT"  # the Docker image's port: its HEALTHCHECK reads the same variable


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxproxy", description="OpenAI-compatible context-compacting proxy")
    parser.add_argument("--version", action="version", version=f"ctxproxy {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    init = commands.add_parser("init", help="write a starter config directory (proxy.toml, tenants/default.toml)")
    init.add_argument("directory", nargs="?", default=DEFAULT_CONFIG, help="where to write it (default: config/)")
    init.add_argument("--force", action="store_true", help="overwrite the starter files if they exist")

    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", default=DEFAULT_CONFIG, help="config directory (default: config/)")
    serve.add_argument("--host", help="bind address (default: server.host in proxy.toml)")
    serve.add_argument(
        "--port",
        type=int,
        default=os.environ.get(PORT_ENV) or None,
        help=f"port (default: ${PORT_ENV} when set, else server.port in proxy.toml, 8080)",
    )

    config = commands.add_parser("config", help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    check = config_commands.add_parser("check", help="validate every config file")
    check.add_argument("--config", default=DEFAULT_CONFIG, help="config directory (default: config/)")
    demo = commands.add_parser("demo", help="replay a long conversation through the proxy, offline")
    add_demo_arguments(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "init":
        return write_starter(args.directory, args.force, os.environ, sys.stdout, sys.stderr)
    if args.command == "config":
        return _check(args.config)
    if args.command == "demo":
        from ctxproxy.demo import replay

        return replay.main(args.conversation, args.turns, args.strategy, args.window, sys.stdout, args.protocol)
    return _serve(args.config, args.host, args.port)


def _version() -> str:
    try:
        return version("ctxproxy")
    except PackageNotFoundError:
        return "(version unknown: not installed as a package)"


def _no_config_directory(directory: str) -> bool:
    """Say how to make one (``ctxproxy init``) rather than that it does not exist."""
    if os.path.isdir(directory):
        return False
    init = "ctxproxy init" + ("" if directory == DEFAULT_CONFIG else f" {shlex.quote(directory)}")
    where = directory if os.path.isabs(directory) else f"{directory} ({os.path.abspath(directory)})"
    print(
        f"error: no config directory at {where}; create a starter one with `{init}`, or pass --config DIR",
        file=sys.stderr,
    )
    return True


def _check(directory: str) -> int:
    if _no_config_directory(directory):
        return 1
    try:
        config = load_config(directory)
    except ConfigError as exc:
        print_warnings(exc.warnings, sys.stderr)
        for issue in exc.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"{len(exc.issues)} error(s) in {directory}", file=sys.stderr)
        return 1
    names = ", ".join(sorted(config.tenants)) or "none"
    print(f"{directory}: OK ({len(config.tenants)} tenant(s): {names})")
    print_warnings(config.warnings, sys.stderr)
    print_windows(config, sys.stdout)
    print_plugins(config, sys.stdout)
    _print_learned(config)
    return 0


def _print_learned(config: Config) -> None:
    """The windows the proxy learned (``ctxproxy.compaction.learning``), next to the configured ones,
    when the store exists already (a check never creates one)."""
    from ctxproxy.store import StoreError, existing_store

    store = config.settings.store
    where = existing_store(store.backend, store.path, store.open_args()["url"])
    if where is None:
        return
    try:
        rows = asyncio.run(_learned_rows(config))
    except StoreError as exc:
        print(f"learned windows: cannot read the store at {where}: {exc}", file=sys.stderr)
        return
    if not rows:
        print(f"learned windows: none yet (store {where})")
        return
    print(f"learned windows (store {where}):")
    for tenant, row in rows:
        learned = row["learned_window"]
        window = "-" if learned is None else f"{learned} ({row['window_source']}, {row['window_learned_at']})"
        ratio = "-" if row["count_ratio"] is None else f"{row['count_ratio']} ({row['samples']} samples)"
        print(
            f"  {tenant} {row['model'] or '(no model)'}: configured {row['configured_window']}, learned {window}, "
            f"count ratio {ratio}, pre-flight window {row['preflight_window']}"
        )


async def _learned_rows(config: Config) -> list[tuple[str, dict[str, Any]]]:
    from ctxproxy.cache import ByteLRU
    from ctxproxy.compaction.learning import WindowLearning
    from ctxproxy.store import open_store

    store = open_store(**config.settings.store.open_args())
    try:
        learning = WindowLearning(store, ByteLRU(1 << 20))
        return [(name, row) for name in sorted(config.tenants) for row in await learning.report(config.tenants[name])]
    finally:
        await store.close()


def _serve(directory: str, host: str | None, port: int | None) -> int:
    from ctxproxy.logs import configure_logging
    from ctxproxy.server.runner import serve

    if _no_config_directory(directory):
        return 2
    try:
        holder = ConfigHolder.load(directory)
    except ConfigError as exc:
        for issue in exc.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"ctxproxy: not starting, {len(exc.issues)} config error(s)", file=sys.stderr)
        return 2
    server = holder.current.settings.server
    configure_logging(server.log_format, server.log_level)
    serve(holder, host, port)
    return 0
