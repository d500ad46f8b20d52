"""Page lines for the Contents Page: extractive (deterministic) and LLM (against the fake upstream)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from ctxproxy.strategies.paged import LINE_MAX_CHARS, MAX_LINES_PER_PAGE
from ctxproxy.strategies.paged.lines import PageLines, cap_lines, clip_line
from ctxproxy.summarize.pagelines import entry_line, extractive_page_lines, llm_page_lines
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream, openai_error
from tests.summarize.factories import assistant, completion_client, tool, user

SECRET = "zebra-quasar-7781"

DEBUG_PAGE = [
    user("Thanks! Why is the nightly import so slow? It took 3 hours yesterday."),
    {"role": "system", "content": "Answer tersely."},
    assistant(None, ("read_file", '{"path": "jobs/import.py", "limit": 200}')),
    tool("def run():\n    for row in rows:\n        db.insert(row)  # one round trip per row", "call_0"),
    assistant("It inserts row by row. Batch the inserts with `executemany` and it should take minutes."),
]


# --- extractive ------------------------------------------------------------------------------


def test_extractive_lines_of_a_tool_page() -> None:
    lines = extractive_page_lines(DEBUG_PAGE)
    assert lines == PageLines(
        "User: Thanks! Why is the nightly import so slow?",
        (
            'Assistant called read_file(path="jobs/import.py", limit=200)',
            "Tool result (read_file): def run(): for row in rows: db.insert(row) # one round trip per row",
            "Assistant: It inserts row by row. Batch the inserts with `executemany` and it should take minutes.",
        ),
    )


def test_extractive_lines_are_deterministic_and_short() -> None:
    long_answer = "The migration plan has many steps. " * 20
    page = [user("Plan the migration " * 30), assistant(long_answer), user("second question?")]
    first = extractive_page_lines(page)
    assert first == extractive_page_lines([dict(m) for m in page])
    assert all(len(line) <= LINE_MAX_CHARS for line in (first.summary, *first.lines))
    assert first.summary.endswith("…")
    assert first.lines[0] == "Assistant: The migration plan has many steps. The migration plan has many steps."
    assert first.lines[1] == "User: second question?"  # only the first user entry is the summary


def test_extractive_names_cjk_and_content_parts() -> None:
    page = [
        user("我们需要在周五之前把计费服务迁移到新的数据库。请不要修改支付表。", name="Ana"),
        user([{"type": "text", "text": "See the chart."}, {"type": "image_url", "image_url": {"url": "x"}}]),
        assistant("好的。", name="helper"),
        assistant(""),
    ]
    lines = extractive_page_lines(page)
    assert lines.summary == "User (Ana): 我们需要在周五之前把计费服务迁移到新的数据库。请不要修改支付表。"
    assert lines.lines == ("User: See the chart. [image]", "Assistant (helper): 好的。", "Assistant: (empty)")


def test_assistant_text_with_calls_and_code_only_messages() -> None:
    page = [
        user("```python\nprint('hi')\n```"),
        assistant("Let me check.", ("search", "not json"), ("noop", "")),
        tool("", "call_0"),
        {"role": "tool", "tool_call_id": "unknown", "content": "orphan output"},
    ]
    lines = extractive_page_lines(page)
    assert lines.summary == "User: `print('hi')`"
    assert lines.lines == (
        "Assistant: Let me check. — called search(not json), noop()",
        "Tool result (search): (empty)",
        "Tool result: orphan output",
    )


def test_a_page_with_many_entries_is_capped() -> None:
    page = [user("Refactor every module.")]
    for i in range(30):
        page += [assistant(None, ("edit_file", f'{{"path": "m{i}.py"}}')), tool("ok", "call_0")]
    page.append(assistant("All 30 modules are refactored."))
    lines = extractive_page_lines(page).lines
    assert len(lines) == MAX_LINES_PER_PAGE
    assert lines[-2] == f"… {61 - (MAX_LINES_PER_PAGE - 2) - 1} more entries"
    assert lines[-1] == "Assistant: All 30 modules are refactored."
    assert lines[0] == 'Assistant called edit_file(path="m0.py")'


def test_a_page_without_a_user_message() -> None:
    assert extractive_page_lines([assistant("Hello! How can I help?")]) == PageLines(
        "Assistant: Hello! How can I help?", ()
    )
    assert extractive_page_lines([{"role": "system", "content": "x"}]) == PageLines("(no messages)", ())


def test_clip_and_cap_helpers() -> None:
    assert clip_line("a  b\n c") == "a b c"
    clipped = clip_line("word " * 50, 30)
    assert len(clipped) <= 30 and clipped.endswith("word…")
    assert cap_lines(["a", "b", "c"], 3) == ("a", "b", "c")
    assert cap_lines(["a", "b", "c", "d", "e"], 3) == ("a", "… 3 more entries", "e")


# --- LLM -------------------------------------------------------------------------------------

PAGES = [
    DEBUG_PAGE,
    [user(f"Remember the vault code {SECRET}."), assistant("Noted.")],
]
GOOD = {
    "pages": [
        {
            "summary": "User asked why the nightly import is slow; answer: batch the inserts",
            "lines": [
                "User: why is the import slow?",
                "Assistant called read_file(jobs/import.py)",
                "Tool result: row-by-row inserts",
                "- Assistant: use executemany",
            ],
        },
        {"summary": "User gave the vault code", "lines": ["User: vault code", "Assistant: noted"]},
    ]
}


async def ask(base_url: str, upstream_http: UpstreamHttp, **kwargs: Any) -> list[PageLines] | None:
    authorization = kwargs.pop("authorization", None)
    client = completion_client(
        upstream_http,
        base_url,
        api_key=kwargs.pop("api_key", "sk-sum"),
        timeout=kwargs.pop("timeout", 5.0),
        client_headers={"Authorization": authorization} if authorization else {},
    )
    return await llm_page_lines(client, "summary-mini", kwargs.pop("pages", PAGES))


async def test_llm_request_and_answer(fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp) -> None:
    upstream, base_url = fake
    upstream.reply_json(orjson.dumps(GOOD).decode())
    result = await ask(base_url, upstream_http)
    assert result == [
        PageLines(
            "User asked why the nightly import is slow; answer: batch the inserts",
            (
                "User: why is the import slow?",
                "Assistant called read_file(jobs/import.py)",
                "Tool result: row-by-row inserts",
                "Assistant: use executemany",  # a list marker is dropped
            ),
        ),
        PageLines("User gave the vault code", ("User: vault code", "Assistant: noted")),
    ]
    [request] = upstream.chat_requests()
    assert request.headers["Authorization"] == "Bearer sk-sum"
    body = request.json()
    assert body["model"] == "summary-mini" and body["temperature"] == 0 and "stream" not in body
    system, prompt = body["messages"]
    assert system["role"] == "system" and '"pages"' in system["content"]
    assert '<page number="1" lines="4">' in prompt["content"]  # the system message is left out
    assert '<page number="2" lines="2">' in prompt["content"]
    assert "[2] [assistant → tool read_file]" in prompt["content"] and "Answer tersely" not in prompt["content"]


async def test_llm_answer_in_a_fence_with_long_lines(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    upstream, base_url = fake
    answer = {"pages": [GOOD["pages"][0], {"summary": "x " * 200, "lines": ["1. User: " + "y" * 300, "Assistant: ok"]}]}
    upstream.reply_json("Here you go:\n```json\n" + orjson.dumps(answer).decode() + "\n```")
    result = await ask(base_url, upstream_http)
    assert result is not None
    assert all(len(line) <= LINE_MAX_CHARS for page in result for line in (page.summary, *page.lines))
    assert result[1].lines[0].startswith("User: yyy")


async def test_client_authorization_without_a_tenant_key(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    upstream, base_url = fake
    upstream.reply_json(orjson.dumps(GOOD).decode())
    assert await ask(base_url, upstream_http, api_key=None, authorization="Bearer sk-client") is not None
    assert upstream.chat_requests()[0].headers["Authorization"] == "Bearer sk-client"


MALFORMED: dict[str, tuple[str, Any]] = {
    "prose": ("not_json", "Sure! Page 1 is about imports."),
    "broken json": ("not_json", '{"pages": [{"summary": "a", "lines": [}'),
    "one page missing": ("page_count", orjson.dumps({"pages": GOOD["pages"][:1]}).decode()),
    "no pages key": ("page_count", orjson.dumps(GOOD["pages"]).decode()),
    "a line missing": (
        "line_count",
        orjson.dumps({"pages": [GOOD["pages"][0], {"summary": "s", "lines": ["User: only one"]}]}).decode(),
    ),
    "a line not a string": (
        "malformed",
        orjson.dumps({"pages": [GOOD["pages"][0], {"summary": "s", "lines": ["User: a", 7]}]}).decode(),
    ),
    "an empty summary": (
        "empty_line",
        orjson.dumps({"pages": [GOOD["pages"][0], {"summary": " ", "lines": ["a", "b"]}]}).decode(),
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_answer_gives_none(
    case: str, fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    upstream, base_url = fake
    reason, content = MALFORMED[case]
    upstream.reply_json(content)
    with capture_logs() as logs:
        assert await ask(base_url, upstream_http) is None
    [event] = [e for e in logs if e["event"] == "pagelines.llm_fallback"]
    assert event["reason"] == reason and event["log_level"] == "warning"
    assert SECRET not in repr(logs) and "sk-sum" not in repr(logs)


@pytest.mark.parametrize(
    ("reason", "script"),
    [
        ("status", lambda f: f.reply_error(500, openai_error("boom", type="server_error"))),
        ("timeout", lambda f: f.reply_delay(2.0)),
        ("empty_content", lambda f: f.reply_json("  ")),
        ("transport", lambda f: f.reply_reset()),
    ],
)
async def test_an_upstream_failure_gives_none(
    reason: str, script: Any, fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    upstream, base_url = fake
    script(upstream)
    with capture_logs() as logs:
        assert await ask(base_url, upstream_http, timeout=0.3) is None
    assert [e["reason"] for e in logs if e["event"] == "pagelines.llm_fallback"] == [reason]


async def test_no_call_for_a_page_without_entries(fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp) -> None:
    upstream, base_url = fake
    assert await ask(base_url, upstream_http, pages=[[{"role": "system", "content": "x"}]]) is None
    assert await ask(base_url, upstream_http, pages=[]) is None
    assert upstream.chat_requests() == []


async def test_a_long_page_asks_for_the_capped_number_of_lines(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    upstream, base_url = fake
    page = [user("Refactor everything.")] + [assistant(f"step {i}") for i in range(30)]
    upstream.reply_json(orjson.dumps({"pages": [{"summary": "s", "lines": [f"l{i}" for i in range(12)]}]}).decode())
    result = await ask(base_url, upstream_http, pages=[page])
    assert result is not None and len(result[0].lines) == MAX_LINES_PER_PAGE
    assert f'lines="{MAX_LINES_PER_PAGE}"' in upstream.chat_requests()[0].json()["messages"][1]["content"]


def test_a_shell_command_shows_its_command_line() -> None:
    """An agent asks for a command again by its words: the line holds them, not the arguments' JSON."""
    run = '{"command": "git log --stat -n 4 HEAD -- src/app/models.py"}'
    argv = '{"cmd": ["bash", "-lc", "pytest -q tests/test_models.py"]}'
    message = {
        "role": "assistant",
        "content": "And its recent history.",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "Bash", "arguments": run}},
            {"id": "b", "type": "function", "function": {"name": "shell", "arguments": argv}},
        ],
    }
    assert entry_line(message) == (
        "Assistant called $ git log --stat -n 4 HEAD -- src/app/models.py, $ pytest -q tests/test_models.py"
    )
    read = {
        **message,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
        ],
    }
    assert entry_line(read) == 'Assistant: And its recent history. — called read_file(path="a.py")'
