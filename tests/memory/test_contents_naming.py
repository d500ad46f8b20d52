"""The forwarded Contents Page names the request's tools (``augment.contents_for``): found by its
position in what ``assemble`` built and its exact stored text, never by how a message looks."""

from __future__ import annotations

from typing import Any

import pytest

from ctxproxy.compaction.assemble import assemble, summary_index
from ctxproxy.pipeline.augment import contents_for
from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.paged import CONTENTS_KIND
from ctxproxy.strategies.paged.contents import RECALL_TOOL, SEARCH_TOOL, ContentsEntry, render_contents
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.tools.definitions import ORDER, offer_tools
from tests.strategies.factories import assistant, system, user

KINDS = builtin_registry().kinds


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def messages() -> list[dict[str, Any]]:
    return [
        system("You are terse."),
        user("My locker code is 4417."),
        system("A system message inside the archived page."),
        assistant("Noted."),
        user("What is my locker code?"),
    ]


def paged_checkpoint() -> Checkpoint:
    entry = ContentsEntry(1, 1, 4, "1:00", "User: My locker code is 4417.", ("Assistant: Noted.",), 2)
    return Checkpoint(4, "x" * 64, (Block(1, 4, render_contents([entry]), CONTENTS_KIND),), 0.0)


@pytest.mark.parametrize("placement", ["assistant_named", "assistant", "user", "system"])
def test_the_contents_page_is_found_where_assemble_put_it(placement: Any) -> None:
    checkpoint = paged_checkpoint()
    forwarded = assemble(messages(), 1, checkpoint, placement, KINDS)
    at = summary_index(messages(), 1, checkpoint)
    assert at == 2 and forwarded[1] == messages()[2]  # after the covered system message
    tools = offer_tools({"tools": [tool(RECALL_TOOL)]}, ORDER)
    named = contents_for(forwarded, at, checkpoint, tools, KINDS)
    assert named is not None
    assert f"`{RECALL_TOOL}_`" in named[at]["content"] and f"`{RECALL_TOOL}`" not in named[at]["content"]
    assert {k: v for k, v in named[at].items() if k != "content"} == {
        k: v for k, v in forwarded[at].items() if k != "content"
    }
    assert named[:at] == forwarded[:at] and named[at + 1 :] == forwarded[at + 1 :]


def test_default_names_change_nothing() -> None:
    checkpoint = paged_checkpoint()
    forwarded = assemble(messages(), 1, checkpoint, "assistant_named", KINDS)
    assert contents_for(forwarded, 2, checkpoint, offer_tools({}, ORDER), KINDS) is None


def test_no_tools_means_no_tool_is_named() -> None:
    checkpoint = paged_checkpoint()
    forwarded = assemble(messages(), 1, checkpoint, "assistant_named", KINDS)
    named = contents_for(forwarded, 2, checkpoint, None, KINDS)
    assert named is not None and "ctxproxy_" not in named[2]["content"]
    assert f"`{SEARCH_TOOL}`" in forwarded[2]["content"]  # the input list is not modified


def test_a_client_message_with_the_same_text_elsewhere_is_not_touched() -> None:
    checkpoint = paged_checkpoint()
    forwarded = assemble(messages(), 1, checkpoint, "user", KINDS)
    copy = dict(forwarded[2])
    lookalike = [*forwarded[:-1], copy, forwarded[-1]]  # the client pasted the Contents Page
    named = contents_for(lookalike, 2, checkpoint, None, KINDS)
    assert named is not None and named[-2] == copy and "ctxproxy_" in named[-2]["content"]
    # Not the stored text at that position, or no message there: nothing is changed.
    assert contents_for(lookalike, 1, checkpoint, None, KINDS) is None
    assert contents_for(lookalike, 4, checkpoint, None, KINDS) is None
    assert contents_for(lookalike, 99, checkpoint, None, KINDS) is None


def test_another_strategys_summary_is_left_alone() -> None:
    foreign = Checkpoint(4, "x" * 64, (Block(1, 4, render_contents([]), "history"),), 0.0)
    forwarded = assemble(messages(), 1, foreign, "assistant_named", KINDS)
    assert contents_for(forwarded, 2, foreign, None, KINDS) is None
