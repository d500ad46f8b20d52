"""What the README's first screens promise about this repository, checked against it: the test
command installs what ``.ci/run`` installs, and the quick start leaves the clone's status clean.
(What the commands do when run is tested in tests/commands/test_quick_start.py.)"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_the_test_command_installs_with_the_constraints_file_as_ci_does() -> None:
    ci_install = next(line for line in (REPO / ".ci/run").read_text().splitlines() if "pip install" in line)
    ci_args = [arg for arg in shlex.split(ci_install) if arg != "--quiet"]
    [_, test_command] = sh_blocks(section("The two commands"))
    [readme_install] = [part for part in test_command.split("&&") if "pip install" in part]
    assert shlex.split(readme_install) == ci_args
    assert "--constraint constraints.txt" in readme_install


def test_the_quick_starts_config_directory_is_ignored_by_git() -> None:
    [commands] = sh_blocks(section("Quick start"))
    [directory] = re.findall(r"ctxproxy init (\w+)", commands)
    probe = subprocess.run(
        ["git", "check-ignore", "--no-index", f"{directory}/proxy.toml", "data/cache.db"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode == 128:
        pytest.skip(f"not a git checkout: {probe.stderr.strip()}")
    assert probe.stdout.split() == [f"{directory}/proxy.toml", "data/cache.db"]
