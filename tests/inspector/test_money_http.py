"""The overview's money, against what really went through the proxy: with a price for the model,
a tenant's "USD saved" is what ``/metrics``' ``ctxproxy_saved_usd`` says (the same cache-priced
figures, summed in the store's buckets and in the process), its "cost saved" has the same sign,
and a tenant without a price shows no dollars (nor, forwarding as sent, a cost saved)."""

from __future__ import annotations

import aiohttp

from ctxproxy.services import RECORDER
from tests.conftest import MakeProxy, Upstream
from tests.inspector.drive import BASIC, TENANT, converse, get, start
from tests.inspector.test_pages_http import cells
from tests.metrics.scrape import scrape

PRICED = TENANT + '[models."*"]\ninput_price_per_mtok = 2.0\n'
UNPRICED = '[upstream]\nbase_url = "{upstream}"\n[memory]\nenabled = false\n'  # strategy none: forwards as sent


def dollars(cell: str) -> float:
    sign = -1 if cell.startswith("−") else 1
    return sign * float(cell.lstrip("−").lstrip("$").replace(",", ""))


async def test_overview_money_is_what_metrics_say(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy, {"default": PRICED, "plain": UNPRICED})
    _, seen = await converse(proxy, after=3)
    async with aiohttp.ClientSession() as http:
        messages = [{"role": "user", "content": "hello"}]
        for answer in ("hi", "fine"):  # the second request repeats the first: cost saved 0.0%
            async with http.post(proxy.url("/t/plain/v1/chat/completions"), json={"model": "m", "messages": messages}):
                messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "and?"}]
    await proxy.server.app[RECORDER].flush()
    assert any("X-Ctx-Compacted" in h for h in seen)
    metrics = await scrape(proxy.url("/metrics"))
    saved = metrics.total("ctxproxy_saved_usd", tenant="default")
    assert metrics.total("ctxproxy_input_usd_total", tenant="default", stage="after") > 0
    _, page, _ = await get(proxy, "/admin/ui/", headers=BASIC)
    for row in cells(page, "usage-default"):  # the last hour, the last day
        assert abs(dollars(row[6]) - saved) <= 0.00005 + 1e-9, (row, saved)
        cost = float(row[5].rstrip("%"))
        assert saved == 0 or (cost < 0) == (saved < 0), (row, saved)
    assert [row[5:7] for row in cells(page, "usage-plain")] == [["0.0%", "—"], ["0.0%", "—"]]  # no price: no dollars
