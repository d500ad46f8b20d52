"""``sample_digest``: a summariser that says how many messages it was given and what the first
one asked. A message asking it to fail makes it raise (ctxproxy falls back to its own)."""

from __future__ import annotations

from ctxproxy.summarize.base import SummaryResult, SummaryTask

FAIL = "please make the sample digest fail"


class DigestSummarizer:
    name = "sample_digest"

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        texts = [m.get("content") for m in task.messages]
        if any(isinstance(text, str) and FAIL in text for text in texts):
            raise RuntimeError(f"sample digest refused: {FAIL}")
        first = next((text for text in texts if isinstance(text, str)), "")
        return SummaryResult(f"### Key facts\n- sample digest of {len(texts)} messages; first: {first[:40]}", self.name)
