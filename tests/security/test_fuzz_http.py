"""Fuzzing the chat endpoint over HTTP: no input makes the proxy answer 5xx.

One real proxy (memory and its tools on, so user and scope names are hashed and tools offered)
in front of the fake upstream takes a few hundred requests drawn by hypothesis: chat bodies with
random JSON in every field ctxproxy reads, messages of random shapes, well-formed conversations
with random fields beside them, random JSON values, random bytes; and random values for
``Authorization``, ``X-Ctx-User``, ``X-Ctx-Scope``, ``X-Session-Id``, ``Content-Type`` and
``Content-Encoding`` (bodies sometimes really gzip-coded). Every answer must be below 500, every
error OpenAI-shaped JSON, and the proxy must still serve a valid request afterwards.

Requests go over a raw socket so header values can hold any byte but CR and LF: control bytes
and 0x80-0xff included. What aiohttp's parser refuses by itself (control bytes, codings it cannot
decode such as br and zstd without their modules, a deflate stream that has not ended when the
body does) is answered by ctxproxy's connection handler, so it must be OpenAI-shaped JSON too.
gzip and deflate bodies are coded or not at random, and a deflate stream is sometimes cut short.

Hypothesis runs in a worker thread (``@given`` on a plain function); each example's request runs
on the test's event loop, where the proxy lives, through ``run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.chat_bodies import bodies, conversations, json_values
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.raw_http import RawResponse, raw_request

TENANT = '[upstream]\nbase_url = "{upstream}"\n[memory]\nenabled = true\n[tools]\nenabled = true\n'
PATHS = ["/v1/chat/completions", "/t/default/v1/chat/completions"]
FIELDS = ["model", "user", "stream", "n", "max_tokens", "max_completion_tokens", "tools", "functions"]
FIELDS += ["tool_choice", "stream_options"]
VALID = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "still there?"}]}

# Any byte but the CR and LF that would end the header line.
header_bytes = st.binary(max_size=40).map(lambda raw: bytes(b for b in raw if b not in (0x0D, 0x0A)))
ascii_words = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20)
header_values = {
    b"Authorization": st.sampled_from([b"Bearer sk-test", b"Basic dXNlcg==", b"Bearer "]),
    b"X-Ctx-User": st.sampled_from([b"alice", b"bob", "Zoë".encode()]),
    b"X-Ctx-Scope": st.sampled_from([b"team-a", "プロジェクト".encode()]),
    b"X-Session-Id": st.sampled_from([b"sess-1", b"sess-2", b"a" * 129]),
    b"Content-Type": st.sampled_from([b"application/json", b"text/plain", b"application/json; charset=latin-1"]),
}
codings = st.sampled_from([b"gzip", b"GZIP", b"identity", b"compress", b"gzip, gzip", b"br", b"zstd"]) | header_bytes
tools = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": ascii_words, "parameters": st.just({})}),
        }
    ),
    max_size=2,
)
valid_fields = {
    "user": st.text(max_size=10),
    "stream": st.booleans(),
    "n": st.integers(1, 3),
    "max_tokens": st.integers(1, 10**6),
    "max_completion_tokens": st.integers(1, 10**6),
    "tools": tools,
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans()}),
}
# Well-formed conversations: with valid fields (most get past parsing), or with random ones.
valid = st.fixed_dictionaries(
    {"model": st.sampled_from(["gpt-4o-mini", "gpt-4o", "m"]), "messages": conversations}, optional=valid_fields
)
near_valid = st.fixed_dictionaries(
    {"messages": conversations},
    optional={field: json_values for field in FIELDS} | {"extra": json_values},
)


@dataclass(frozen=True)
class Case:
    path: str
    body: bytes
    headers: list[tuple[bytes, bytes]]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["valid", "near_valid", "any_shape", "bytes"]))
    if kind == "bytes":
        body = draw(st.binary(max_size=200))
    else:
        value: Any = draw({"valid": valid, "near_valid": near_valid, "any_shape": bodies}[kind])
        body = json.dumps(value).encode()  # the stdlib writes what orjson cannot (ints over 64 bits)
    headers: list[tuple[bytes, bytes]] = []
    for name, typical in header_values.items():
        if draw(st.booleans()):
            headers.append((name, draw(typical | ascii_words.map(str.encode) | header_bytes)))
    if draw(st.integers(0, 5)) == 0:
        headers.append((b"Content-Encoding", b"deflate"))
        body = zlib.compress(body)
        if draw(st.booleans()):
            body = body[: draw(st.integers(0, len(body)))]
    elif draw(st.integers(0, 4)) == 0:
        coding = draw(codings)
        headers.append((b"Content-Encoding", coding))
        if coding.strip().lower() == b"gzip" and draw(st.booleans()):
            body = gzip.compress(body)
    return Case(draw(st.sampled_from(PATHS)), body, headers)


def assert_openai_error(response: RawResponse) -> None:
    assert response.headers.get("content-type", "").startswith("application/json"), response.body[:200]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str)


async def test_no_input_makes_the_proxy_fail(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy: Proxy = await make_proxy({"default": TENANT})
    loop = asyncio.get_running_loop()

    def send(case: Case) -> RawResponse:
        request = raw_request(proxy.url(), "POST", case.path.encode(), case.headers, case.body)
        return asyncio.run_coroutine_threadsafe(request, loop).result(timeout=30)

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(cases())
    def check(case: Case) -> None:
        response = send(case)
        assert response.status < 500, (case, response.status, response.body[:300])
        if response.status >= 400:
            assert_openai_error(response)

    await asyncio.to_thread(check)

    ok = await raw_request(proxy.url(), "POST", b"/v1/chat/completions", [], json.dumps(VALID).encode())
    assert ok.status == 200
    assert ok.json()["choices"][0]["message"]["role"] == "assistant"
