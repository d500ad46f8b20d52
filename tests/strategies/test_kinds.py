"""Block kinds: what a checkpoint's blocks read as, and what the registry lets strategies declare."""

from __future__ import annotations

from typing import ClassVar

import pytest

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Plan, StrategyOptions
from ctxproxy.strategies.emergency import emergency_plan
from ctxproxy.strategies.kinds import HISTORY, SUMMARY_HEADER, BlockKind, BlockKinds
from ctxproxy.strategies.paged import CONTENTS_PAGE
from ctxproxy.strategies.registry import StrategyRegistry, builtin_registry
from ctxproxy.strategies.rounds import ROUNDS, SESSION_MEMORY_HEADER
from ctxproxy.strategies.traits import StrategyTraits
from tests.strategies.factories import assistant, conversation, system, user

KINDS = builtin_registry().kinds


def test_the_builtin_registry_knows_every_kind_its_strategies_write() -> None:
    assert KINDS["rounds"] is ROUNDS and KINDS["contents"] is CONTENTS_PAGE
    assert KINDS["history"] is HISTORY and KINDS["turn_prefix"].name == "turn_prefix"
    assert KINDS["written-by-an-uninstalled-strategy"] is HISTORY
    assert "rounds" in KINDS and "written-by-an-uninstalled-strategy" not in KINDS


def test_a_history_block_and_a_split_turn_read_as_one_summary() -> None:
    blocks = (Block(1, 4, " Goal: ship it. "), Block(4, 6, "User asked for tests.", "turn_prefix"))
    assert (
        KINDS.render(blocks)
        == f"{SUMMARY_HEADER}\n\nGoal: ship it.\n\n### Current turn so far\n\nUser asked for tests."
    )
    assert KINDS.of(blocks) is HISTORY and KINDS.of(blocks).message_name == "context_summary"


def test_session_memory_blocks_read_as_sections_and_a_contents_page_as_stored() -> None:
    rounds = (Block(1, 3, "first"), Block(3, 7, "second"))
    rounds = tuple(Block(b.start, b.end, b.text, "rounds") for b in rounds)
    assert KINDS.render(rounds) == f"{SESSION_MEMORY_HEADER}\n\n### Messages 2-3\n\nfirst\n\n### Messages 4-7\n\nsecond"
    page = (Block(1, 5, "## Contents Page\n\n[Page #1] User: hi\n", "contents"),)
    assert KINDS.render(page) == "## Contents Page\n\n[Page #1] User: hi"
    assert KINDS.of(page).message_name == "contents_page" and KINDS.recall_blocks(page) == list(page)
    # Kinds mixed (a tenant switched from paged to rounds): one summary, each block as a section.
    mixed = (*page, Block(5, 7, "later", "rounds"))
    assert KINDS.render(mixed) == f"{SUMMARY_HEADER}\n\n## Contents Page\n\n[Page #1] User: hi\n\nlater"
    assert KINDS.recall_blocks(mixed) == list(page)


def test_the_emergency_plan_never_folds_a_block_that_is_not_summarisable() -> None:
    messages = [system(), *(m for i in range(6) for m in (user(f"u{i}"), assistant(f"a{i}"))), user("last")]
    conv: Conversation = conversation(messages, 100, window=600, summary_budget=200)
    history = Checkpoint(3, "x" * 64, (Block(1, 3, "summary"),), 0.0)
    page = Checkpoint(3, "x" * 64, (Block(1, 3, "## Contents Page", "contents"),), 0.0, state={"turn": 1})
    folded = emergency_plan(conv, history, KINDS)
    assert folded is not None and folded.merge
    assert KINDS.summarisable(history) and not KINDS.summarisable(page)
    # The Contents Page is kept whole: what follows it becomes a block of its own after it,
    # and the checkpoint's state (the archive's index) is carried.
    after = emergency_plan(conv, page, KINDS)
    assert after is not None and not after.merge and after.start == 3 and after.block_kind == "turn_prefix"
    assert after.state == {"turn": 1} and after.end == folded.end == conv.total - 1


def test_a_contents_page_followed_by_a_split_turn_reads_as_a_contents_page() -> None:
    blocks = (Block(1, 5, "## Contents Page\n\n[Page #1] User: hi\n", "contents"), Block(5, 8, "ran ls", "turn_prefix"))
    assert KINDS.of(blocks) is CONTENTS_PAGE
    assert KINDS.render(blocks) == "## Contents Page\n\n[Page #1] User: hi\n\n### Current turn so far\n\nran ls"


class _Declares:
    name: ClassVar[str] = "declares"
    options_model: ClassVar[type[StrategyOptions]] = StrategyOptions
    traits: ClassVar[StrategyTraits] = StrategyTraits(block_kinds=(BlockKind("contents"),))

    def __init__(self, options: StrategyOptions) -> None:
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        return None


def test_a_kind_another_strategy_owns_cannot_be_declared_again() -> None:
    registry = builtin_registry()
    with pytest.raises(ValueError, match="block kind 'contents'"):
        registry.register(_Declares)
    assert "declares" not in registry and registry.kinds["contents"] is CONTENTS_PAGE


def test_the_summary_kinds_cannot_be_redefined() -> None:
    registry = StrategyRegistry()
    redefined = type("Redefines", (_Declares,), {"name": "redefines"})
    redefined.traits = StrategyTraits(block_kinds=(BlockKind("history", message_name="other"),))
    with pytest.raises(ValueError, match="block kind 'history'"):
        registry.register(redefined)
    assert BlockKinds()["history"] is HISTORY
