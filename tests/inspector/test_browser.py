"""The inspector in a real headless Chromium (Debian's, driven by Playwright; ``browser`` finds
it): a page asked for without credentials is a Basic challenge the browser answers with the key
it was given; sign in with the login form, the overview names the tenant, the session page's chart marks
the compaction the conversation really went through, a memory search, and a delete after which
the session is gone. With ``CTXPROXY_SCREENSHOT=<path>`` it also saves the session page as a PNG
(``docs/inspector.png`` is made so)."""

from __future__ import annotations

import os

from ctxproxy.services import STORE
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import checkpoints_key, session_record_key
from tests.conftest import MakeProxy, Upstream
from tests.inspector.browser import require_chromium
from tests.inspector.drive import KEY, converse, start

LONG_FACTS = tuple(
    f"{fact} "
    + " ".join(f"Detail {n}: the {topic} notes say it was agreed in the meeting with the whole team." for n in range(6))
    for fact, topic in [
        ("My locker code is 4417, please remember it.", "locker"),
        ("We moved the standup to 9:30 on Tuesdays.", "standup"),
        ("The staging database is called orders-stg.", "database"),
        ("Our on-call rotation starts with Priya.", "rotation"),
        ("The launch is planned for the 14th of March.", "launch"),
    ]
)


async def test_the_inspector_in_a_real_browser(make_proxy: MakeProxy, upstream: Upstream) -> None:
    chromium = require_chromium()
    from playwright.async_api import async_playwright

    proxy = await start(make_proxy)
    session, seen = await converse(proxy, user="alice", recall=upstream.fake, facts=LONG_FACTS, after=10)
    other, others = await converse(proxy, user="bob", session="chat-bob")
    compacted = [i + 1 for i, h in enumerate(seen) if "X-Ctx-Compacted" in h]
    assert compacted

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            # A browser given the key for HTTP Basic is asked for it, and is in at once.
            basic = await browser.new_context(http_credentials={"username": "admin", "password": KEY})
            answered = await (await basic.new_page()).goto(proxy.url("/admin/ui/"))
            assert answered is not None and answered.status == 200
            await basic.close()

            # The login form (what a person who cancels the browser's prompt sees too; Playwright
            # cannot cancel a prompt, so the form is opened by its own address).
            page = await browser.new_page(viewport={"width": 1100, "height": 900})
            await page.goto(proxy.url("/admin/ui/login"))
            await page.fill("input[name=key]", "wrong")
            await page.click("button[type=submit]")
            assert await page.locator(".error").inner_text() == "That is not the admin key."
            await page.fill("input[name=key]", KEY)
            await page.click("button[type=submit]")
            await page.wait_for_url(proxy.url("/admin/ui/"))
            [cookie] = await page.context.cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/admin/ui"
            assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it

            # The overview names the tenant and counts its requests.
            tenant = page.locator("[data-tenant=default]")
            assert await tenant.locator("h2").inner_text() == "Tenant default"
            hour = await tenant.locator("tbody tr").first.locator("td").all_inner_texts()
            assert hour[1] == str(len(seen) + len(others))
            assert await tenant.locator("svg.chart rect.bar").count() == 48

            # The sessions list, searched by user, leads to the session page.
            await tenant.locator("h2 a").click()
            await page.fill("input[name=q]", "alice")
            await page.press("input[name=q]", "Enter")
            await page.wait_for_load_state()
            links = page.locator("a.session")
            assert await links.all_inner_texts() == [session]
            await links.first.click()
            await page.wait_for_load_state()
            assert await page.locator("h1").inner_text() == f"Session {session}"

            # The chart: both lines, and a visible compaction mark on each request that compacted.
            chart = page.locator("svg.chart")
            marks = chart.locator("g.marker.compaction")
            assert await marks.count() == len(compacted)
            titles = [await marks.nth(i).locator("title").text_content() for i in range(len(compacted))]
            assert [t.split(" ")[0] for t in titles] == [f"#{n}" for n in compacted]
            box, mark = await chart.bounding_box(), await marks.first.bounding_box()
            assert box is not None and mark is not None and mark["width"] > 0 and mark["height"] > 0
            assert box["x"] <= mark["x"] <= box["x"] + box["width"]
            assert await chart.locator("polyline.series").count() == 2
            assert "## Contents Page" in await page.locator("#contents-page").inner_text()

            # A memory search.
            await page.fill("input[name=mq]", "locker code")
            await page.press("input[name=mq]", "Enter")
            await page.wait_for_load_state()
            first_hit = await page.locator("#memories tbody tr").first.locator("td").first.inner_text()
            assert "4417" in first_hit

            screenshot = os.environ.get("CTXPROXY_SCREENSHOT")
            if screenshot:
                await page.goto(proxy.url(f"/admin/ui/tenants/default/sessions/derived/{session}"))
                await page.set_viewport_size({"width": 1100, "height": 1250})
                await page.screenshot(path=screenshot)

            # Delete: back on the list, the session is gone; the other one stays.
            await page.click("#delete button")
            await page.wait_for_url(proxy.url("/admin/ui/tenants/default/sessions"))
            assert await page.locator("a.session").all_inner_texts() == [other]
            response = await page.goto(proxy.url(f"/admin/ui/tenants/default/sessions/derived/{session}"))
            assert response is not None and response.status == 404
        finally:
            await browser.close()
    store = proxy.server.app[STORE]
    key = SessionKey("default", session, "derived")
    assert await store.get(session_record_key(key)) is None and await store.get(checkpoints_key(key)) is None
