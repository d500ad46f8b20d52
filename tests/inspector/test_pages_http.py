"""The inspector's pages over HTTP, against what really went through the proxy: the overview's
numbers are the sums of the responses' ``X-Ctx-*`` headers, the session page's chart marks the
requests that compacted or were retried, and nothing a client sent is ever markup."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

import aiohttp
import pytest

from ctxproxy.services import RECORDER
from tests.conftest import MakeProxy, Upstream
from tests.inspector.drive import BASIC, EVIL, TENANT, converse, get, start
from tests.metrics.scrape import parse
from tests.recovery.test_overflow_retry import OVERFLOW, history
from tests.recovery.test_overflow_retry import TENANT as PLAIN_TENANT

SVG = "{http://www.w3.org/2000/svg}"


def total(headers: Sequence[Mapping[str, str]], name: str) -> int:
    return sum(int(h[name]) for h in headers)


def cells(page: str, table_id: str) -> list[list[str]]:
    body = page[page.index(f'id="{table_id}"') :]
    body = body[: body.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def chart(page: str) -> ET.Element:
    svg = page[page.index('<svg xmlns="http://www.w3.org/2000/svg"') :]
    return ET.fromstring(svg[: svg.index("</svg>") + len("</svg>")])


async def test_overview_numbers_are_the_sums_of_the_headers(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy, {"default": TENANT, "zeta": PLAIN_TENANT.format(window=100_000, strategy="none")})
    _, one = await converse(proxy, user="alice")
    _, two = await converse(proxy, session="chat-2")
    seen = [*one, *two]
    status, page, _ = await get(proxy, "/admin/ui/", headers=BASIC)
    assert status == 200
    rows = cells(page, "usage-default")
    expected = [
        str(len(seen)),
        f"{total(seen, 'X-Ctx-Tokens-Before'):,}",
        f"{total(seen, 'X-Ctx-Tokens-After'):,}",
    ]
    assert rows[0][1:4] == expected and rows[1][1:4] == expected
    assert rows[0][7] == str(sum("X-Ctx-Compacted" in h for h in seen)) and rows[0][8] == "0"
    assert "strategy paged · mode inline · 2 sessions" in page
    assert "strategy none · mode inline · 0 sessions" in page
    assert cells(page, "usage-zeta")[1][1] == "0"


async def test_sessions_list_newest_first_searchable_and_paged(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy)
    async with aiohttp.ClientSession() as http:
        for n in range(55):
            body = {"model": "m", "messages": [{"role": "user", "content": f"hello {n}"}]}
            headers = {"X-Session-Id": f"chat-{n:02d}", "X-Ctx-User": "bob" if n == 7 else f"user{n}"}
            async with http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
                assert resp.status == 200
    await proxy.server.app[RECORDER].flush()
    status, first, _ = await get(proxy, "/admin/ui/tenants/default/sessions", headers=BASIC)
    listed = [row[0] for row in cells(first, "sessions")]
    assert status == 200 and len(listed) == 50 and listed[:2] == ["chat-54", "chat-53"]
    assert "55 sessions" in first and 'href="/admin/ui/tenants/default/sessions?page=2"' in first
    _, second, _ = await get(proxy, "/admin/ui/tenants/default/sessions?page=2", headers=BASIC)
    assert [row[0] for row in cells(second, "sessions")] == ["chat-04", "chat-03", "chat-02", "chat-01", "chat-00"]
    _, by_user, _ = await get(proxy, "/admin/ui/tenants/default/sessions?q=BOB", headers=BASIC)
    assert [row[0] for row in cells(by_user, "sessions")] == ["chat-07"]
    _, by_key, _ = await get(proxy, "/admin/ui/tenants/default/sessions?q=chat-1", headers=BASIC)
    assert sorted(row[0] for row in cells(by_key, "sessions")) == [f"chat-{n}" for n in range(10, 20)]
    _, none, _ = await get(proxy, "/admin/ui/tenants/default/sessions?q=zzz", headers=BASIC)
    assert "No sessions." in none
    for bad in ("page=0", "page=x", "page=%C2%B2", "q=" + "x" * 201):
        status, _, _ = await get(proxy, f"/admin/ui/tenants/default/sessions?{bad}", headers=BASIC)
        assert status == 400, bad
    status, _, _ = await get(proxy, "/admin/ui/tenants/nope/sessions", headers=BASIC)
    assert status == 404


async def test_the_session_page_shows_its_chart_checkpoints_pages_and_memories(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await start(make_proxy)
    session, seen = await converse(proxy, user="alice", recall=upstream.fake)
    status, page, _ = await get(proxy, f"/admin/ui/tenants/default/sessions/derived/{session}", headers=BASIC)
    assert status == 200
    svg = chart(page)
    after = svg.find(f".//{SVG}polyline[@class='series after']").get("points").split()
    before = svg.find(f".//{SVG}polyline[@class='series before']").get("points").split()
    assert len(after) == len(before) == len(seen)
    marks = [g for g in svg.iter(f"{SVG}g") if g.get("class", "").startswith("marker compaction")]
    compacted = [i for i, h in enumerate(seen) if "X-Ctx-Compacted" in h]
    assert compacted and [m.find(f"{SVG}title").text.split(" ")[0] for m in marks] == [f"#{i + 1}" for i in compacted]
    # Each mark says why it ran: this paged conversation's strategy planned them.
    assert {m.get("class") for m in marks} == {"marker compaction planned"}
    assert all("planned compaction" in m.find(f"{SVG}title").text for m in marks)
    facts = dict((row[0], row[1]) for row in cells(page, "facts"))
    assert facts["protocol"] == "OpenAI chat completions (POST /v1/chat/completions)"
    assert facts["compactions (requests charted)"] == f"{len(compacted)} planned"
    assert f"All its {len(seen)} requests." in page
    assert not svg.findall(f".//{SVG}path[@class='marker retry']")
    assert page.count('class="card checkpoint"') >= 1 and "## Contents Page" in page
    pages = cells(page, "pages")
    assert pages[0][0] == "1" and pages[0][4] == "1"  # page 1 was recalled once
    assert "alice" in cells(page, "facts")[-1][1]
    memories = cells(page, "memories")
    assert memories and all(row[3] == "alice" for row in memories)
    assert all(len(row) == 5 for row in memories)  # no search, no score column
    _, found, _ = await get(
        proxy, f"/admin/ui/tenants/default/sessions/derived/{session}?mq=locker+code", headers=BASIC
    )
    hits = cells(found, "memories")
    assert hits and "4417" in hits[0][0] and hits[0][5] != ""
    _, nothing, _ = await get(proxy, f"/admin/ui/tenants/default/sessions/derived/{session}?mq=zebra", headers=BASIC)
    assert "No memory cards match." in nothing
    for path in ("derived/s_000000000000000000000000", f"header/{session}", f"sideways/{session}"):
        status, _, _ = await get(proxy, f"/admin/ui/tenants/default/sessions/{path}", headers=BASIC)
        assert status == 404, path


async def test_a_retry_is_marked(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy, {"default": PLAIN_TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_error(400, OVERFLOW)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": history(30)}) as resp:
            assert resp.status == 200 and resp.headers["X-Ctx-Retried"] == "1"
            session = resp.headers["X-Ctx-Session"]
    await proxy.server.app[RECORDER].flush()
    _, page, _ = await get(proxy, f"/admin/ui/tenants/default/sessions/derived/{session}", headers=BASIC)
    retries = chart(page).findall(f".//{SVG}path[@class='marker retry']")
    assert [r.find(f"{SVG}title").text.split(" ")[0] for r in retries] == ["#1"]
    [mark] = chart(page).findall(f".//{SVG}g[@class='marker compaction recovery']")  # compacted to retry
    assert "recovery compaction" in mark.find(f"{SVG}title").text
    assert dict((row[0], row[1]) for row in cells(page, "facts"))["compactions (requests charted)"] == "1 recovery"
    _, overview, _ = await get(proxy, "/admin/ui/", headers=BASIC)
    assert ">1</td></tr>" in overview  # the retries column of the last hour


@pytest.mark.parametrize("where", ["user", "message"])
async def test_what_a_client_sent_is_never_markup(make_proxy: MakeProxy, upstream: Upstream, where: str) -> None:
    proxy = await start(make_proxy)
    user = EVIL if where == "user" else "alice"
    facts = (
        [f"Remember {EVIL} as the password hint.", "The staging database is called orders-stg."]
        if where == "message"
        else None
    )
    session, _ = await converse(proxy, user=user, **({"facts": facts} if facts else {}))
    pages = [
        await get(proxy, "/admin/ui/tenants/default/sessions", headers=BASIC),
        await get(proxy, f"/admin/ui/tenants/default/sessions?q={EVIL}", headers=BASIC),
        await get(proxy, f"/admin/ui/tenants/default/sessions/derived/{session}", headers=BASIC),
        await get(proxy, f"/admin/ui/tenants/default/sessions/derived/{session}?mq={EVIL}", headers=BASIC),
    ]
    escaped = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    for status, text, _ in pages:
        assert status == 200
        assert "<script" not in text.lower()
    assert escaped in pages[2][1]


async def test_a_request_the_upstream_never_got_counts_as_a_request_without_tokens(make_proxy: MakeProxy) -> None:
    """The upstream down (a 502 of ctxproxy's own): the overview counts the request, and no tokens
    sent or forwarded — as ``ctxproxy_prompt_tokens`` does not count them either."""
    down = '[upstream]\nbase_url = "http://127.0.0.1:9/v1"\nconnect_timeout = 2\n'
    proxy = await start(make_proxy, {"default": down})
    async with aiohttp.ClientSession() as http:
        body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 50}]}
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            assert resp.status == 502
        async with http.get(proxy.url("/metrics")) as resp:
            assert parse(await resp.text()).total("ctxproxy_prompt_tokens_total") == 0
    await proxy.server.app[RECORDER].flush()
    _, page, _ = await get(proxy, "/admin/ui/", headers=BASIC)
    hour = cells(page, "usage-default")[0]
    assert hour[1:4] == ["1", "0", "0"]
    assert "both only for requests that reached the upstream" in page  # the columns say what they count
    _, listed, _ = await get(proxy, "/admin/ui/tenants/default/sessions", headers=BASIC)
    [row] = cells(listed, "sessions")
    assert row[1] == "—" and "— when none did" in listed  # no user named, and the page says what the column is
