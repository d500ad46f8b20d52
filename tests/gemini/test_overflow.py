"""An upstream that refuses the prompt as too long — Gemini's 400 ``INVALID_ARGUMENT`` "The input
token count (N) exceeds the maximum number of tokens allowed (M)", as JSON or as a stream's first
event — gets one compacted retry, and ctxproxy learns the window from the numbers; a stream cut
short ends with an error event in Google's shape; the answer's ``usageMetadata`` teaches ctxproxy
how the model counts."""

from __future__ import annotations

import orjson
import pytest
from google.genai import errors
from structlog.testing import capture_logs

from tests.fakes.gemini_checks import check_request
from tests.fakes.serving import Ending
from tests.gemini.conftest import MODEL, GeminiRig
from tests.gemini.contents import agent_turns, body, user
from tests.gemini.test_strategies import post

CONTENTS = [*agent_turns(8), user("Which night had the most errors?")]
LIMIT = 1200


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_overflow_is_compacted_and_retried_and_the_window_learned(rig: GeminiRig, stream: bool) -> None:
    proxy = await rig.proxy(window=1_000_000, strategy="cut_point")  # only the upstream knows better
    rig.fake.window = LIMIT
    rig.fake.refuse_in_stream = stream
    status, headers, answer = await post(str(proxy.make_url("")), body(CONTENTS), stream=stream)
    assert status == 200, answer
    assert headers["X-Ctx-Retried"] == "1"
    assert b"echo: Which night had the most errors?" in answer and b'"error"' not in answer
    refused, retried = (orjson.loads(r.body) for r in rig.fake.generate_requests())
    assert refused["contents"] == CONTENTS
    assert len(retried["contents"]) < len(CONTENTS) and retried["contents"][-1] == CONTENTS[-1]
    assert check_request(retried) is None and rig.fake.prompt_tokens(retried) <= LIMIT

    status, headers, _ = await post(str(proxy.make_url("")), body(CONTENTS), stream=stream)
    assert status == 200 and "X-Ctx-Retried" not in headers  # the learned window: compacted before sending
    assert rig.fake.prompt_tokens(rig.fake.generate_requests()[-1].json()) <= LIMIT


async def test_a_stream_cut_short_ends_with_an_error_event(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    rig.fake.reply("Hello there", pieces=["Hello ", "there"], ending=Ending(end_after=1))
    stream = await rig.client(proxy).models.generate_content_stream(model=MODEL, contents="hi")
    seen = []
    with pytest.raises(errors.APIError) as raised:
        async for chunk in stream:
            seen.append(chunk.text)
    assert seen == ["Hello "]
    assert raised.value.status == "UNAVAILABLE" and "cut short" in (raised.value.message or "")


async def test_usage_teaches_the_count_ratio(rig: GeminiRig) -> None:
    """An upstream that counts twice what ctxproxy does, half of it read from its cache: ctxproxy
    learns the ratio and reads the cached part."""
    proxy = await rig.proxy()
    url = str(proxy.make_url(""))
    prompt = body([user("How many loaves? " * 40)])
    _, first, _ = await post(url, prompt)
    counted = int(first["X-Ctx-Tokens-Before"])
    usage = {"promptTokenCount": 2 * counted, "cachedContentTokenCount": counted, "totalTokenCount": 2 * counted + 5}
    for _ in range(3):
        rig.fake.reply(usage=usage)
    with capture_logs() as logs:
        for _ in range(3):
            await post(url, prompt)
    lines = [line for line in logs if line["event"] == "request"]
    assert lines[-1]["count_ratio"] > 1.5, lines[-1]
    assert lines[-1]["cached_from"] == "upstream" and lines[-1]["cached_tokens"] == counted // 2  # in its own tokens
