"""The upstream session is shared by every tenant: it must not keep the cookies upstreams set.

aiohttp's default cookie jar stores a cookie set by a named host (not by an IP address), so the
fake upstream is reached as ``localhost`` here, as a real upstream is reached by its name.
"""

from __future__ import annotations

import aiohttp

from tests.conftest import MakeProxy, Upstream

TENANT = '[upstream]\nbase_url = "{base}"\n'
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def test_a_cookie_set_for_one_tenant_is_not_sent_for_another_or_later(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    base = upstream.base_url.replace("127.0.0.1", "localhost")
    assert "localhost" in base
    proxy = await make_proxy({"default": TENANT.format(base=base), "acme": TENANT.format(base=base)})
    upstream.fake.reply_json(headers={"Set-Cookie": "upstream_session=tenant-default-secret; Path=/"})
    upstream.fake.reply_json()
    async with aiohttp.ClientSession() as client:
        for path, cookie in (("/v1", None), ("/t/acme/v1", None), ("/v1", "mine=1")):
            headers = {"Cookie": cookie} if cookie else {}
            async with client.post(proxy.url(path + "/chat/completions"), json=BODY, headers=headers) as answer:
                assert answer.status == 200, await answer.text()
            client.cookie_jar.clear()
    first, other_tenant, later = upstream.fake.chat_requests()
    assert "Cookie" not in first.headers
    assert "Cookie" not in other_tenant.headers
    assert later.headers.getall("Cookie") == ["mine=1"]  # the client's own, and only it
