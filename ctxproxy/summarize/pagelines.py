"""One-line summaries of archived pages for the Contents Page: per page and per entry.

Two sources, the same shape (``PageLines``):

- ``extractive_page_lines``: deterministic, no LLM. The page's summary is its user entry (what
  the user asked: ``User: <first sentence(s)>``); the lines are the entries that answer it, one
  each — ``Assistant: <first sentence>``, ``Assistant called read_file(path="a.py")``,
  ``Assistant called $ git log -n 4 -- a.py`` (a call that runs a shell command shows its command
  line, not the assistant's words beside it), ``Tool result (read_file): <first line>``. System
  messages are left out: ``assemble`` forwards them verbatim, they are no part of what was
  archived from the model's view.
- ``llm_page_lines``: one non-streaming call to the tenant upstream for a whole batch of pages, in
  the protocol of the request being compacted (``ctxproxy.upstream.completion``), asking for
  JSON (a summary and one line per entry for each page). The answer is validated — as many pages
  as asked, exactly the expected number of non-empty lines for each — and lines are cut to
  ``LINE_MAX_CHARS``. Any failure gives ``None`` and the caller uses the extractive lines;
  the reason is logged (``pagelines.llm_fallback``), never message text.

Both cap a page at ``MAX_LINES_PER_PAGE`` lines (a page of 40 tool calls would otherwise take the
whole Contents Page): the first lines, a ``… N more entries`` line, and the last line, which is
usually the final answer. Every line is at most ``LINE_MAX_CHARS`` characters; the ``paged``
strategy's estimate of the Contents Page's growth relies on both bounds.

Both read the pages without the client's scaffolding (``ctxproxy.summarize.scaffolding``:
``<system-reminder>`` blocks and the like; for a batch, text repeated across its pages), so a
page's summary is what the user asked, not the reminder their client put before it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxproxy.strategies.base import Message
from ctxproxy.strategies.dates import without_date_lines
from ctxproxy.strategies.paged.base import LINE_MAX_CHARS, MAX_LINES_PER_PAGE
from ctxproxy.strategies.paged.lines import PageLines, cap_lines, clip_line
from ctxproxy.strategies.shell_files import command_line
from ctxproxy.summarize.json_answer import answer_json
from ctxproxy.summarize.scaffolding import strip_scaffolding
from ctxproxy.summarize.sentences import sentences, split_code
from ctxproxy.summarize.transcript import content_text, render_message, tool_calls
from ctxproxy.upstream.completion import CallFailed, CompletionClient, Prompt
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_ASSISTANT, ROLE_USER, SYSTEM_ROLES

__all__ = ["entry_line", "extractive_page_lines", "llm_page_lines"]

# A first sentence shorter than this ("Thanks!", "Sure.") says little: the next one is added.
MIN_GIST_CHARS = 40
ARGUMENTS_MAX_CHARS = 40
# The LLM request: each message at most this long, the whole transcript at most this long.
MAX_MESSAGE_CHARS = 800
MIN_MESSAGE_CHARS = 160
MAX_PROMPT_CHARS = 48_000
TOKENS_PER_LINE = 48  # the answer's budget per expected line (JSON quoting included)
_CJK_STOPS = ("。", "！", "？")  # CJK sentences follow each other without a space
_LEADING_MARKER = re.compile(r"^(?:[-*•]\s+|\[\d{1,3}\]\s*|\d{1,3}[.)]\s+)")


# --- extractive ------------------------------------------------------------------------------


def _gist(text: str) -> str:
    """The first sentence(s) of a text's prose, or its first line of code when it has no prose."""
    prose, snippets = split_code(text)
    gist = ""
    for sentence in sentences(prose):
        glue = "" if not gist or gist.endswith(_CJK_STOPS) else " "
        gist = f"{gist}{glue}{sentence}"
        if len(gist) >= MIN_GIST_CHARS:
            break
    if not gist and snippets:
        gist = f"`{snippets[0].text}`"
    return gist or " ".join(text.split())


def _arguments(arguments: str) -> str:
    """A call's arguments, short: ``path="a.py", limit=20`` for a JSON object, else the text."""
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        value = arguments
    if isinstance(value, Mapping):
        shown = ", ".join(f"{k}={orjson.dumps(v, default=str).decode()}" for k, v in value.items())
    else:
        shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return clip_line(shown, ARGUMENTS_MAX_CHARS)


def _call(tool: str, arguments: str) -> str:
    """A call, short: ``$ <command line>`` for one that runs a shell command (its words are what an
    agent asks for again), else ``tool(arguments)``."""
    try:
        value = orjson.loads(arguments) if arguments.strip().startswith("{") else None
    except orjson.JSONDecodeError:
        value = None
    line = command_line(value) if isinstance(value, Mapping) else None
    return f"$ {' '.join(line.split())}" if line else f"{tool}({_arguments(arguments)})"


def _speaker(message: Message, label: str) -> str:
    name = message.get("name")
    return f"{label} ({name.strip()})" if isinstance(name, str) and name.strip() else label


