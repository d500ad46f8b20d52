"""What is wrong with a config directory, said so an operator can fix it.

A ``ConfigIssue(file, key, reason)`` is one problem; ``ConfigError`` carries all of a directory's
problems at once (and the warnings found on the way). ``validate`` turns a pydantic model's
complaints into issues, adding what the model alone would not say: the nearest valid key for an
unknown one ("did you mean `strategy`?"), and a number or boolean written in quotes
(``port = "8080"``), which pydantic would quietly convert. A value that ``${VAR}`` produced
(``interpolate.FromEnv``) is a string by necessity, so it may still stand for a number.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ctxproxy.config.interpolate import FromEnv

M = TypeVar("M", bound=BaseModel)
_EXPECTED = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false"}
_INTERNAL_FIELDS = frozenset({"name", "options"})  # filled by the loader, never written in a file


@dataclass(frozen=True)
class ConfigIssue:
    file: str
    key: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return f"{where}: {self.reason}"


class ConfigError(Exception):
    def __init__(self, issues: list[ConfigIssue], warnings: Iterable[ConfigIssue] = ()) -> None:
        super().__init__("\n".join(str(i) for i in issues))
        self.issues = issues
        self.warnings = tuple(warnings)


def validate(
    model: type[M],
    data: Mapping[str, Any],
    file: str,
    prefix: str,
    issues: list[ConfigIssue],
    tables: Mapping[str, Iterable[str]] | None = None,
) -> M | None:
    """``model`` from ``data``, or None with every problem added to ``issues``. ``tables``: more
    valid keys per table (``{"compaction": strategy names}``) for the did-you-mean hint."""
    before = len(issues)
    result: M | None = None
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        _report(exc.errors(), model, file, prefix, issues, tables or {})
    reported = {issue.key for issue in issues[before:]}
    for key, reason in _quoted_scalars(model, data):
        full = _join(prefix, key)
        if full not in reported:
            issues.append(ConfigIssue(file, full, reason))
    return result if len(issues) == before else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean `x`?)`` for the closest candidate, or nothing when none is close."""
    close = difflib.get_close_matches(word, [c for c in candidates if c != word], n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def unknown_choice(what: str, name: str, known: Iterable[str]) -> str:
    """Why ``name`` is no valid ``what`` (a strategy, a summarizer), with the valid ones."""
    names = list(known)
    return f"unknown {what} {name!r} (available: {', '.join(names)}){did_you_mean(name, names)}"


def _report(
    errors: Iterable[Any],
    model: type[BaseModel],
    file: str,
    prefix: str,
    issues: list[ConfigIssue],
    tables: Mapping[str, Iterable[str]],
) -> None:
    for err in errors:
        loc = tuple(str(p) for p in err["loc"])
        key = _join(prefix, ".".join(loc)) or None
        if err["type"] == "extra_forbidden":
            reason = "unknown key" + (_misplaced(model, loc, prefix) or _nearest_key(model, loc, tables))
        else:
            reason = err["msg"].removeprefix("Value error, ")
        issues.append(ConfigIssue(file, key, reason))


def _quoted_scalars(model: type[BaseModel], data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Keys whose number or boolean is written as a string in the file: pydantic's strict mode
    names them; what else strict mode refuses, the lax validation above has judged already."""
    try:
        model.model_validate(data, strict=True)
    except ValidationError as exc:
        return [
            (".".join(str(p) for p in err["loc"]), _quoted_reason(err["input"], _EXPECTED[err["type"]]))
            for err in exc.errors()
            if err["type"] in _EXPECTED and isinstance(err["input"], str) and not isinstance(err["input"], FromEnv)
        ]
    return []


def _quoted_reason(given: str, expected: str) -> str:
    shown = given if len(given) <= 40 else given[:37] + "..."
    return f"expected {expected}, got the string {shown!r}: write it without quotes"


def _misplaced(model: type[BaseModel], loc: tuple[str, ...], prefix: str) -> str:
    """Where a key of this very name belongs, when it is a key of an enclosing table (``api_keys``
    written in ``[upstream]`` belongs at the top of the tenant file): said before any spelling
    guess, which would name a different key (``api_key``)."""
    for depth in range(len(loc) - 2, -1, -1):
        outer = _model_at(model, loc[:depth])
        if outer is not None and loc[-1] in outer.model_fields and loc[-1] not in _INTERNAL_FIELDS:
            table = _join(prefix, ".".join(loc[:depth]))
            where = f"in the [{table}] table" if table else "at the top of the file, before any [table]"
            return f"; `{loc[-1]}` belongs {where}, not in [{_join(prefix, '.'.join(loc[:-1]))}]"
    return ""


def _nearest_key(model: type[BaseModel], loc: tuple[str, ...], tables: Mapping[str, Iterable[str]]) -> str:
    """A sibling key spelled alike, else a key of a table one level down with this very name
    (``strategy`` written outside ``[compaction]``)."""
    parent = _model_at(model, loc[:-1])
    if parent is None:
        return ""
    siblings = [name for name in parent.model_fields if name not in _INTERNAL_FIELDS]
    if len(loc) == 2:  # a table of the top-level model: its extra keys (strategy tables) too
        siblings += list(tables.get(loc[0], ()))
    hint = did_you_mean(loc[-1], siblings)
    if hint:
        return hint
    for name in siblings:
        child = _model_at(parent, (name,))
        if child is not None and loc[-1] in child.model_fields:
            return f"; did you mean `{name}.{loc[-1]}` (in the [{name}] table)?"
    return ""


def _model_at(model: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The model that validates the table at ``loc`` (a ``dict[str, Model]`` field's keys are
    skipped), or None when ``loc`` is not a table."""
    current = model
    parts = list(loc)
    while parts:
        field = current.model_fields.get(parts.pop(0))
        if field is None:
            return None
        annotation = _without_none(field.annotation)
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
            if not parts:
                return None
            parts.pop(0)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        current = annotation
    return current


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix and key else (prefix or key)
