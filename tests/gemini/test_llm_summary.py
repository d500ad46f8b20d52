"""A Gemini tenant's summaries are asked of its upstream in Gemini's protocol, with its key."""

from __future__ import annotations

from tests.gemini.conftest import MODEL, TENANT_KEY, GeminiRig
from tests.gemini.contents import agent_turns, body, user
from tests.gemini.test_strategies import post


async def test_the_summary_is_asked_in_geminis_protocol(rig: GeminiRig) -> None:
    proxy = await rig.proxy(window=1600, strategy="cut_point", summarizer="llm")
    status, headers, answer = await post(str(proxy.make_url("")), body([*agent_turns(10), user("Which night?")]))
    assert status == 200 and headers["X-Ctx-Compacted"] == "1", answer
    asked = [r for r in rig.fake.generate_requests() if r.json().get("generationConfig", {}).get("temperature") == 0]
    assert asked  # one call a part of the history summarised
    for call in asked:
        assert call.path == f"/v1beta/models/{MODEL}:generateContent" and call.headers["x-goog-api-key"] == TENANT_KEY
    summary_call = asked[0].json()
    assert set(summary_call) == {"systemInstruction", "contents", "generationConfig"}
    (content,) = summary_call["contents"]
    assert content["role"] == "user" and "Question 0" in content["parts"][0]["text"]
    assert summary_call["generationConfig"]["maxOutputTokens"] > 0
    forwarded = rig.fake.generate_requests()[-1].json()["contents"]
    summary = forwarded[0]["parts"][0]["text"]
    assert summary.startswith("## Context Summary") and "echo: " in summary  # the (echo) model's summary