def entry_line(message: Message, call_names: Mapping[str, str] | None = None) -> str:
    """One line for one message (``call_names``: tool call id → tool name, for results)."""
    role = message.get("role")
    text = without_date_lines(content_text(message.get("content")))  # the entry's title shows the date
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    gist = _gist(text) if text.strip() else ""
    if role in RESULT_ROLES:
        name = (call_names or {}).get(str(message.get("tool_call_id")), "") or message.get("name") or ""
        label = f"Tool result ({name})" if isinstance(name, str) and name else "Tool result"
        return clip_line(f"{label}: {gist or '(empty)'}")
    if role == ROLE_ASSISTANT:
        calls = [_call(tool, arguments) for tool, arguments in tool_calls(message)]
        speaker = _speaker(message, "Assistant")
        if calls and gist and not any(call.startswith("$ ") for call in calls):  # a command line before words
            return clip_line(f"{speaker}: {gist} — called {', '.join(calls)}")
        if calls:
            return clip_line(f"{speaker} called {', '.join(calls)}")
        return clip_line(f"{speaker}: {gist or '(empty)'}")
    label = role.capitalize() if isinstance(role, str) and role else "Unknown"
    return clip_line(f"{_speaker(message, label)}: {gist or '(empty)'}")


def _entries(messages: Sequence[Message], context: Sequence[Message] = ()) -> list[Message]:
    """The page's messages as entries: system ones left out, the client's scaffolding removed."""
    cleaned = strip_scaffolding([m for m in messages if isinstance(m, Mapping)], context)
    return [m for m in cleaned if m.get("role") not in SYSTEM_ROLES]


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == ROLE_ASSISTANT else None
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(call, Mapping) and isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names[str(call.get("id"))] = function["name"]
    return names


def extractive_page_lines(messages: Sequence[Message]) -> PageLines:
    """The page's user entry as its summary, one line for each other entry. Deterministic."""
    entries = _entries(messages)
    names = _call_names(entries)
    lines = [entry_line(m, names) for m in entries]
    if not lines:
        return PageLines("(no messages)", ())
    first_user = next((i for i, m in enumerate(entries) if m.get("role") == ROLE_USER), 0)
    summary = lines.pop(first_user)
    return PageLines(summary, cap_lines(lines))


# --- LLM -------------------------------------------------------------------------------------

SYSTEM_PROMPT = f"""You index archived pages of a conversation for its table of contents.
Each page is given with its entries, numbered. Answer with one JSON object and nothing else:
{{"pages": [{{"summary": "...", "lines": ["...", "..."]}}]}}
- one object per page, in the order given;
- "summary": one line of at most {LINE_MAX_CHARS} characters saying what the user wanted and \
what came of it;
- "lines": exactly as many lines as the page's "lines" attribute says, in the order of the entries, \
each at most {LINE_MAX_CHARS} characters and starting with who spoke ("User:", "Assistant:", \
"Assistant called <tool>(...)", "Tool result:"); when a page has more entries than lines, \
cover all of them in that many lines;
- keep names, numbers, dates, file names and decisions; write in the conversation's language."""


def _expected_lines(entries: int) -> int:
    return min(entries, MAX_LINES_PER_PAGE)


def _page_prompt(number: int, entries: Sequence[Message], max_chars: int) -> str:
    body = "\n".join(f"[{i}] {render_message(m, max_chars)}" for i, m in enumerate(entries, 1))
    return f'<page number="{number}" lines="{_expected_lines(len(entries))}">\n{body}\n</page>'


def _user_prompt(pages: Sequence[Sequence[Message]]) -> str:
    total = sum(len(p) for p in pages) or 1
    per_message = max(MIN_MESSAGE_CHARS, min(MAX_MESSAGE_CHARS, MAX_PROMPT_CHARS // total))
    rendered = "\n\n".join(_page_prompt(n, entries, per_message) for n, entries in enumerate(pages, 1))
    return f"Index these {len(pages)} page(s).\n\n{rendered}"


def _line(value: Any) -> str:
    if not isinstance(value, str):
        raise CallFailed("malformed")
    line = clip_line(_LEADING_MARKER.sub("", " ".join(value.split())))
    if not line:
        raise CallFailed("empty_line")
    return line


def _validated(data: Any, pages: Sequence[Sequence[Message]]) -> list[PageLines]:
    answered = data.get("pages") if isinstance(data, Mapping) else None
    if not isinstance(answered, list) or len(answered) != len(pages):
        raise CallFailed("page_count", expected=len(pages), got=len(answered) if isinstance(answered, list) else None)
    out: list[PageLines] = []
    for number, (item, entries) in enumerate(zip(answered, pages, strict=True), 1):
        if not isinstance(item, Mapping) or not isinstance(item.get("lines"), list):
            raise CallFailed("malformed", page=number)
        lines = [_line(line) for line in item["lines"]]
        if len(lines) != _expected_lines(len(entries)):
            raise CallFailed("line_count", page=number, expected=_expected_lines(len(entries)), got=len(lines))
        out.append(PageLines(_line(item.get("summary")), tuple(lines)))
    return out


async def llm_page_lines(
    client: CompletionClient, model: str, pages: Sequence[Sequence[Message]]
) -> list[PageLines] | None:
    """Lines for each page of ``pages`` (each a page's messages) from one call of ``model``
    through ``client``, or None on any failure (transport, timeout, status, not JSON, wrong page
    or line counts). Never raises, except ``asyncio.CancelledError``."""
    batch = [m for page in pages for m in page]
    entries = [_entries(page, batch) for page in pages]
    if not entries or any(not page for page in entries):
        return None  # nothing a model could index: the extractive lines say "(no messages)"
    max_tokens = sum((_expected_lines(len(p)) + 1) * TOKENS_PER_LINE for p in entries) + 64
    prompt = Prompt(model, SYSTEM_PROMPT, _user_prompt(entries), max_tokens)
    return await answer_json(
        client, prompt, lambda data: _validated(data, entries), "pagelines.llm_fallback", pages=len(pages)
    )
