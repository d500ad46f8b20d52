"""``ctxproxy`` command line (DESIGN.md §6)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ctxproxy.commands.check import print_plugins, print_warnings, print_windows
from ctxproxy.commands.config_dir import ConfigSource, NoConfigDirectory, config_source
from ctxproxy.commands.init import DEFAULT_DIRECTORY as DEFAULT_CONFIG
from ctxproxy.commands.init import STARTER_UPSTREAMS, write_starter
from ctxproxy.config import ConfigError, ConfigHolder, load_config
from ctxproxy.config.loader import Config
from ctxproxy.demo.options import add_demo_arguments, demo_options

PORT_ENV = "CTXPROXY_PORT"  # the Docker image's port: its HEALTHCHECK reads the same variable
CONFIG_HELP = (
    f"config directory (default: {DEFAULT_CONFIG}/ in the working directory when it exists, "
    "else the built-in starter config)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxproxy",
        description="A context-compacting proxy for LLM APIs: OpenAI chat completions (/v1/chat/completions) and "
        "Anthropic Messages (/v1/messages) are compacted; every other /v1/... path (the Responses API "
        "included) is relayed as it is.",
    )
    parser.add_argument("--version", action="version", version=f"ctxproxy {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    init = commands.add_parser("init", help="write a starter config directory (proxy.toml, tenants/default.toml)")
    init.add_argument("directory", nargs="?", default=DEFAULT_CONFIG, help="where to write it (default: config/)")
    init.add_argument("--force", action="store_true", help="overwrite the starter files if they exist")
    init.add_argument(
        "--upstream",
        choices=list(STARTER_UPSTREAMS),
        default="openai",
        help="the API the default tenant forwards to: %(choices)s (default openai)",
    )

    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help=CONFIG_HELP)
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
    check.add_argument("--config", help=CONFIG_HELP)
    demo = commands.add_parser(
        "demo", help="replay a long conversation through the proxy, offline (or through a running one: --url)"
    )
    add_demo_arguments(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(_parser().parse_args(argv))
        finally:
            sys.stdout.flush()  # here, not at exit (--help exits too): a reader that left is handled below
    except BrokenPipeError:
        # Whoever read stdout stopped reading: what it did not read is not wanted, nor a traceback.
        # Python would try to flush stdout again at exit, so it goes to /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "init":
        return write_starter(args.directory, args.force, os.environ, sys.stdout, sys.stderr, args.upstream)
    if args.command == "config":
        return _check(args.config)
    if args.command == "demo":
        from ctxproxy.demo import replay

        try:
            options = demo_options(args)
        except ValueError as exc:
            print(f"ctxproxy demo: {exc}", file=sys.stderr)
            return 2
        return replay.main(options, sys.stdout)
    return _serve(args.config, args.host, args.port)


def _version() -> str:
    try:
        return version("ctxproxy")
    except PackageNotFoundError:
        return "(version unknown: not installed as a package)"


def _check(given: str | None) -> int:
    try:
        with config_source(given) as source:
            return _check_source(source)
    except NoConfigDirectory as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _check_source(source: ConfigSource) -> int:
    shown = source.describe() if source.builtin else str(source.directory)
    try:
        config = load_config(source.directory)
    except ConfigError as exc:
        print_warnings(exc.warnings, sys.stderr)
        for issue in exc.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"{len(exc.issues)} error(s) in {shown}", file=sys.stderr)
        return 1
    names = ", ".join(sorted(config.tenants)) or "none"
    print(f"{shown}: OK ({len(config.tenants)} tenant(s): {names})")
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


def _serve(given: str | None, host: str | None, port: int | None) -> int:
    try:
        with config_source(given) as source:
            return _serve_source(source, host, port)
    except NoConfigDirectory as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _serve_source(source: ConfigSource, host: str | None, port: int | None) -> int:
    from ctxproxy.logs import configure_logging
    from ctxproxy.server.runner import serve

    try:
        holder = ConfigHolder.load(source.directory)
    except ConfigError as exc:
        for issue in exc.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"ctxproxy: not starting, {len(exc.issues)} config error(s) in {source.describe()}", file=sys.stderr)
        return 2
    server = holder.current.settings.server
    configure_logging(server.log_format, server.log_level)
    serve(holder, host, port, config=source.describe())
    return 0
