"""``${VAR}`` substitution in config values.

``${VAR}`` is replaced by the environment variable; an unset variable is an error that names
it. ``${VAR:-default}`` falls back to ``default`` when VAR is unset or empty. ``$${`` writes a
literal ``${``; any other ``${`` (unclosed, empty, not a variable name) is an error. Only string
values are touched; keys never are.

A string that a substitution produced is a ``FromEnv``: the environment has only strings, so
such a value may stand for a number, while a number written in quotes in the file may not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Alternatives in order: a literal, a well-formed reference, and any other ``${`` (malformed).
_PATTERN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{")
MALFORMED = "unclosed or malformed ${...}: write ${VAR} or ${VAR:-fallback}, or $${ for a literal ${"


class FromEnv(str):
    """A string with at least one ``${VAR}`` substituted in it."""

    __slots__ = ()


class InterpolationError(Exception):
    """Every ``(key path, reason)`` that could not be substituted, in document order: each unset
    variable and each malformed reference, not just the first."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__(", ".join(f"{path}: {reason}" for path, reason in problems))
        self.problems = problems


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Return ``value`` with every ``${VAR}`` in its strings replaced; raises ``InterpolationError``."""
    problems: list[tuple[str, str]] = []
    result = _walk(value, env, "", problems)
    if problems:
        raise InterpolationError(problems)
    return result


def _walk(value: Any, env: Mapping[str, str], path: str, problems: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _substitute(value, env, path, problems)
    if isinstance(value, dict):
        return {k: _walk(v, env, f"{path}.{k}" if path else k, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, env, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    return value


def _substitute(text: str, env: Mapping[str, str], path: str, problems: list[tuple[str, str]]) -> str:
    substituted = False

    def replace(match: re.Match[str]) -> str:
        nonlocal substituted
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name is None:
            problems.append((path, MALFORMED))
            return ""
        substituted = True
        found = env.get(name)
        if found:
            return found
        if default is not None:
            return default
        if found is not None:  # set but empty, and no default: an empty value is still a value
            return found
        problems.append((path, f"environment variable {name} is not set"))
        return ""

    result = _PATTERN.sub(replace, text)
    return FromEnv(result) if substituted else result
