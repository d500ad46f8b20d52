"""The OpenAI Agents SDK's default model (the Responses API) through ctxproxy: an agent whose tool
the model calls runs it and gets its answer, JSON and streamed, with the items ctxproxy forwards
exactly as the SDK sent them."""

from __future__ import annotations

import orjson
from agents import Agent, FunctionTool, OpenAIResponsesModel, RunConfig, Runner, function_tool

from tests.responses.conftest import MODEL, ResponsesRig


def lookup_tool(seen: list[str]) -> FunctionTool:
    """The agent's tool; each query it is called with is added to ``seen``."""

    def lookup(q: str) -> str:
        """Look something up in the bakery's records.

        Args:
            q: what to look for.
        """
        seen.append(q)
        return f"Record for {q}: 12 sourdough loaves, pickup at 8:30."

    return function_tool(lookup)


def agent(rig: ResponsesRig, proxy: object, seen: list[str] | None = None) -> Agent:
    model = OpenAIResponsesModel(model=MODEL, openai_client=rig.client(proxy))  # type: ignore[arg-type]
    tools = [lookup_tool(seen if seen is not None else [])]
    return Agent(name="baker", instructions="You help a small bakery.", tools=tools, model=model)


async def test_an_agent_runs_its_tool_through_ctxproxy(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    seen: list[str] = []
    result = await Runner.run(agent(rig, proxy, seen), "What did order 3 want? CALL_TOOL:lookup",
                              run_config=RunConfig(tracing_disabled=True))  # fmt: skip
    assert seen == ["x"]  # the fake model's arguments, {"q": "x"}
    assert result.final_output == "echo: What did order 3 want? CALL_TOOL:lookup"
    first, second = (orjson.loads(r.body) for r in rig.fake.response_requests())
    assert first["instructions"] == "You help a small bakery." and first["tools"][0]["name"] == "lookup"
    kinds = [item.get("type", "message") for item in second["input"]]
    assert kinds[-2:] == ["function_call", "function_call_output"]
    assert "12 sourdough loaves" in second["input"][-1]["output"]


async def test_a_streamed_agent_run_reads_the_relayed_events(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    run = Runner.run_streamed(agent(rig, proxy), "Say hello.", run_config=RunConfig(tracing_disabled=True))
    kinds = [event.type async for event in run.stream_events()]
    assert "raw_response_event" in kinds
    assert run.final_output == "echo: Say hello."
