"""What a Responses request logs: the request line says what happened (compacted, served, expanded,
forwarded as sent, the socket's message counts) and no line holds a word of the conversation,
a summary or a key."""

from __future__ import annotations

import json

from tests.logs.lines import capture, request_lines
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import codex_turns, developer, user

SECRET = "zebra-walnut-7731"
HISTORY = [developer(f"Rules {SECRET}."), *codex_turns(12), user(f"Which log? {SECRET}")]


async def test_no_line_says_what_the_conversation_said(rig: ResponsesRig) -> None:
    proxy = await rig.proxy(window=1200, strategy="cut_point", upstream=f'api_key = "sk-{SECRET}"')
    client = rig.client(proxy)
    with capture() as logs:
        await client.responses.create(model=MODEL, input=HISTORY, store=False)
        served = await client.responses.create(model=MODEL, input=[*HISTORY, {"type": "compaction_trigger"}])
        item = served.output[0].to_dict()
        await client.responses.create(model=MODEL, input=[*HISTORY[:2], item], store=False)
        await client.responses.create(model=MODEL, input=HISTORY, previous_response_id="resp_1")
        lines = await request_lines(logs, 4)
    first, trigger, expanded, as_sent = lines
    assert first["compacted"] is True
    assert trigger["remote_compaction"] == "served" and trigger["summarizer"] == "extractive"
    assert expanded["compactions_expanded"] == 1 and expanded["compactions_gone"] == 0
    assert as_sent["forwarded_as_sent"] == "previous_response_id"
    assert SECRET not in json.dumps(logs, default=str)
    assert all(SECRET.encode() in request.body for request in rig.fake.response_requests())  # it was there to leak
