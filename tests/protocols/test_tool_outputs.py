"""Tool outputs on every protocol, through the real SDKs: a fresh result is forwarded compressed,
the model gets it back with ``ctxproxy_retrieve`` (answered by ctxproxy, never shown to the
client), in JSON and in streams; and one agent session replayed three times forwards the same
compressed and masked bytes each time, never rewriting a result it sent as it came."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from ctxproxy.tool_outputs import ref_of
from tests.protocols.clients import ADMIN_KEY
from tests.protocols.conversation import SYSTEM

RETRIEVE = "ctxproxy_retrieve"
ANSWER = "The failing test is test_checkout_total."
OUTPUTS = "\n[compaction.tool_outputs]\nmin_tokens = 200\nkeep_turns = 2\n"


def pytest_log(failing: str, passed: int = 300) -> str:
    """A ``pytest -v`` log: ``passed`` passing tests and one failing, with its traceback."""
    lines = [
        "============================= test session starts ==============================",
        "collected 301 items",
        "",
    ]
    lines += [f"tests/test_shop.py::test_case_{i:03d} PASSED{' ' * 20}[{i * 100 // passed:3d}%]" for i in range(passed)]
    lines += [f"tests/test_shop.py::{failing} FAILED", "", "=================================== FAILURES ==="]
    lines += [f"    def {failing}():", ">       assert total(cart) == 12", "E       AssertionError: assert 11 == 12"]
    lines += ["=========================== short test summary info ============================"]
    lines += [
        f"FAILED tests/test_shop.py::{failing} - AssertionError",
        f"======== 1 failed, {passed} passed in 4.20s ========",
    ]
    return "\n".join(lines)


def agent_turns(steps: int) -> list[dict[str, Any]]:
    """A user's request, then ``steps`` agent turns each calling ``lookup`` and getting a long log."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": "Run the tests and fix what fails."}]
    for n in range(steps):
        call = {"id": f"toolu_{n:04d}", "name": "lookup", "input": {"q": f"pytest run {n}"}}
        turns += [{"role": "assistant", "content": f"Run {n}.", "calls": [call]}]
        turns += [{"role": "tool", "id": call["id"], "content": pytest_log(f"test_step_{n}", 120 + n)}]
    return turns


