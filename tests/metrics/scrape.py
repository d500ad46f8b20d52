"""Reading ``GET /metrics`` as Prometheus does: the text format, parsed by ``prometheus_client``'s
own parser, into samples a test sums by name and labels."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Scrape:
    samples: list[Sample]

    def total(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        return sum(s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items())

    def label_values(self, name: str, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}


def parse(text: str) -> Scrape:
    return Scrape(
        [
            Sample(sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]
    )


async def scrape(url: str, headers: dict[str, str] | None = None) -> Scrape:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers or {}) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.content_type == "text/plain"
        return parse(await resp.text())
