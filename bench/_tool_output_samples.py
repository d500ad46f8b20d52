"""Real tool output, produced while bench/tool_outputs.py starts, and questions whose answer is a
string in it.

Each sample is the output of a command run now on this repository, its venv or the LoCoMo data
(``pytest -v`` of a few test files and one failing test written for the run, ``git log --stat``
and ``git diff`` on the fixed commit ``_agent.ANCHOR``, ``git grep -n``, ``pip list --format
json``, ``pip show -f``, a LoCoMo conversation as JSON, a module read with line numbers). A
question names the string that answers it (read from the output itself, so it is there) and the
query an agent would give ``ctxproxy_retrieve`` for it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _agent import ANCHOR, ROOT

FAILING_TEST = """
def test_checkout_total():
    cart = [4, 4, 3]
    assert sum(cart) == 12, "the total forgets the bakery's discount"


def test_checkout_items():
    assert len([4, 4, 3]) == 3
"""
PYTEST_FILES = ("tests/tool_outputs", "tests/tools/test_definitions.py", "tests/store/test_keys.py")


@dataclass(frozen=True)
class Question:
    answer: str  # a string of the original
    query: str  # what an agent would ask ctxproxy_retrieve for
    also: str | None = None  # the same fact as another rendering writes it ("130: def f" for "130\tdef f")

    def answered_by(self, text: str) -> bool:
        return self.answer in text or (self.also is not None and self.also in text)


@dataclass(frozen=True)
class Sample:
    name: str  # the command
    text: str
    questions: tuple[Question, ...]


def _run(argv: list[str], cwd: Path = ROOT) -> str:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    return (proc.stdout + proc.stderr).rstrip("\n")


def _pytest(tmp: Path) -> Sample:
    failing = tmp / "test_bench_checkout.py"
    failing.write_text(FAILING_TEST)
    text = _run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *PYTEST_FILES, str(failing)])
    passed = re.findall(r"::(\w+(?:\[[^\]]*\])?) PASSED", text)
    return Sample(
        "pytest -v",
        text,
        (
            Question("test_checkout_total", "FAILED"),
            Question("the total forgets the bakery's discount", "AssertionError"),
            Question(passed[len(passed) // 2], passed[len(passed) // 2]),  # one passing test, mid-run
        ),
    )


def _git_log() -> Sample:
    text = _run(["git", "log", "--stat", "-n", "40", ANCHOR])
    blocks = [block for block in re.split(r"^(?=commit [0-9a-f]{40}$)", text, flags=re.M) if block.strip()]
    stats = [(b.split()[1], m.group(1)) for b in blocks if (m := re.search(r"^ (\S+)\s+\|", b, re.M))]
    questions = [Question(changed, commit[:12]) for commit, changed in stats[5:25:5]]
    return Sample("git log --stat -n 40", text, tuple(questions))


def _git_diff() -> Sample:
    text = _run(["git", "diff", f"{ANCHOR}~20", ANCHOR, "--", "ctxproxy"])
    files = re.findall(r"^diff --git a/(\S+)", text, re.M)
    added = [line[1:].strip() for line in text.splitlines() if line.startswith("+") and len(line.strip()) > 40]
    deep = added[len(added) * 3 // 4]
    return Sample(
        "git diff (20 commits)",
        text,
        (Question(files[0], files[0]), Question(files[-1], files[-1]), Question(deep, " ".join(deep.split()[:4]))),
    )


def _grep() -> Sample:
    text = _run(["git", "grep", "-n", "-E", r"^(async )?def ", ANCHOR, "--", "ctxproxy"]).replace(f"{ANCHOR}:", "")
    lines = text.splitlines()
    picked = [lines[len(lines) // 7], lines[len(lines) // 2], lines[len(lines) - 5]]
    questions = [Question(line.split(":", 1)[0], re.search(r"def (\w+)", line).group(1)) for line in picked]  # type: ignore[union-attr]
    return Sample("git grep -n 'def '", text, tuple(questions))


def _pip_list() -> Sample:
    text = _run([sys.executable, "-m", "pip", "list", "--format", "json"])
    rows = json.loads(text)
    picked = [rows[1], rows[len(rows) // 2], rows[-3]]
    return Sample("pip list --format json", text, tuple(Question(r["version"], r["name"]) for r in picked))


def _pip_show() -> Sample:
    text = _run([sys.executable, "-m", "pip", "show", "-f", "aiohttp"])
    location = next(line for line in text.splitlines() if line.startswith("Location:"))
    version = next(line for line in text.splitlines() if line.startswith("Version:"))
    return Sample(
        "pip show -f aiohttp",
        text,
        (
            Question(location, "Location"),
            Question(version, "Version"),
            Question("web_urldispatcher.py", "urldispatcher"),
        ),
    )


def _locomo(release: list[dict[str, Any]]) -> Sample:
    conversation = release[0]["conversation"]
    turns = [turn for key, value in conversation.items() if re.fullmatch(r"session_\d+", key) for turn in value]
    text = json.dumps(turns[:300], indent=1)
    questions = [Question(turns[i]["text"], turns[i]["dia_id"]) for i in (17, 150, 290)]
    return Sample("LoCoMo conversation as JSON", text, tuple(questions))


def _read_file() -> Sample:
    source = _run(["git", "show", f"{ANCHOR}:ctxproxy/pipeline/run.py"])
    text = "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(source.splitlines(), 1))
    numbered = text.splitlines()
    found = [line for line in numbered if re.search(r"\tasync def _attempt|\tdef _record|\tdef _named", line)]
    return Sample(
        "read_file ctxproxy/pipeline/run.py",
        text,
        tuple(Question(_numbered(line, "\t"), line.split("(")[0].split()[-1], _numbered(line, ": ")) for line in found),
    )


def _numbered(line: str, between: str) -> str:
    """A definition's line number and its start: "240\tasync def _attempt" as the file read shows
    it, "240: async def _attempt" as the compressed text does."""
    number, code = line.split("\t", 1)
    return f"{number.strip()}{between}{code.strip()[:18]}"


def samples(release: list[dict[str, Any]], tmp: Path) -> list[Sample]:
    """Every sample; ``release``: LoCoMo's, as ``_locomo.read_release`` read it."""
    return [_pytest(tmp), _git_log(), _git_diff(), _grep(), _pip_list(), _pip_show(), _locomo(release), _read_file()]
