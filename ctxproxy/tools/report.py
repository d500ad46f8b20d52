"""What a proxy-tool loop tells the client about itself, whatever its wire protocol:
``X-Ctx-Tool-Rounds: n`` on an answer for which ctxproxy answered ``n`` rounds of its own tools'
calls (none when it answered none).

Only an answer whose headers go out after the loop ended can carry it: a JSON answer. A stream's
headers are sent before its first round is known to call anything, so a streamed answer never
carries it; the rounds are in the ``tools.loop_done`` log line and the metrics instead.
"""

from __future__ import annotations

from collections.abc import Mapping

TOOL_ROUNDS_HEADER = "X-Ctx-Tool-Rounds"


def with_tool_rounds(headers: Mapping[str, str], rounds: int) -> Mapping[str, str]:
    """``headers`` (an answer's ``X-Ctx-*``), with ``X-Ctx-Tool-Rounds`` when ``rounds`` were answered."""
    return {**headers, TOOL_ROUNDS_HEADER: str(rounds)} if rounds else headers
