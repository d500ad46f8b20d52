"""Shell commands in tool calls: the command line, and the files it reads and modifies by its words."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.strategies.shell_files import command_line, shell_file_ops


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"command": "grep -c ERROR a.log", "description": "Count"}, "grep -c ERROR a.log"),  # Claude Code's Bash
        ({"cmd": "  ls -la  "}, "ls -la"),  # Codex's exec_command
        ({"command": ["bash", "-lc", "sed -n '1,40p' src/app.py"]}, "sed -n '1,40p' src/app.py"),  # Codex's shell
        ({"command": ["/bin/zsh", "-c", "make test"]}, "make test"),
        ({"command": ["git", "commit", "-m", "fix: a b"]}, "git commit -m 'fix: a b'"),
        ({"command": ["bash", "-lc", "  "]}, None),
        ({"command": ""}, None),
        ({"command": 3}, None),
        ({"command": ["ls", 3]}, None),
        ({"path": "a.py"}, None),
    ],
)
def test_command_line(arguments: dict[str, Any], expected: str | None) -> None:
    assert command_line(arguments) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("cat a.log", [("read", "a.log")]),
        ("head -n 20 notes.txt", [("read", "notes.txt")]),  # -n's value is no file
        ("tail -f log.txt < in.txt >> /dev/null", [("read", "log.txt"), ("read", "in.txt")]),
        ("sed -n '1,40p' src/app.py", [("read", "src/app.py")]),  # the script is no file
        ("sed -i 's/a/b/' src/app.py", [("modified", "src/app.py")]),
        ("sed -e 's/a/b/' -e 's/c/d/' x.txt", [("read", "x.txt")]),
        ("grep -c ERROR a.log", [("read", "a.log")]),  # the pattern is no file
        ("rg -n -g '*.py' TODO src tests", [("read", "src"), ("read", "tests")]),
        ("grep -rn foo .", []),
        ("cat a.log 2>&1 | head -n 5", [("read", "a.log")]),  # "2" is a descriptor
        ("echo hi > out.txt && cp a.cfg b.cfg", [("modified", "out.txt"), ("read", "a.cfg"), ("modified", "b.cfg")]),
        ("mv old.py new.py; rm -rf build", [("modified", "old.py"), ("modified", "new.py"), ("modified", "build")]),
        ("pytest -q | tee report.txt", [("modified", "report.txt")]),
        ("cat > new.py <<'EOF'\nimport os\nprint(open('x').read())\nEOF", [("modified", "new.py")]),
        ("cat *.py $HOME/.bashrc", []),  # globs and variables name no file
        ("make test", []),
        ("python -c 'unbalanced", []),
    ],
)
def test_files_of_a_command_line(line: str, expected: list[tuple[str, str]]) -> None:
    assert shell_file_ops(line) == expected


def test_an_apply_patch_envelope_names_its_files_whatever_the_shell_around_it() -> None:
    line = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 'don't'\n+x\n*** Add File: b.md\n*** End Patch\nEOF"
    assert shell_file_ops(line) == [("modified", "src/a.py"), ("modified", "b.md")]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab >|&;<'\"-\n*$2")), max_size=40))
def test_any_line_gives_names_never_an_error(line: str) -> None:
    assert all(op in ("read", "modified") and name for op, name in shell_file_ops(line))
