"""File paths an agent's tools named, kept in the summary's Files section by directory."""

from __future__ import annotations

import json

from ctxproxy.summarize.base import SummaryTask
from ctxproxy.summarize.body import Body, fit_body, parse_body, render_body
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from ctxproxy.summarize.paths import expand_paths, group_paths, mentioned_paths, split_listed
from ctxproxy.tokens import TokenCounter

GREP = "ctxproxy/cli.py:12:import x\nctxproxy/wire/chat.py:40: x()\ntests/test_cli.py:3:from x import y"
STAT = " ctxproxy/summarize/body.py | 12 ++--\n a/b/c.tar.gz\n see https://example.org/docs/page.html"


def _session() -> list[dict[str, object]]:
    arguments = json.dumps({"command": "grep -rn x ctxproxy tests"})
    return [
        {"role": "user", "content": "Who calls x? Look under /srv/app/main.py too."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": GREP},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c2", "function": {"name": "bash", "arguments": '{"command": "git log --stat"}'}}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": STAT},
    ]


def test_paths_come_from_every_text_and_no_url() -> None:
    assert mentioned_paths(_session()) == [
        "/srv/app/main.py",
        "ctxproxy/cli.py",
        "ctxproxy/wire/chat.py",
        "tests/test_cli.py",
        "ctxproxy/summarize/body.py",
        "a/b/c.tar.gz",
    ]


def test_grouped_by_directory_and_read_back() -> None:
    paths = ["ctxproxy/a.py", "tests/t.py", "ctxproxy/b.py", "/etc/x.conf", "ctxproxy/a.py", "p/x.cpython-311.pyc"]
    paths += ["ctxproxy/.env", "ctxproxy/.envrc", "p/y.cpython-311.pyc", "ctxproxy/c.pyi"]
    grouped = group_paths(paths)
    assert grouped == [
        "ctxproxy/{a,b}.py",
        "tests/t.py",
        "/etc/x.conf",
        "p/{x,y}.cpython-311.pyc",
        "ctxproxy/{.env,.envrc}",
        "ctxproxy/c.pyi",
    ]
    assert split_listed(", ".join(grouped)) == grouped
    assert sorted(expand_paths(grouped)) == sorted(set(paths))


def test_seen_files_survive_an_update_and_give_way_first(counter: TokenCounter) -> None:
    summarizer = ExtractiveSummarizer(counter)
    body = summarizer.summarize_text(SummaryTask("fresh", _session(), max_tokens=600))
    parsed = parse_body(body)
    assert parsed.files_read == ["ctxproxy", "tests"]  # grep's operands, as file_ops reads them
    assert parsed.files_seen == mentioned_paths(_session())
    later = [{"role": "user", "content": "And docs/index.md?"}, {"role": "assistant", "content": "It is fine."}]
    updated = parse_body(summarizer.summarize_text(SummaryTask("update", later, previous=body, max_tokens=600)))
    assert updated.files_seen == [*mentioned_paths(_session()), "docs/index.md"]
    many = Body({"Goal": ["- fix it"]}, ["r.py"], ["m.py"], files_seen=[f"pkg/m{i}/x{i}.py" for i in range(200)])
    fitted = parse_body(fit_body(many, 120, counter, drop="oldest"))
    assert fitted.files_read == ["r.py"] and fitted.files_modified == ["m.py"]  # seen files go first
    assert 0 < len(fitted.files_seen) < 200 and fitted.files_seen[-1] == "pkg/m199/x199.py"  # the newest stay
    assert "Seen: … (+" in fit_body(many, 120, counter, drop="oldest")
    assert parse_body(render_body(many)).files_seen == many.files_seen


def test_what_the_agent_did_outlasts_prose(counter: TokenCounter) -> None:
    commands = [f"- `pytest tests/test_m{i}.py` → {i} passed" for i in range(8)]
    prose = [f"- assistant: Module {i} reads its options once and keeps them for the process." for i in range(8)]
    body = parse_body(
        fit_body(Body({"Goal": ["- fix it"], "Background": prose, "Commands": commands}), 150, counter, drop="oldest")
    )
    kept = body.sections.get("Commands", [])
    assert len(kept) > len(body.sections.get("Background", [])) and kept[-1] == commands[-1]
