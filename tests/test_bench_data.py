"""The benchmarks that read a data file (LoCoMo) say in one line what is wrong when it is absent
or unusable, and exit 2: no traceback, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ["bench/compaction.py", "bench/recall.py", "bench/tool_outputs.py"]


def run(script: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, script, "--data", str(data)],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such file"),
        ("not json at all", "cannot read it as JSON"),
        ('{"conversation": {}}', "not the LoCoMo release"),
        ('[{"qa": []}]', "not the LoCoMo release"),
    ],
)
def test_a_benchmark_without_its_data_says_so_in_one_line(
    tmp_path: Path, script: str, content: str | None, words: str
) -> None:
    data = tmp_path / "locomo10.json"
    if content is not None:
        data.write_text(content)
    result = run(script, data)
    assert result.returncode == 2
    assert result.stdout == ""  # nothing was started or printed before the check
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{Path(script).name}: {data}: {words}")
    assert "locomo10.json" in line and "--data" in line  # what it needs and how to give it
