"""A request's own options (``StrategyOptions.request_overrides``), pure: ``rounds`` declares its
A and B; the values are checked, the options model has the last word, and a strategy that
declares nothing ignores the headers."""

from __future__ import annotations

from typing import ClassVar, Self

import pytest
from pydantic import model_validator

from ctxproxy.errors import BadRequest
from ctxproxy.strategies.base import RequestOverride, StrategyOptions
from ctxproxy.strategies.overrides import overridden
from ctxproxy.strategies.rolling_summary import RollingSummaryOptions
from ctxproxy.strategies.rounds import RoundsOptions


def test_rounds_takes_a_and_b_from_the_headers() -> None:
    options = RoundsOptions(full_context_turns=4, cached_context_turns=3, catch_up=True)
    changed = overridden(options, {"X-Ctx-Rounds-Full": " 2 ", "X-Ctx-Rounds-Cached": "1"})
    assert changed == RoundsOptions(full_context_turns=2, cached_context_turns=1, catch_up=True)
    assert overridden(options, {"X-Other": "1"}) is options


@pytest.mark.parametrize("value", ["0", "101", "", "+3", "3.0", "0x10", "²", "1" * 7])
def test_a_value_outside_the_bounds_names_the_header(value: str) -> None:
    with pytest.raises(BadRequest) as raised:
        overridden(RoundsOptions(), {"X-Ctx-Rounds-Cached": value})
    assert raised.value.param == "X-Ctx-Rounds-Cached" and "from 1 to 100" in raised.value.message


def test_a_strategy_without_overrides_ignores_the_headers() -> None:
    options = RollingSummaryOptions()
    assert overridden(options, {"X-Ctx-Rounds-Full": "nonsense"}) is options


class Window(StrategyOptions):
    """Options whose rule spans two of them: ``low`` must stay under ``high``."""

    request_overrides: ClassVar[tuple[RequestOverride, ...]] = (RequestOverride("X-Low", "low", 1, 100),)
    low: int = 1
    high: int = 10

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.low >= self.high:
            raise ValueError("low must be below high")
        return self


def test_the_options_model_has_the_last_word() -> None:
    assert overridden(Window(), {"X-Low": "5"}) == Window(low=5)
    with pytest.raises(BadRequest) as raised:
        overridden(Window(), {"X-Low": "50"})
    assert raised.value.param == "X-Low" and "cannot be combined" in raised.value.message
