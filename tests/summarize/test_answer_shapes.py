"""A model's summary is used in whatever reasonable shape it answers (ctxproxy/summarize/answer.py).

Each case is an answer as a real model might write it, and what must be found where: a
section, and a text that must be in one of its items. ``absent`` texts (preambles, closing
remarks, titles) must be nowhere in the body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ctxproxy.summarize.answer import read_answer
from ctxproxy.summarize.body import render_body
from tests.summarize.factories import assert_contract_shape


@dataclass(frozen=True)
class Shape:
    answer: str
    found: dict[str, list[str]]
    absent: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)


SHAPES: dict[str, Shape] = {
    "the asked format": Shape(
        "### Goal\n- Ship v2 of the billing service\n### Decisions\n- Use Postgres 16",
        {"Goal": ["Ship v2"], "Decisions": ["Postgres 16"]},
    ),
    "h2 headings": Shape(
        "## Goal\n- Ship v2\n## Key facts\n- The deadline is March 3\n## TODOs\n- Write the migration",
        {"Goal": ["Ship v2"], "Key facts": ["March 3"], "TODOs / next steps": ["migration"]},
    ),
    "h1 and h4 headings mixed": Shape(
        "# Goal\n- Ship v2\n#### Constraints\n- No downtime allowed",
        {"Goal": ["Ship v2"], "Constraints": ["No downtime"]},
    ),
    "numbered headings": Shape(
        "## 1. Goal\n- Ship v2\n## 2. Decisions\n- Use Postgres\n## 3. Next steps\n- Tag the release",
        {"Goal": ["Ship v2"], "Decisions": ["Postgres"], "TODOs / next steps": ["Tag the release"]},
    ),
    "bold labels alone": Shape(
        "**Goal:**\n- Ship v2\n\n**Key facts:**\n- Budget is 40k EUR\n\n**Decisions**\n- Use Postgres",
        {"Goal": ["Ship v2"], "Key facts": ["40k EUR"], "Decisions": ["Postgres"]},
    ),
    "bold labels leading text": Shape(
        "**Goal:** Ship v2 of billing.\n**Constraints:** Must stay under 200 ms p99.\n**Decisions:** Postgres 16.",
        {"Goal": ["Ship v2"], "Constraints": ["200 ms"], "Decisions": ["Postgres 16"]},
    ),
    "bold labels in bullets": Shape(
        "- **Goal:** Ship v2\n- **Key facts:** Launch is on Friday\n- **Next steps:** Email the team",
        {"Goal": ["Ship v2"], "Key facts": ["Friday"], "TODOs / next steps": ["Email the team"]},
    ),
    "numbered sections with plain labels": Shape(
        "1. Goal: ship v2\n2. Key facts: the API key rotates monthly\n3. Decisions: keep Redis",
        {"Goal": ["ship v2"], "Key facts": ["rotates monthly"], "Decisions": ["keep Redis"]},
    ),
    "plain labels": Shape(
        "Goal: migrate the cron jobs\nConstraints: only on weekends\nTODO: check the logs",
        {"Goal": ["cron jobs"], "Constraints": ["weekends"], "TODOs / next steps": ["check the logs"]},
    ),
    "star and numbered bullets": Shape(
        "### Key facts\n* The cluster has 3 nodes\n* Node 2 is flaky\n### TODOs\n1. Replace node 2\n2) Re-run the tests",
        {"Key facts": ["3 nodes", "Node 2 is flaky"], "TODOs / next steps": ["Replace node 2", "Re-run the tests"]},
    ),
    "fenced markdown": Shape(
        "```markdown\n## Goal\n- Ship v2\n## Decisions\n- Use Postgres\n```",
        {"Goal": ["Ship v2"], "Decisions": ["Postgres"]},
    ),
    "fenced with a preamble": Shape(
        "Here is the summary you asked for:\n```\n### Goal\n- Ship v2\n```\nLet me know if you need more.",
        {"Goal": ["Ship v2"]},
        absent=["Here is the summary", "Let me know"],
    ),
    "preamble and closing remarks": Shape(
        "Sure! Here's a concise summary of the conversation.\n\n## Goal\n- Ship v2\n## Key facts\n- v1 had 3 bugs"
        "\n\nI hope this helps! Let me know if you want more detail.",
        {"Goal": ["Ship v2"], "Key facts": ["3 bugs"]},
        absent=["Sure!", "I hope this helps"],
    ),
    "title heading and rules": Shape(
        "# Conversation Summary\n---\n## Goal\n- Ship v2\n---\n## Decisions\n- Use Postgres\n***",
        {"Goal": ["Ship v2"], "Decisions": ["Postgres"]},
        absent=["Conversation Summary", "---"],
    ),
    "json object": Shape(
        '{"goal": "Ship v2", "key_facts": ["v1 had 3 bugs", "the deadline is March 3"], "decisions": ["Postgres"],'
        ' "todos": ["write the migration"]}',
        {
            "Goal": ["Ship v2"],
            "Key facts": ["3 bugs", "March 3"],
            "Decisions": ["Postgres"],
            "TODOs / next steps": ["migration"],
        },
    ),
    "json wrapped and fenced": Shape(
        '```json\n{"summary": {"Goal": "Ship v2", "Constraints": "No downtime", "files": {"read": ["a.py"],'
        ' "modified": ["b.py"]}}}\n```',
        {"Goal": ["Ship v2"], "Constraints": ["No downtime"]},
        read=["a.py"],
        modified=["b.py"],
    ),
    "json with nested objects": Shape(
        '{"goal": "Ship v2", "key_facts": [{"fact": "v1 had 3 bugs", "source": "user"}], "next_steps": "tag it"}',
        {"Goal": ["Ship v2"], "Key facts": ["v1 had 3 bugs"], "TODOs / next steps": ["tag it"]},
    ),
    "plain prose": Shape(
        "The user is building a billing service and decided to use Postgres 16.\n\n"
        "They still need to write the migration before Friday.",
        {"Background": ["billing service", "migration before Friday"]},
    ),
    "chinese headings": Shape(
        "## 目标\n- 发布 v2\n## 关键信息\n- 截止日期是三月三日\n## 下一步\n- 写迁移脚本",
        {"Goal": ["发布 v2"], "Key facts": ["三月三日"], "TODOs / next steps": ["迁移脚本"]},
    ),
    "spanish headings": Shape(
        "## Objetivo\n- Lanzar la v2\n## Decisiones\n- Usar Postgres\n## Próximos pasos\n- Escribir la migración",
        {"Goal": ["Lanzar la v2"], "Decisions": ["Postgres"], "TODOs / next steps": ["migración"]},
    ),
    "french bold labels": Shape(
        "**Objectif :** livrer la v2\n**Contraintes :** pas d'interruption\n**Décisions :** garder Redis",
        {"Goal": ["livrer la v2"], "Constraints": ["interruption"], "Decisions": ["garder Redis"]},
    ),
    "german headings": Shape(
        "### Ziel\n- Version 2 ausliefern\n### Entscheidungen\n- Postgres verwenden\n### Nächste Schritte\n- Tests",
        {"Goal": ["Version 2"], "Decisions": ["Postgres"], "TODOs / next steps": ["Tests"]},
    ),
    "code snippet kept with its fence": Shape(
        "## Goal\n- Fix the deploy\n## Important snippets\n```sh\nkubectl rollout restart deploy/api\n```",
        {"Goal": ["Fix the deploy"], "Important snippets": ["kubectl rollout restart"]},
    ),
    "unknown sections kept as background": Shape(
        "## Goal\n- Ship v2\n## Open questions\n- Who owns the on-call rota?",
        {"Goal": ["Ship v2"], "Background": ["on-call rota"]},
    ),
    "prose before the first heading kept": Shape(
        "The team works on billing.\n## Goal\n- Ship v2",
        {"Background": ["works on billing"], "Goal": ["Ship v2"]},
    ),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_every_reasonable_shape_is_read(name: str) -> None:
    shape = SHAPES[name]
    body = read_answer(shape.answer)
    for section, texts in shape.found.items():
        items = body.sections.get(section, [])
        for text in texts:
            assert any(text in item for item in items), (section, text, body.sections)
    rendered = render_body(body)
    for text in shape.absent:
        assert text not in rendered, (text, rendered)
    assert body.files_read == shape.read and body.files_modified == shape.modified
    assert_contract_shape(rendered)


def test_there_are_at_least_twenty_shapes() -> None:
    assert len(SHAPES) >= 20


@pytest.mark.parametrize("answer", ["", "   \n", "## Goal\n\n## Decisions\n", "```\n```", "{}", "---\n***"])
def test_an_answer_with_nothing_in_it_is_empty(answer: str) -> None:
    assert read_answer(answer).item_count() == 0


def test_a_label_like_sentence_is_not_a_section() -> None:
    body = read_answer("## Key facts\n- Note: the build takes 20 minutes\n- **Postgres** is the database")
    assert body.sections == {
        "Key facts": ["- Note: the build takes 20 minutes", "- **Postgres** is the database"],
    }
