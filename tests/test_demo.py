"""``ctxproxy demo`` as a user runs it: ``python -m ctxproxy demo ...`` in a subprocess, offline.

Every invocation of this module starts at once (``runs``, module-scoped) and each test reads its
own result, so the module costs about as long as its slowest run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxproxy.config.models import MIN_CONTEXT_WINDOW
from ctxproxy.demo.protocols import PROTOCOLS
from ctxproxy.strategies.registry import builtin_registry

REPO = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+)%\s*(.*)$")
TOTAL = re.compile(r"^total prompt tokens: full history (\d+), forwarded (\d+) \((\d+)%\)$")
STRATEGIES = ["rolling_summary", "cut_point", "sliding_window", "rounds", "paged"]
BAD_FILES = {
    "not_json": "this is not JSON",
    "not_a_list": '{"role": "user", "content": "hi"}',
    "list_of_strings": '["hello", "world"]',
    "no_role": '[{"content": "hi"}]',
}
REJECTED_FILES = {
    "bad_role": [{"role": "wizard", "content": "hi"}, {"role": "user", "content": "hello"}],
    "number_content": [{"role": "user", "content": 42}],
}


@dataclass
class Row:
    turn: int
    messages: int
    full: int
    sent: int
    event: str


@dataclass
class Demo:
    returncode: int
    stdout: str
    stderr: str

    @property
    def rows(self) -> list[Row]:
        found = []
        for line in self.stdout.splitlines():
            match = ROW.match(line)
            if match:
                turn, messages, full, sent, _, event = match.groups()
                found.append(Row(int(turn), int(messages), int(full), int(sent), event.strip()))
        return found

    @property
    def total(self) -> tuple[int, int]:
        [match] = [m for m in map(TOTAL.match, self.stdout.splitlines()) if m]
        return int(match.group(1)), int(match.group(2))


def garden_conversation() -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You help plan a garden."}]
    for n in range(1, 11):
        messages.append({"role": "user", "content": f"Bed {n}: plant {n * 3} tomato seedlings in row {n}, 40 cm apart. "
                         f"We decided to water bed {n} at 7:00. The soil in bed {n} must be tested first. Ideas?"})  # fmt: skip
        messages.append({"role": "assistant", "content": f"For bed {n}, mulch after planting and stake each seedling. " * 4})  # fmt: skip
    return messages


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("demo-files")
    paths = {name: root / f"{name}.json" for name in [*BAD_FILES, *REJECTED_FILES, "garden", "missing"]}
    for name, text in BAD_FILES.items():
        paths[name].write_text(text)
    for name, messages in REJECTED_FILES.items():
        paths[name].write_text(json.dumps(messages))
    paths["garden"].write_text(json.dumps(garden_conversation()))
    return paths


@pytest.fixture(scope="module")
def runs(files: dict[str, Path]) -> dict[str, Demo]:
    """Run ``python -m ctxproxy demo <args>`` for every case, all concurrently."""
    cases: dict[str, list[str]] = {
        "default_30": ["--turns", "30"],
        "small_window": ["--turns", "12", "--window", "2048"],
        "none": ["--turns", "8", "--strategy", "none"],
        "garden": ["--conversation", str(files["garden"]), "--window", "1024", "--strategy", "cut_point"],
        "unknown_strategy": ["--strategy", "nope", "--turns", "3"],
        "anthropic": ["--protocol", "anthropic", "--turns", "12", "--window", "2048"],
        "responses": ["--protocol", "responses", "--turns", "12", "--window", "2048"],
        "gemini": ["--protocol", "gemini", "--turns", "12", "--window", "2048"],
        "unknown_protocol": ["--protocol", "nope", "--turns", "3"],
        "help": ["--help"],
        "window_too_small": ["--window", "500", "--turns", "3"],
        "window_not_a_number": ["--window", "8k"],
        "turns_zero": ["--turns", "0"],
        "turns_negative": ["--turns", "-3"],
        "none_overflowing": ["--turns", "9", "--window", "2048", "--strategy", "none"],
    }
    cases |= {s: ["--turns", "30", "--window", "4096", "--strategy", s] for s in STRATEGIES}
    cases |= {name: ["--conversation", str(files[name])] for name in [*BAD_FILES, *REJECTED_FILES, "missing"]}
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "ctxproxy", "demo", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )  # fmt: skip
        for name, args in cases.items()
    }
    done = {}
    for name, process in started.items():
        stdout, stderr = process.communicate(timeout=240)  # ~30 at once: generous on a loaded 2-core machine
        done[name] = Demo(process.returncode, stdout, stderr)
    return done


def check_compacting_run(run: Demo, turns: int) -> None:
    assert run.returncode == 0, run.stderr
    rows = run.rows
    assert [r.turn for r in rows] == list(range(1, turns + 1))
    compacted = [r for r in rows if r.event.startswith("compacted")]
    assert compacted, run.stdout
    for row in rows:
        assert row.sent <= row.full, run.stdout
    assert all(r.sent < r.full for r in compacted)
    assert rows[-1].sent < rows[-1].full  # still saving after the last compaction
    full, sent = run.total
    assert (full, sent) == (sum(r.full for r in rows), sum(r.sent for r in rows))
    assert sent < full


def test_demo_with_30_turns_shows_compaction(runs: dict[str, Demo]) -> None:
    check_compacting_run(runs["default_30"], 30)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_demo_shows_compaction_and_savings(strategy: str, runs: dict[str, Demo]) -> None:
    run = runs[strategy]
    check_compacting_run(run, 30)
    assert f"strategy {strategy}, model window 4096 tokens" in run.stdout


def test_demo_rolling_summary_in_a_small_window_compacts_in_batches_and_never_forwards_more(
    runs: dict[str, Demo],
) -> None:
    run = runs["small_window"]
    check_compacting_run(run, 12)  # every row: sent <= full
    compacted = [r.turn for r in run.rows if r.event]
    assert len(compacted) <= 12 // 2, run.stdout  # not on every turn


def test_demo_with_strategy_none_forwards_everything(runs: dict[str, Demo]) -> None:
    run = runs["none"]
    assert run.returncode == 0, run.stderr
    rows = run.rows
    assert len(rows) == 8 and all(r.sent == r.full and not r.event for r in rows)
    full, sent = run.total
    assert full == sent > 0


def test_demo_replays_a_conversation_file(runs: dict[str, Demo]) -> None:
    run = runs["garden"]
    check_compacting_run(run, 10)
    rows = run.rows
    assert [r.messages for r in rows] == list(range(2, 21, 2))  # through each user message of the file
    # The file's own (long) assistant messages are the history, not the demo upstream's short answers.
    assert rows[1].full - rows[0].full > 100


@pytest.mark.parametrize("name", [*BAD_FILES, "missing"])
def test_demo_refuses_a_bad_conversation_file(name: str, runs: dict[str, Demo]) -> None:
    run = runs[name]
    assert run.returncode == 2
    assert run.stderr.startswith("ctxproxy demo: ")
    assert "Traceback" not in run.stderr
    assert "turn" not in run.stdout  # refused before any replay


def test_demo_names_the_file_that_is_not_json(runs: dict[str, Demo], files: dict[str, Path]) -> None:
    run = runs["not_json"]
    assert run.returncode == 2
    assert str(files["not_json"]) in run.stderr


@pytest.mark.parametrize("name", list(REJECTED_FILES))
def test_demo_refuses_messages_the_proxy_cannot_compact(name: str, runs: dict[str, Demo]) -> None:
    run = runs[name]
    assert "Traceback" not in run.stderr
    assert run.returncode == 2
    assert run.stderr.startswith("ctxproxy demo: ")


def test_demo_refuses_an_unknown_strategy(runs: dict[str, Demo]) -> None:
    run = runs["unknown_strategy"]
    assert run.returncode == 2
    assert "unknown strategy 'nope'" in run.stderr
    assert "rolling_summary" in run.stderr  # it says what is available
    assert "Traceback" not in run.stderr
    assert not run.rows


def test_demo_speaks_anthropics_messages_api(runs: dict[str, Demo]) -> None:
    run, chat = runs["anthropic"], runs["small_window"]  # the same conversation and window
    check_compacting_run(run, 12)
    assert "model window 2048 tokens, extractive summariser, anthropic API" in run.stdout
    # The same history, counted alike; but Claude is assumed to count 1.2x more before its first
    # answer (and max_tokens keeps room for the answer), so compaction starts earlier.
    assert [r.full for r in run.rows] == [r.full for r in chat.rows]
    first = [r.turn for r in run.rows if r.event][0]
    assert first < [r.turn for r in chat.rows if r.event][0]


def test_demo_speaks_openais_responses_api(runs: dict[str, Demo]) -> None:
    run, chat = runs["responses"], runs["small_window"]  # the same conversation and window
    check_compacting_run(run, 12)
    assert "model window 2048 tokens, extractive summariser, responses API" in run.stdout
    # The same history as input items: counted as chat messages are, compacted at the same turn.
    assert [r.full for r in run.rows] == [r.full for r in chat.rows]
    assert [r.turn for r in run.rows if r.event] == [r.turn for r in chat.rows if r.event]


def test_demo_speaks_geminis_api(runs: dict[str, Demo]) -> None:
    run, chat = runs["gemini"], runs["small_window"]  # the same conversation and window
    check_compacting_run(run, 12)
    assert "model window 2048 tokens, extractive summariser, gemini API" in run.stdout
    # The same history as contents: counted as chat messages are, compacted at the same turn.
    assert [r.full for r in run.rows] == [r.full for r in chat.rows]
    assert [r.turn for r in run.rows if r.event] == [r.turn for r in chat.rows if r.event]


def test_demo_refuses_an_unknown_protocol_and_names_the_known_ones(runs: dict[str, Demo]) -> None:
    run = runs["unknown_protocol"]
    assert run.returncode == 2 and not run.rows
    assert "'openai'" in run.stderr and "'anthropic'" in run.stderr and "'responses'" in run.stderr


def test_demo_help_lists_the_strategies_and_protocols_it_knows(runs: dict[str, Demo]) -> None:
    run = runs["help"]
    assert run.returncode == 0
    text = " ".join(run.stdout.split())  # argparse wraps lines
    assert f"compaction strategy: {', '.join(builtin_registry())} (default rolling_summary)" in text
    assert f"speak: {', '.join(PROTOCOLS)}" in text
    assert f"at least {MIN_CONTEXT_WINDOW}" in text


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (
            "window_too_small",
            f"a model window of 500 tokens is too small: ctxproxy needs at least {MIN_CONTEXT_WINDOW}",
        ),
        ("window_not_a_number", "expected a whole number, got '8k'"),
        ("turns_zero", "the demo needs at least 1 turn, got 0"),
        ("turns_negative", "the demo needs at least 1 turn, got -3"),
    ],
)
def test_demo_refuses_impossible_numbers_in_its_own_words(runs: dict[str, Demo], name: str, words: str) -> None:
    run = runs[name]
    assert run.returncode == 2 and not run.rows
    assert words in run.stderr
    assert "Traceback" not in run.stderr
    assert "toml" not in run.stderr and "/tmp" not in run.stderr  # no config file the user never wrote


def test_demo_with_strategy_none_labels_the_pre_flight_emergency_cut(runs: dict[str, Demo]) -> None:
    run = runs["none_overflowing"]
    assert run.returncode == 0, run.stderr
    cuts = [r for r in run.rows if r.event]
    assert cuts, run.stdout  # 9 turns do not fit a 2048-token window
    for row in cuts:
        assert row.event.startswith("pre-flight emergency cut (the prompt did not fit): first "), row.event
        assert row.sent < row.full
    # Until a prompt no longer fits, none forwards every prompt as it is.
    assert all(r.sent == r.full for r in run.rows if r.turn < cuts[0].turn)
    assert "compacted:" not in run.stdout
