"""Where ``ctxproxy serve`` and ``ctxproxy config check`` read their config, first match wins:

1. ``--config DIR`` when given; a path that is no directory is an error (most often a typo), and
   the error says so before it offers ``ctxproxy init``;
2. ``config/`` in the working directory, when it exists (what ``ctxproxy init`` writes);
3. else the starter config the package ships (``ctxproxy/config/starter``, the files ``init``
   writes), so ``ctxproxy serve`` works from any directory; the start-up line says so.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

from ctxproxy.commands.init import DEFAULT_DIRECTORY

__all__ = ["ConfigSource", "NoConfigDirectory", "config_source"]


@dataclass(frozen=True)
class ConfigSource:
    directory: Path
    builtin: bool  # the package's starter config: no directory was given or found

    def describe(self) -> str:
        """Where the config comes from, for a person reading the start-up line."""
        if self.builtin:
            return (
                f"the built-in starter config (no {DEFAULT_DIRECTORY}/ in {os.getcwd()}; "
                "`ctxproxy init` writes it there to edit)"
            )
        return str(self.directory.resolve())


class NoConfigDirectory(Exception):
    """``--config`` names something that is not a directory; the message says what to do."""


@contextmanager
def config_source(given: str | None) -> Iterator[ConfigSource]:
    """The config directory to read, as the module's docstring orders them (``given``: ``--config``)."""
    if given is not None:
        _require_directory(given, f"--config {given}")
        yield ConfigSource(Path(given), builtin=False)
    elif os.path.exists(DEFAULT_DIRECTORY):
        _require_directory(DEFAULT_DIRECTORY, DEFAULT_DIRECTORY)
        yield ConfigSource(Path(DEFAULT_DIRECTORY), builtin=False)
    else:
        with as_file(files("ctxproxy.config").joinpath("starter")) as starter:
            yield ConfigSource(starter, builtin=True)


def _require_directory(path: str, named: str) -> None:
    if os.path.isdir(path):
        return
    shown = named if os.path.isabs(path) else f"{named} ({os.path.abspath(path)})"
    if os.path.exists(path):
        raise NoConfigDirectory(f"{shown}: not a directory; name the directory that holds proxy.toml and tenants/.")
    raise NoConfigDirectory(
        f"{shown}: no such directory. Check the path; to create a starter config there, "
        f"run `ctxproxy init {shlex.quote(path)}`."
    )
