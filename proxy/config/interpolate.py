"""``${VAR}`` substitution in config values.

``${VAR}`` is replaced by the environment variable; an unset variable is an error that names
it. ``${VAR:-default}`` falls back to ``default`` when VAR is unset or empty. ``$${`` writes a
literal ``${``. Only string values are touched; keys never are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PATTERN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class UnsetVariable(Exception):
    def __init__(self, path: str, variable: str) -> None:
        super().__init__(f"environment variable {variable} is not set")
        self.path = path
        self.variable = variable


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """Return ``value`` with every ``${VAR}`` in its strings replaced; raises UnsetVariable."""
    if isinstance(value, str):
        return _substitute(value, env, path)
    if isinstance(value, dict):
        return {k: interpolate(v, env, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _substitute(text: str, env: Mapping[str, str], path: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found:
            return found
        if default is not None:
            return default
        if found is not None:  # set but empty, and no default: an empty value is still a value
            return found
        raise UnsetVariable(path, name)

    return _PATTERN.sub(replace, text)
