"""The live config of a running proxy and its reload.

Each request reads ``holder.current`` once and keeps that snapshot, so a reload never changes
the config under a request in flight. A reload that fails validation keeps the old config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import structlog

from ctxproxy.config.loader import Config, ConfigError, load_config

log = structlog.get_logger(__name__)
# Read once when the app starts (bind address, store, token counter, plugins); a reload cannot apply them.
RESTART_SECTIONS = ("server", "store", "tokens", "plugins")


class ConfigHolder:
    def __init__(self, config: Config, env: Mapping[str, str] | None = None) -> None:
        self._current = config
        self._env = env
        self.generation = 1

    @classmethod
    def load(cls, directory: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> ConfigHolder:
        return cls(load_config(directory, env), env)

    @property
    def current(self) -> Config:
        return self._current

    @property
    def directory(self) -> Path:
        return self._current.directory

    def reload(self) -> bool:
        """Load the directory again; swap only if it is valid. Returns whether it swapped."""
        try:
            config = load_config(self._current.directory, self._env, self._current.plugins)
        except ConfigError as exc:
            log.error("config.reload_rejected", errors=[str(i) for i in exc.issues], kept_generation=self.generation)
            return False
        old, new = self._current.settings, config.settings
        changed = [name for name in RESTART_SECTIONS if getattr(old, name) != getattr(new, name)]
        if changed:
            log.warning("config.restart_required", sections=changed, note="these sections take effect after a restart")
        self._current = config
        self.generation += 1
        log.info("config.reloaded", generation=self.generation, tenants=sorted(config.tenants))
        return True
