"""Options a request sets for itself: a strategy's ``request_overrides`` read from its headers. Pure.

A strategy's options model lists the headers it honours (``StrategyOptions.request_overrides``,
e.g. ``rounds``' ``X-Ctx-Rounds-Full``); the others ignore them, so nothing here or in the
pipeline knows a strategy. Each value must be a whole number within the override's bounds, and
the options it makes must pass the options model's own checks; anything else is the client's
mistake, a ``BadRequest`` naming the header (never echoing the value).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from ctxproxy.errors import BadRequest
from ctxproxy.strategies.base import RequestOverride, StrategyOptions

__all__ = ["overridden"]

_MAX_DIGITS = 6


def overridden(options: StrategyOptions, headers: Mapping[str, str]) -> StrategyOptions:
    """``options`` with what the request's headers set; ``options`` itself when they set nothing."""
    wanted = [(o, headers[o.header]) for o in type(options).request_overrides if o.header in headers]
    if not wanted:
        return options
    values = {override.option: _whole_number(override, raw) for override, raw in wanted}
    try:
        return type(options).model_validate({**options.model_dump(), **values})
    except ValidationError as exc:
        fields = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        names = [o.header for o, _ in wanted if o.option in fields] or [o.header for o, _ in wanted]
        raise BadRequest(
            f"{' and '.join(names)} cannot be combined with the tenant's other options for this strategy.",
            param=names[0],
            code="invalid_header",
        ) from None


def _whole_number(override: RequestOverride, raw: str) -> int:
    text = raw.strip()
    if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS:
        value = int(text)
        if override.minimum <= value <= override.maximum:
            return value
    raise BadRequest(
        f"{override.header} must be a whole number from {override.minimum} to {override.maximum} "
        f"(this request's {override.option}).",
        param=override.header,
        code="invalid_header",
    )
