"""Summarisers: an LLM one (the tenant's upstream) and a deterministic extractive one."""

from proxy.summarize.base import FILES_SECTION, SECTIONS, Flavour, Summarizer, SummaryResult, SummaryTask
from proxy.summarize.extractive import ExtractiveSummarizer
from proxy.summarize.llm import LLMSummarizer

__all__ = [
    "FILES_SECTION",
    "SECTIONS",
    "ExtractiveSummarizer",
    "Flavour",
    "LLMSummarizer",
    "Summarizer",
    "SummaryResult",
    "SummaryTask",
]
