"""The prompts of the LLM summariser, one per flavour. Pure.

Every prompt asks for the body only: the sections of ``SECTIONS`` as ``### <name>`` headings
with ``- `` bullets, empty ones omitted, within the token budget — the work (requests, commands
and their outcomes, errors, decisions), not the client's repeated boilerplate. The files lists
are given as context; the Files section itself is appended by the summariser, not written by
the model.
"""

from __future__ import annotations

from ctxproxy.summarize.base import SECTIONS, Flavour, SummaryTask

__all__ = ["system_prompt", "user_prompt"]

_GUIDE = {
    "Goal": "what the user wants overall, in their words",
    "Requests": "the user's later requests, in order",
    "Background": "what happened so far that the rest depends on",
    "Key facts": "names, numbers, dates, paths, identifiers, results, who said what",
    "Constraints": "requirements and limits (must, never, only, at most)",
    "Decisions": "what was chosen, and why when it was said",
    "Commands": "commands run, each with its outcome",
    "Errors": "errors met, and whether they were resolved",
    "TODOs / next steps": "open items, in order",
    "Important snippets": "short code, commands or error lines, verbatim in backticks",
}

SYSTEM = (
    "You compress the history of a conversation between a user and an AI assistant. The assistant "
    "will continue the conversation seeing only your summary and the most recent messages, so keep "
    "everything it needs and nothing else.\n\n"
    "Answer with the summary only, in Markdown: these sections, in this order, each as a "
    "`### <name>` heading with exactly the name given, followed by `- ` bullets; leave out a "
    "section that would be empty; no other headings, no preamble, no closing remarks.\n"
    + "\n".join(f"{i}. {name}: {_GUIDE[name]}" for i, name in enumerate(SECTIONS, 1))
    + "\n\nBe concrete and terse. Keep exact names, numbers, dates, file paths and identifiers. "
    "Leave out boilerplate the client repeats every turn. "
    "Prefix a bullet with the speaker's name when the messages name their speakers. Write in the "
    "language of the conversation, but keep the section headings exactly as given. Stay under "
    "{max_tokens} tokens."
)

_TASK: dict[Flavour, str] = {
    "fresh": "Summarise the conversation below.",
    "update": (
        "Update the existing summary with the new messages below, and answer with the complete "
        "updated summary (not a list of changes). Keep what is still true, add what is new, drop "
        "what the new messages supersede or contradict. Keep the Goal unless the user changed it."
    ),
    "split_turn": (
        "The messages below are the START of one turn: the user's request and the assistant's "
        "work on it so far. The turn continues after this cut, and its later messages stay "
        "verbatim, so summarise what was asked (under Goal) and what has been done and found so "
        "far (under Background), so that the assistant can carry on from there."
    ),
    "branch": (
        "The messages below are a branch of the conversation that the user left: they went back "
        "to an earlier point and continued differently from there. Summarise what happened on "
        "that branch (what was asked, tried, found and decided) so that the assistant, going on "
        "with the new branch, knows what was explored before and does not lose it."
    ),
}


def system_prompt(max_tokens: int) -> str:
    return SYSTEM.replace("{max_tokens}", str(max_tokens))


def _files(task: SummaryTask) -> str:
    lines = []
    if task.files_read:
        lines.append("Files read so far: " + ", ".join(task.files_read))
    if task.files_modified:
        lines.append("Files modified so far: " + ", ".join(task.files_modified))
    if lines:
        lines.append("(Mention a file where it matters; do not write a Files section.)")
    return "\n".join(lines)


def user_prompt(task: SummaryTask, transcript: str) -> str:
    """The user message for ``task`` with ``transcript`` (rendered messages) as its messages.
    An ``update`` without a previous summary is a ``fresh`` one."""
    flavour: Flavour = task.flavour if task.flavour != "update" or task.previous else "fresh"
    parts = [_TASK[flavour]]
    if files := _files(task):
        parts.append(files)
    if flavour == "update":
        parts.append(f"<previous-summary>\n{(task.previous or '').strip()}\n</previous-summary>")
    tag = {"fresh": "conversation", "update": "new-messages", "split_turn": "turn-start", "branch": "abandoned-branch"}[
        flavour
    ]
    parts.append(f"<{tag}>\n{transcript}\n</{tag}>")
    return "\n\n".join(parts)
