"""LoCoMo conversations as chat messages, for bench/compaction.py (``read_release``: the raw
samples, for bench/recall.py too).

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0) is read at run time from the shared data
directory and never copied into the repository. Each conversation becomes:

* a system message: "You are {speaker_b}, chatting with your friend {speaker_a} ...";
* every dialog turn, sessions in order, as one message: speaker_a's turns are role "user",
  speaker_b's role "assistant", the speaker's name in ``name``; a shared image's caption
  (``blip_caption``) is appended to the text; consecutive turns of one speaker stay separate
  messages; each session's first message starts with its date, ``[1:56 pm on 8 May, 2023] ``.

A client request is made at every user message: the history through that message.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

_SESSION = re.compile(r"^session_(\d+)$")
ABOUT_DATA = (
    "the benchmark reads LoCoMo's locomo10.json (github.com/snap-research/locomo, CC BY-NC 4.0, not part of "
    "this repository) from ../shared/data/ next to it, or from --data PATH"
)
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str  # the user
    speaker_b: str  # the assistant
    messages: list[dict[str, Any]]  # system message first

    @property
    def user_indices(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m["role"] == "user"]


def _name(speaker: str) -> str:
    """OpenAI's ``name`` allows [A-Za-z0-9_-]{1,64}; LoCoMo names already fit, but be safe."""
    return (_NAME_UNSAFE.sub("_", speaker) or "speaker")[:64]


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {str(caption).strip()}]" if text else f"[shares a photo: {caption}]"
    return text


def to_messages(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": f"You are {b}, chatting with your friend {a} over several months of conversations. "
            f"Reply as {b}: warm, brief, and consistent with everything said before.",
        }
    ]
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
    for s in sessions:
        turns = conv[f"session_{s}"]
        date = conv.get(f"session_{s}_date_time")
        for j, turn in enumerate(turns):
            text = _turn_text(turn)
            if j == 0 and date:
                text = f"[{date}] {text}"
            speaker = turn["speaker"]
            role = "user" if speaker == a else "assistant"
            messages.append({"role": role, "name": _name(speaker), "content": text})
    return Conversation(str(sample.get("sample_id", "?")), a, b, messages)


def load(path: str | Path) -> list[Conversation]:
    return [to_messages(sample) for sample in read_release(path)]


def read_release(path: str | Path) -> list[dict[str, Any]]:
    """LoCoMo's ``locomo10.json`` as JSON, or exit 2 with one line on stderr saying what is wrong
    with ``path`` (a benchmark without its data is not a crash: no traceback)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        _exit(f"{path}: no such file; {ABOUT_DATA}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        _exit(f"{path}: cannot read it as JSON ({exc}); {ABOUT_DATA}")
    if not isinstance(data, list) or not data or not all(isinstance(s, dict) and "conversation" in s for s in data):
        _exit(f"{path}: not the LoCoMo release (a JSON list of samples with 'conversation'); {ABOUT_DATA}")
    return data


def _exit(message: str) -> NoReturn:
    print(f"{Path(sys.argv[0]).name}: {message}", file=sys.stderr)
    raise SystemExit(2)


def synthetic(conversations: list[Conversation], min_messages: int) -> Conversation:
    """One long conversation: a system message, then the conversations' turns back to back
    (each keeps its own speakers and session dates), repeated with a marker if needed."""
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a friend in a very long group chat that spans years. Reply briefly and stay "
            "consistent with everything said before.",
        }
    ]
    copy = 0
    while len(messages) < min_messages:
        for conv in conversations:
            for m in conv.messages[1:]:
                content = m["content"] if copy == 0 else f"(rerun {copy}) {m['content']}"
                messages.append({**m, "content": content})
        copy += 1
    return Conversation("synthetic", "various", "various", messages)
