"""An ordinary chat (no tools, no client scaffolding) is summarised exactly as before issue 21.4.

The expected bodies were written by the extractive summariser as it was before scaffolding and
work extraction existed (commit f7da083): leaving scaffolding out must not change a chat.
"""

from __future__ import annotations

import pytest

from ctxproxy.summarize import ExtractiveSummarizer, SummaryTask
from ctxproxy.tokens import TokenCounter

CHAT = [
    {"role": "system", "content": "You are a helpful travel agent."},
    {
        "role": "user",
        "name": "Ana",
        "content": "I want to plan a trip to Lisbon in May with my sister Marta. We have a budget of 2000 euros.",
    },
    {"role": "assistant", "content": "Great choice! Lisbon is lovely in May. Do you prefer a hotel or an apartment?"},
    {
        "role": "user",
        "name": "Ana",
        "content": "An apartment near Alfama, please. We must not stay more than 5 nights.\n\nThanks!",
    },
    {
        "role": "assistant",
        "content": "We'll go with the Alfama apartment on Rua dos Remédios for 5 nights. I'll check the trams next.\n\n```bash\ncurl -s https://example.org/trams | head\n```",
    },
    {
        "role": "user",
        "name": "Marta",
        "content": "Remember to book the Sintra day trip on Tuesday. The train leaves Rossio at 9:10.\n\nThanks!",
    },
    {
        "role": "assistant",
        "content": "Noted: Sintra on Tuesday, train from Rossio at 9:10. The total so far is 1450 euros.",
    },
    {
        "role": "user",
        "name": "Ana",
        "content": "我们必须在周五之前确认。Next, find a fado restaurant for Saturday night.",
    },
]

BEFORE = {
    (
        "fresh",
        1200,
    ): "### Goal\n- I want to plan a trip to Lisbon in May with my sister Marta.\n\n### Key facts\n- Ana: We have a budget of 2000 euros.\n- assistant: Lisbon is lovely in May.\n- Ana: An apartment near Alfama, please.\n- Marta: The train leaves Rossio at 9:10.\n- assistant: Noted: Sintra on Tuesday, train from Rossio at 9:10.\n- assistant: The total so far is 1450 euros.\n\n### Constraints\n- Ana: We must not stay more than 5 nights.\n- Ana: 我们必须在周五之前确认。\n\n### Decisions\n- assistant: We'll go with the Alfama apartment on Rua dos Remédios for 5 nights.\n\n### TODOs / next steps\n- assistant: I'll check the trams next.\n- Marta: Remember to book the Sintra day trip on Tuesday.\n- Ana: Next, find a fado restaurant for Saturday night.\n\n### Important snippets\n- `curl -s https://example.org/trams | head` (bash)",
    (
        "fresh",
        120,
    ): "### Goal\n- I want to plan a trip to Lisbon in May with my sister Marta.\n\n### Constraints\n- Ana: 我们必须在周五之前确认。\n\n### TODOs / next steps\n- Ana: Next, find a fado restaurant for Saturday night.\n\n### Important snippets\n- `curl -s https://example.org/trams | head` (bash)",
    (
        "split_turn",
        1200,
    ): "### Goal\n- I want to plan a trip to Lisbon in May with my sister Marta.\n\n### Background\n- assistant: Great choice!\n- assistant: We'll go with the Alfama apartment on Rua dos Remédios for 5 nights.\n- assistant: Noted: Sintra on Tuesday, train from Rossio at 9:10.\n\n### Key facts\n- Ana: We have a budget of 2000 euros.\n- assistant: Lisbon is lovely in May.\n- Ana: An apartment near Alfama, please.\n- Marta: The train leaves Rossio at 9:10.\n- assistant: The total so far is 1450 euros.\n\n### Constraints\n- Ana: We must not stay more than 5 nights.\n- Ana: 我们必须在周五之前确认。\n\n### TODOs / next steps\n- assistant: I'll check the trams next.\n- Marta: Remember to book the Sintra day trip on Tuesday.\n- Ana: Next, find a fado restaurant for Saturday night.\n\n### Important snippets\n- `curl -s https://example.org/trams | head` (bash)",
}
BEFORE_UPDATE = "### Goal\n- I want to plan a trip to Lisbon in May with my sister Marta.\n\n### Key facts\n- Ana: We have a budget of 2000 euros.\n- assistant: Lisbon is lovely in May.\n- Ana: An apartment near Alfama, please.\n- Marta: The train leaves Rossio at 9:10.\n- assistant: Noted: Sintra on Tuesday, train from Rossio at 9:10.\n- assistant: The total so far is 1450 euros.\n\n### Constraints\n- Ana: We must not stay more than 5 nights.\n- Ana: 我们必须在周五之前确认。\n\n### Decisions\n- assistant: We'll go with the Alfama apartment on Rua dos Remédios for 5 nights.\n\n### TODOs / next steps\n- assistant: I'll check the trams next.\n- Marta: Remember to book the Sintra day trip on Tuesday.\n- Ana: Next, find a fado restaurant for Saturday night.\n\n### Important snippets\n- `curl -s https://example.org/trams | head` (bash)"


@pytest.mark.parametrize(("flavour", "max_tokens"), list(BEFORE))
def test_a_chat_summarises_as_before(counter: TokenCounter, flavour: str, max_tokens: int) -> None:
    task = SummaryTask(flavour, CHAT, max_tokens=max_tokens)  # type: ignore[arg-type]
    assert ExtractiveSummarizer(counter).summarize_text(task) == BEFORE[(flavour, max_tokens)]


def test_a_chat_updates_as_before(counter: TokenCounter) -> None:
    summarizer = ExtractiveSummarizer(counter)
    previous = summarizer.summarize_text(SummaryTask("fresh", CHAT[:4]))
    assert summarizer.summarize_text(SummaryTask("update", CHAT[4:], previous, context=CHAT)) == BEFORE_UPDATE
