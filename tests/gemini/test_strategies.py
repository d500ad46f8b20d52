"""Every strategy compacts a long agent conversation — thoughts, signatures, parallel calls and
their responses — into a body the Gemini API takes: the system instruction as sent, the newest
content untouched, every content that is forwarded exactly as the client sent it (a model turn
with thoughts or calls whole), each turn of responses right after the calls it answers."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from ctxproxy.services import TASKS
from tests.fakes.gemini_checks import check_request
from tests.gemini.conftest import CLIENT_KEY, MODEL, GeminiRig
from tests.gemini.contents import SYSTEM, TOOLS, agent_turns, body, user
from tests.protocols.test_strategies import STRATEGIES

WINDOW = 1600
CONTENTS = [*agent_turns(10), user("Which night had the most errors?")]
CONFIG = {"temperature": 0, "thinking_config": {"thinking_budget": 64}}


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


async def post(url: str, payload: dict[str, Any], stream: bool = False) -> tuple[int, dict[str, str], bytes]:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1beta/models/{MODEL}:{method}", json=payload,
                             headers={"x-goog-api-key": CLIENT_KEY}) as resp:  # fmt: skip
            return resp.status, dict(resp.headers), await resp.read()


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_each_strategy_compacts_an_agent_conversation_into_a_valid_body(rig: GeminiRig, strategy: str) -> None:
    proxy = await rig.proxy(window=WINDOW, strategy=strategy, extra=STRATEGIES[strategy])
    url = str(proxy.make_url(""))
    status, headers, answer = await post(url, body(CONTENTS, generationConfig=CONFIG))
    assert status == 200, answer
    assert headers.get("X-Ctx-Compacted") == "1", headers
    sent = rig.fake.generate_requests()[-1].json()
    assert check_request(sent) is None
    contents = sent["contents"]
    assert sent["systemInstruction"] == SYSTEM and sent["generationConfig"] == CONFIG
    assert sent["tools"][:1] == TOOLS  # the client's, then ctxproxy's when there is something to recall
    ours = [d["name"] for tool in sent["tools"][1:] for d in tool["functionDeclarations"]]
    assert all(name.startswith("ctxproxy_") for name in ours) and len(sent["tools"]) <= 2
    assert contents[-1] == CONTENTS[-1] and len(contents) < len(CONTENTS)
    theirs = {canonical(content) for content in CONTENTS}
    added = [content for content in contents if canonical(content) not in theirs]
    assert len(added) <= 3, added  # a summary (and at most memories or a Contents Page)
    assert all(c["role"] == "user" and all(set(p) == {"text"} for p in c["parts"]) for c in added), added
    for i, content in enumerate(contents):  # every turn of responses follows the calls it answers
        if any("functionResponse" in p or "function_response" in p for p in content["parts"]):
            assert contents[i - 1] in CONTENTS and contents[i - 1]["role"] == "model"
            assert CONTENTS[CONTENTS.index(contents[i - 1]) + 1] == content
    await proxy.app[TASKS].drain(5)

    status, headers, _ = await post(url, body(CONTENTS, generationConfig=CONFIG), stream=True)
    assert status == 200 and headers.get("X-Ctx-Compacted") != "1"  # the checkpoint reused
    assert rig.fake.generate_requests()[-1].json()["contents"] == contents
