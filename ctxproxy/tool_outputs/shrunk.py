"""What a compressor returns (``compress``): the kept text and what it left out, in words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shrunk:
    text: str
    elided: str  # "412 of 530 lines elided (401 PASSED)": the retrieval line's first half


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    if word.endswith(("ch", "sh", "s", "x")):
        return f"{n} {word}es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"
