"""Fuzzing the Responses endpoints over HTTP: no input makes the proxy answer 5xx.

One real proxy (``cut_point`` in a small window, memory and its tools on) in front of the fake
Responses upstream takes a few hundred requests drawn by hypothesis: Responses bodies whose
``input`` holds items of every known type with random fields beside well-formed ones, compaction
items with content that claims to be ctxproxy's (well-formed references to nothing, forged ones),
``compaction_trigger`` anywhere, ``previous_response_id``, random JSON in every field ctxproxy
reads, random JSON values and random bytes — to ``/v1/responses`` and ``/v1/responses/compact``.
Every answer must be below 500 (the fake upstream's refusals are relayed), every error ctxproxy
gives OpenAI-shaped JSON, and the proxy must still serve a valid request afterwards.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.chat_bodies import json_values
from tests.raw_http import RawResponse, raw_request
from tests.responses.conftest import MODEL, ResponsesRig
from tests.security.test_fuzz_http import assert_openai_error
from tests.wire.openai_responses.items import call, output, reasoning, said, user

PATHS = ["/v1/responses", "/t/default/v1/responses", "/v1/responses/compact"]
FIELDS = ["model", "stream", "instructions", "input", "tools", "tool_choice", "max_output_tokens", "user", "store"]
TYPES = ["message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
         "reasoning", "compaction", "compaction_trigger", "web_search_call", "shell_call", "item_reference", 7, None]  # fmt: skip
ours = st.sampled_from(["ctxproxy:", "ctxproxy:" + "a" * 32 + ":d:s_x", "ctxproxy:" + "0" * 32 + ":h:../x", "x"])
wellformed = st.sampled_from(
    [user("hi"), said("ok"), call("c1"), output("c1"), reasoning(1), {"type": "compaction_trigger"}]
) | ours.map(lambda content: {"type": "compaction", "encrypted_content": content})
randomish = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES)},
    optional={
        k: json_values for k in ("role", "content", "call_id", "name", "arguments", "output", "encrypted_content")
    },
)
items = st.lists(wellformed | randomish | json_values, max_size=8)
bodies = (
    st.fixed_dictionaries(
        {"model": st.sampled_from([MODEL, "m"]), "input": items | st.text(max_size=20)},
        optional={
            "stream": st.booleans(),
            "previous_response_id": st.just("resp_1"),
            "store": st.booleans(),
            "instructions": st.text(max_size=20),
            "tool_choice": st.sampled_from(["auto", "none"]),
        },  # fmt: skip
    )
    | st.fixed_dictionaries({}, optional={field: json_values for field in FIELDS})
    | json_values
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, bytes]:
    if draw(st.integers(0, 6)) == 0:
        return draw(st.sampled_from(PATHS)), draw(st.binary(max_size=100))
    return draw(st.sampled_from(PATHS)), json.dumps(draw(bodies)).encode()


async def test_no_input_makes_the_responses_route_fail(rig: ResponsesRig) -> None:
    proxy: TestServer = await rig.proxy(window=1024, strategy="cut_point", extra="[memory]\nenabled = true\n")
    loop = asyncio.get_running_loop()
    root = str(proxy.make_url(""))

    def send(path: str, body: bytes) -> RawResponse:
        request = raw_request(root, "POST", path.encode(), [(b"Authorization", b"Bearer sk-test")], body)
        return asyncio.run_coroutine_threadsafe(request, loop).result(timeout=30)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(cases())
    def check(case: tuple[str, bytes]) -> None:
        response = send(*case)
        assert response.status < 500, (case, response.status, response.body[:300])
        if response.status >= 400 and response.headers.get("content-type", "").startswith("application/json"):
            assert_openai_error(response)

    await asyncio.to_thread(check)
    valid = json.dumps({"model": MODEL, "input": "still there?"}).encode()
    ok = await raw_request(root, "POST", b"/v1/responses", [(b"Authorization", b"Bearer sk-test")], valid)
    assert ok.status == 200 and ok.json()["output"][0]["content"][0]["text"] == "echo: still there?"
