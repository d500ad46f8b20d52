"""An archived page's paths, commands and errors as one searchable document (issue 27.4)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.memory.work_doc import MAX_PROBLEM_LINES, work_doc
from ctxproxy.store import open_store

LISTING = "\n".join(f"pkg/mod_{i}/file_{i}.py | {i} ++" for i in range(300))  # far past a page doc's cut


def _page() -> list[dict[str, object]]:
    run = json.dumps({"command": "git log --stat -n 4 -- pkg"})
    test = json.dumps({"command": "pytest -q tests/test_x.py"})
    return [
        {"role": "user", "content": "What changed under pkg?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "a", "function": {"name": "bash", "arguments": run}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": LISTING},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "b", "function": {"name": "bash", "arguments": test}}],
        },
        {"role": "tool", "tool_call_id": "b", "content": "Exit code: 1\nE   ValueError: bad key 'x'\n1 failed"},
    ]


def test_the_document_holds_every_path_command_and_error_line() -> None:
    doc = work_doc(7, _page(), "session s, page 7", 1.0)
    assert doc is not None and doc.kind == "page" and doc.page == 7
    lines = doc.content.splitlines()
    assert lines[0] == "Page 7: files, commands and errors"
    assert "$ git log --stat -n 4 -- pkg" in lines and "$ pytest -q tests/test_x.py" in lines
    assert "error: E ValueError: bad key 'x'" in lines
    assert "pkg/mod_299/file_299.py" in lines and "tests/test_x.py" in lines
    assert work_doc(7, _page(), "session s, page 7", 1.0) == doc  # deterministic: the same id and text


def test_a_summarised_range_gets_a_card() -> None:
    doc = work_doc(None, _page(), "session s, messages 1-5", 1.0)
    assert doc is not None and doc.kind == "card" and doc.page is None
    assert doc.content.startswith("Session s, messages 1-5: files, commands and errors\n")
    assert "pkg/mod_0/file_0.py" in doc.content.splitlines()


def test_a_chat_without_tools_or_paths_gets_none() -> None:
    chat = [{"role": "user", "content": "We went camping in May."}, {"role": "assistant", "content": "Lovely!"}]
    assert work_doc(1, chat, "session s, page 1", 1.0) is None


async def test_search_finds_the_page_by_a_path_deep_in_a_tool_result(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "store")
    scope = MemoryScope("acme", "s1")
    doc = work_doc(7, _page(), "session s, page 7", 1.0)
    assert doc is not None
    try:
        await MemoryStore(store).add(scope, [doc])
        hits = await MemoryStore(store).search(scope, "pkg/mod_277/file_277.py", 3)
    finally:
        await store.close()
    assert hits and hits[0].doc.page == 7 and "pkg/mod_277/file_277.py" in hits[0].doc.content


def _grep_page(lines: int) -> list[dict[str, object]]:
    """A grep whose output has a problem line (an error logged) every tenth line, past a page doc's cut."""
    out = "\n".join(
        f"src/m{i}.py:{i}:    log.error('failed to read k{i}')" if i % 10 == 0 else f"src/m{i}.py:{i}: x = {i}"
        for i in range(lines)
    )
    call = json.dumps({"command": "grep -rn x src"})
    return [
        {"role": "user", "content": "Where is x set?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "g", "function": {"name": "bash", "arguments": call}}],
        },
        {"role": "tool", "tool_call_id": "g", "content": [{"type": "text", "text": out}]},
    ]


def test_every_problem_line_of_a_tool_result_is_in_the_document_up_to_the_cap() -> None:
    doc = work_doc(3, _grep_page(600), "session s, page 3", 1.0)
    assert doc is not None
    lines = doc.content.splitlines()
    assert "src/m590.py:590:    log.error('failed to read k590')" in lines  # deep in the result: kept whole
    assert "src/m591.py:591: x = 591" not in lines  # not a problem line
    many = work_doc(3, _grep_page(3000), "session s, page 3", 1.0)
    assert many is not None
    problems = [line for line in many.content.splitlines() if "log.error" in line]
    assert len(problems) == MAX_PROBLEM_LINES and problems[0].startswith("src/m0.py:0:")


async def test_search_finds_the_page_by_a_problem_line_deep_in_a_tool_result(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "store")
    scope = MemoryScope("acme", "s1")
    doc = work_doc(4, _grep_page(600), "session s, page 4", 1.0)
    assert doc is not None
    try:
        await MemoryStore(store).add(scope, [doc])
        hits = await MemoryStore(store).search(scope, "log.error('failed to read k430')", 3)
    finally:
        await store.close()
    assert (
        hits and hits[0].doc.page == 4 and "src/m430.py:430:    log.error('failed to read k430')" in hits[0].doc.content
    )