async def metrics_with(protocol: Any, lines: tuple[str, ...], deadline: float = 5.0) -> str:
    """``/metrics`` once it has every one of ``lines`` (a request is counted as its answer ends,
    which the client may see first), failing after ``deadline`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(protocol.proxy.make_url("/metrics")) as resp:
                text = await resp.text()
            missing = [line for line in lines if line not in text]
            if not missing:
                return text
            assert loop.time() < end, (missing, [m for m in text.splitlines() if "tool_output" in m])
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_fresh_result_is_compressed_and_retrieved(protocol: Any, stream: bool) -> None:
    await protocol.start(strategy="cut_point", extra=OUTPUTS)
    log = pytest_log("test_checkout_total")
    turns = [
        {"role": "user", "content": "Run the tests."},
        {
            "role": "assistant",
            "content": "Running.",
            "calls": [{"id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
        },
        {"role": "tool", "id": "toolu_1", "content": log},
    ]
    protocol.script_call(RETRIEVE, {"ref": ref_of(log), "query": "FAILED"}, ANSWER, stream=stream)
    reply = await protocol.send(SYSTEM, turns, stream=stream)
    assert reply.text == ANSWER
    assert reply.headers["X-Ctx-Tool-Outputs"] == "compressed=1 masked=0"
    assert reply.count("Tokens-After") < reply.count("Tokens-Before") / 2  # the count is of what was forwarded
    first, second = protocol.forwarded(0), protocol.forwarded(1)
    assert RETRIEVE in protocol.offered_tools(first) and protocol.offered_tools(second) == protocol.offered_tools(first)
    (sent,) = protocol.tool_answers(first)
    assert len(sent) < len(log) / 3 and "test_checkout_total FAILED" in sent and ref_of(log) in sent
    assert "… 2" in sent and "PASSED)" in sent  # the passing runs are counted, not listed
    answer = protocol.tool_answers(second)[-1]
    assert "tests/test_shop.py::test_checkout_total FAILED" in answer and "test_case_150" not in answer
    assert protocol.tool_answers(second)[0] == sent  # the compressed result is carried as it was sent
    protocol.check_valid(second)
    wanted = (
        'ctxproxy_tool_outputs_total{action="compressed",tenant="default"} 1.0',
        'ctxproxy_tool_outputs_total{action="fresh",tenant="default"} 1.0',
        'ctxproxy_tool_outputs_total{action="masked",tenant="default"} 0.0',
        'ctxproxy_proxy_tool_calls_total{tenant="default",tool="retrieve"} 1.0',
    )
    metrics = await metrics_with(protocol, wanted)
    saved = next(x for x in metrics.splitlines() if x.startswith("ctxproxy_tool_output_saved_tokens_total{"))
    assert float(saved.split()[-1]) > 1000


async def test_a_small_or_old_result_is_left_as_sent(protocol: Any) -> None:
    """A result under ``min_tokens`` goes as it came; a big one sent before ctxproxy rewrote tool
    outputs (here: not the newest) is never compressed afterwards."""
    await protocol.start(strategy="cut_point", extra=OUTPUTS)
    old = pytest_log("test_old")
    turns = [
        {"role": "user", "content": "Run the tests."},
        {
            "role": "assistant",
            "content": "Running.",
            "calls": [{"id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
        },
        {"role": "tool", "id": "toolu_1", "content": old},
        {"role": "assistant", "content": "Again.", "calls": [{"id": "toolu_2", "name": "lookup", "input": {"q": "y"}}]},
        {"role": "tool", "id": "toolu_2", "content": "3 passed"},
    ]
    reply = await protocol.send(SYSTEM, turns)
    assert "X-Ctx-Tool-Outputs" not in reply.headers
    assert protocol.tool_answers(protocol.forwarded()) == [old, "3 passed"]
    assert RETRIEVE not in protocol.offered_tools(protocol.forwarded())


async def test_one_session_replayed_three_times_forwards_the_same_bytes(protocol: Any) -> None:
    await protocol.start(strategy="cut_point", extra=OUTPUTS)
    steps = 9
    replays = []
    for replay in range(3):
        sent = []
        for step in range(1, steps + 1):
            reply = await protocol.send(SYSTEM, agent_turns(step), **{"X-Session-Id": f"replay-{replay}"})
            forwarded = protocol.forwarded()
            protocol.check_valid(forwarded)
            sent.append((reply.headers.get("X-Ctx-Tool-Outputs"), protocol.tool_answers(forwarded)))
        replays.append(sent)
    assert replays[0] == replays[1] == replays[2]
    headers = [header for header, _ in replays[0]]
    assert headers[-1] == "compressed=1 masked=8"  # keep_turns 2: steps of 2 down to the newest turn
    assert [header.split("masked=")[1] for header in headers] == ["0", "0", "2", "2", "4", "4", "6", "6", "8"]
    for (_, before), (_, after) in zip(replays[0], replays[0][1:], strict=False):
        for old, new in zip(before, after, strict=False):  # a result is sent as before, or masked
            assert new == old or (new.startswith("[ctxproxy: the output of lookup(q=") and RETRIEVE in new)


async def test_the_original_is_kept_in_the_store_until_the_session_is_forgotten(protocol: Any) -> None:
    """A later request that no longer holds the result (the client cut its own history) still gets
    it back from the session's store; once the session is deleted, nothing is left to retrieve."""
    await protocol.start(strategy="cut_point", extra=OUTPUTS)
    log = pytest_log("test_checkout_total")
    session = {"X-Session-Id": "kept-1"}
    turns = [
        {"role": "user", "content": "Run the tests."},
        {
            "role": "assistant",
            "content": "Running.",
            "calls": [{"id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
        },
        {"role": "tool", "id": "toolu_1", "content": log},
    ]
    name = (await protocol.send(SYSTEM, turns, **session)).headers["X-Ctx-Session"]
    later = [{"role": "user", "content": f"What failed in {ref_of(log)}?"}]
    protocol.script_call(RETRIEVE, {"ref": ref_of(log), "query": "FAILED"}, ANSWER)
    assert (await protocol.send(SYSTEM, later, **session)).text == ANSWER
    assert "test_checkout_total FAILED" in protocol.tool_answers(protocol.forwarded())[-1]

    url = protocol.proxy.make_url(f"/admin/tenants/default/sessions/{name}")
    async with aiohttp.ClientSession() as http:
        async with http.delete(url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as resp:
            assert resp.status in (200, 204), await resp.text()
    protocol.script_call(RETRIEVE, {"ref": ref_of(log)}, ANSWER)
    await protocol.send(SYSTEM, later, **session)
    assert protocol.tool_answers(protocol.forwarded())[-1].startswith(
        f"No tool output of this conversation has ref {ref_of(log)}"
    )


async def test_a_window_too_small_for_keep_turns_keeps_only_the_newest_turn_whole(protocol: Any) -> None:
    """Two turns of ~2,150-token results take more than half an 8k window: each request masks
    every result but the newest turn's (keep_turns 2 would mask none at the second request), and
    it is masking, not a compaction, that keeps the prompt small."""
    await protocol.start(window=8_000, strategy="sliding_window", extra=OUTPUTS)
    for step in range(1, 4):
        reply = await protocol.send(SYSTEM, agent_turns(step))
        forwarded = protocol.forwarded()
        protocol.check_valid(forwarded)
        answers = protocol.tool_answers(forwarded)
        assert reply.headers.get("X-Ctx-Compacted") != "1"
        assert reply.headers["X-Ctx-Tool-Outputs"] == f"compressed=1 masked={step - 1}"
        assert all(a.startswith("[ctxproxy: the output of lookup(q=") for a in answers[:-1])
        assert "test_step_" in answers[-1] and not answers[-1].startswith("[ctxproxy:")
