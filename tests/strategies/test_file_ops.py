"""Files read / modified from tool calls (note 003: carried across compactions by cut_point)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.strategies.file_ops import FileOps, classify_name, extract_file_ops, file_ops_in_order, tool_calls


def call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def assistant_with(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("read", "read"),
        ("Read", "read"),
        ("view", "read"),
        ("cat", "read"),
        ("open", "read"),
        ("read_file", "read"),
        ("READ_FILE", "read"),
        ("get_file", "read"),
        ("fs.read", "read"),
        ("project_view", "read"),
        ("write", "modified"),
        ("Edit", "modified"),
        ("create", "modified"),
        ("patch", "modified"),
        ("apply_patch", "modified"),
        ("str_replace", "modified"),
        ("replace", "modified"),
        ("delete", "modified"),
        ("remove", "modified"),
        ("move", "modified"),
        ("rename", "modified"),
        ("write_file", "modified"),
        ("fs.write_file", "modified"),  # dotted namespace stripped
        ("multi_edit", "modified"),  # last word
        ("file.delete", "modified"),
        ("edit_file", "modified"),  # "<verb>_file": the first word
        ("write_to_file", "modified"),
        ("replace_in_file", "modified"),
        ("delete_file", "modified"),
        ("view_file", "read"),
        ("open_file", "read"),
        ("read_multiple_files", "read"),
        ("MultiEdit", "modified"),  # camelCase words
        ("NotebookEdit", "modified"),
        ("readFile", "read"),
        ("read-file", "read"),
        ("bash", None),
        ("create_review_comment", None),  # a verb alone is not enough
        ("get_file_contents", None),
        ("search", None),
        ("read_url_content", None),  # last word "content"
        ("str_replace_editor", None),  # says nothing by itself: see the command fallback
        ("", None),
        ("_._", None),
    ],
)
def test_recognition_table(name: str, expected: str | None) -> None:
    assert classify_name(name) == expected


@pytest.mark.parametrize("key", ["path", "file_path", "filepath", "filename", "file", "target_file"])
def test_every_path_key(key: str) -> None:
    ops = extract_file_ops([assistant_with(call("read_file", {key: "src/app.py"}))])
    assert ops == FileOps(read=frozenset({"src/app.py"}))


def test_lists_of_paths() -> None:
    messages = [
        assistant_with(
            call("read", {"paths": ["a.py", "b.py", "", 7, None]}),
            call("delete", {"paths": ["old.txt"]}, "call_2"),
        )
    ]
    assert extract_file_ops(messages) == FileOps(read=frozenset({"a.py", "b.py"}), modified=frozenset({"old.txt"}))


@pytest.mark.parametrize("arguments", ["{not json", "", "null", "[1, 2]", '"a.py"', "42", "{" * 5000])
def test_invalid_or_non_object_arguments_name_no_file(arguments: str) -> None:
    assert extract_file_ops([assistant_with(call("read_file", arguments))]) == FileOps()


def test_invalid_json_does_not_hide_the_other_calls() -> None:
    messages = [assistant_with(call("read_file", "{broken"), call("write_file", {"path": "out.md"}, "call_2"))]
    assert extract_file_ops(messages) == FileOps(modified=frozenset({"out.md"}))


def test_non_string_path_values_are_ignored() -> None:
    messages = [assistant_with(call("read", {"path": {"nested": "x"}, "file": 3, "filename": "  ok.txt "}))]
    assert extract_file_ops(messages) == FileOps(read=frozenset({"ok.txt"}))


def test_decoded_mapping_arguments_are_accepted() -> None:
    message = {"role": "assistant", "tool_calls": [{"function": {"name": "edit", "arguments": {"path": "x.py"}}}]}
    assert extract_file_ops([message]) == FileOps(modified=frozenset({"x.py"}))


def test_legacy_function_call() -> None:
    message = {"role": "assistant", "function_call": {"name": "read_file", "arguments": '{"path": "legacy.py"}'}}
    assert extract_file_ops([message]) == FileOps(read=frozenset({"legacy.py"}))


def test_editor_tool_is_classified_by_its_command() -> None:
    messages = [
        assistant_with(
            call("str_replace_editor", {"command": "view", "path": "a.py"}),
            call("str_replace_based_edit_tool", {"command": "str_replace", "path": "b.py"}, "c2"),
            call("str_replace_editor", {"command": "insert", "path": "c.py"}, "c3"),
            call("str_replace_editor", {"command": "undo_edit", "path": "d.py"}, "c4"),
        )
    ]
    assert extract_file_ops(messages) == FileOps(read=frozenset({"a.py"}), modified=frozenset({"b.py", "c.py", "d.py"}))


def test_apply_patch_envelope_names_its_files() -> None:
    patch = (
        "*** Begin Patch\n"
        "*** Update File: src/main.py\n@@\n-a\n+b\n"
        "*** Add File: docs/new.md\n+hello\n"
        "*** Delete File: legacy.py\n"
        "*** Update File: old_name.py\n*** Move to: new_name.py\n"
        "*** End Patch"
    )
    ops = extract_file_ops([assistant_with(call("apply_patch", {"input": patch}))])
    assert ops.modified == {"src/main.py", "docs/new.md", "legacy.py", "old_name.py", "new_name.py"}
    assert ops.read == frozenset()


def test_a_file_may_be_both_read_and_modified() -> None:
    messages = [
        assistant_with(call("read_file", {"path": "a.py"})),
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
        assistant_with(call("edit", {"path": "a.py"}, "call_2")),
    ]
    assert extract_file_ops(messages) == FileOps(read=frozenset({"a.py"}), modified=frozenset({"a.py"}))


def test_only_assistant_calls_count() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "please read_file a.py", "tool_calls": [call("read_file", {"path": "u.py"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"path": "t.py"}'},
        {"role": "assistant", "content": "no calls here"},
        {"role": "assistant", "tool_calls": None},
        {"role": "assistant", "tool_calls": ["garbage", {"function": "also garbage"}, {"function": {"name": 3}}]},
    ]
    assert extract_file_ops(messages) == FileOps()


def test_unknown_tools_name_no_file() -> None:
    assert extract_file_ops([assistant_with(call("bash", {"command": "make test", "path": "/repo"}))]) == FileOps()
    assert extract_file_ops([assistant_with(call("deploy", {"target": "prod", "path": "/repo"}))]) == FileOps()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=12,
)
functions = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["read_file", "edit", "apply_patch", "bash"]) | json_values,
        "arguments": json_values.map(json.dumps) | st.text(max_size=30) | json_values,
    },
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "user", "tool"]) | json_values},
    optional={
        "tool_calls": st.lists(st.fixed_dictionaries({}, optional={"function": functions | json_values}), max_size=3)
        | json_values,
        "function_call": functions | json_values,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=4))
def test_any_client_input_gives_a_result_never_an_error(batch: list[dict[str, Any]]) -> None:
    ops = extract_file_ops(batch)
    assert all(isinstance(p, str) and p for p in ops.read | ops.modified)


def test_claude_code_tools() -> None:
    messages = [
        assistant_with(
            call("Read", {"file_path": "/repo/a.py", "limit": 20}, "t1"),
            call("Grep", {"pattern": "ERROR", "path": "logs/"}, "t2"),  # a regex, not a file
            call("Glob", {"pattern": "**/*.md", "path": "docs"}, "t3"),  # file names
            call("NotebookEdit", {"notebook_path": "nb.ipynb", "new_source": "x"}, "t4"),
            call("Write", {"file_path": "/repo/out.txt", "content": "hi"}, "t5"),
        )
    ]
    ops = extract_file_ops(messages)
    assert ops == FileOps(
        read=frozenset({"/repo/a.py", "logs/", "docs", "**/*.md"}), modified=frozenset({"nb.ipynb", "/repo/out.txt"})
    )


def test_shell_commands_read_and_modify_what_their_words_say() -> None:
    messages = [
        assistant_with(
            call("Bash", {"command": "cat a.log && sed -i 's/x/y/' b.py"}),
            call("shell", {"command": ["bash", "-lc", "nl -ba src/app.py"], "workdir": "/repo"}, "c2"),
            call("exec_command", {"cmd": "grep -c ERROR c.log > count.txt"}, "c3"),
        )
    ]
    assert extract_file_ops(messages) == FileOps(
        read=frozenset({"a.log", "src/app.py", "c.log"}), modified=frozenset({"b.py", "count.txt"})
    )


def test_calls_in_order_with_their_ids() -> None:
    messages = [
        assistant_with(call("edit", {"path": "b.py"}, "c1"), call("read", {"paths": ["z.py", "a.py"]}, "c2")),
        {"role": "assistant", "function_call": {"name": "read", "arguments": '{"path": "y.py"}'}},
    ]
    assert file_ops_in_order(messages) == [("modified", "b.py"), ("read", "z.py"), ("read", "a.py"), ("read", "y.py")]
    assert [call.id for message in messages for call in tool_calls(message)] == ["c1", "c2", None]
