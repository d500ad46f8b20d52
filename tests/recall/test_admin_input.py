"""Numbers the admin API reads (``?limit=``, a page number) are checked: anything but 1-10 ASCII
digits in range is a 400 that names the parameter and says what to send — never a 500 — and
the proxy keeps serving."""

from __future__ import annotations

import aiohttp
import pytest

from tests.conftest import MakeProxy, Proxy
from tests.recall.paged import PAGED_TENANT as PAGED
from tests.recall.paged import paged_history as history
from tests.recall.test_admin_api import ADMIN, KEY
from tests.recall.test_memory_http import send

BAD_NUMBERS = [
    "%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "%EF%BC%95",  # a full-width "5": int() would read it
    "9" * 5000,  # longer than int() converts
    "0",
    "-1",
    "1.5",
    "+5",
    "%205",
    "5%0A",
    "abc",
]


async def get(proxy: Proxy, path: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http:
        resp = await http.get(proxy.url(path), headers=KEY)
        return resp.status, await resp.json()


def assert_bad(status: int, body: dict[str, object], param: str, says: str) -> None:
    error = body["error"]
    assert isinstance(error, dict)
    assert status == 400, error
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert error["param"] == param and says in str(error["message"])


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: v[:12])
async def test_a_bad_limit_is_a_400(make_proxy: MakeProxy, value: str) -> None:
    proxy = await make_proxy(proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    for path in ("/admin/tenants/default/sessions", "/admin/tenants/default/users/alice/memories"):
        status, body = await get(proxy, f"{path}?limit={value}")
        assert_bad(status, body, "limit", "limit must be an integer from 1 to 1000")
        status, body = await get(proxy, f"{path}?q=orders&limit={value}")
        assert_bad(status, body, "limit", "limit must be an integer from 1 to 1000")


async def test_limits_in_range_are_served(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    for value in ("1", "1000", "0050"):
        status, body = await get(proxy, f"/admin/tenants/default/sessions?limit={value}")
        assert status == 200 and body["object"] == "list"
    status, body = await get(proxy, "/admin/tenants/default/sessions?limit=1001")
    assert_bad(status, body, "limit", "got '1001'")


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: v[:12])
async def test_a_bad_page_number_is_a_400(make_proxy: MakeProxy, value: str) -> None:
    proxy = await make_proxy({"default": PAGED}, proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    session = (await send(proxy, history())).headers["X-Ctx-Session"]  # a session with archived pages
    status, body = await get(proxy, f"/admin/tenants/default/sessions/{session}/pages/{value}")
    assert_bad(status, body, "page", "The page number must be an integer from 1 to")
    # and the proxy keeps serving: the same session's page 2, and a chat request
    status, page = await get(proxy, f"/admin/tenants/default/sessions/{session}/pages/2")
    assert status == 200 and page["page"] == 2
    assert (await send(proxy, history())).status == 200
