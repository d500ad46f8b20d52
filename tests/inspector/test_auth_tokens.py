"""Session tokens, CSRF tokens and Basic credentials, without a server."""

from __future__ import annotations

import base64

import pytest

from ctxproxy.config.models import AdminSettings
from ctxproxy.inspector.auth import LIFETIME, basic_password, csrf_valid, issue_token, token_valid, viewer

ADMIN = AdminSettings(api_key="s3cret")
SECRET = ADMIN.derived_secret("test")
assert SECRET is not None


def test_a_token_is_valid_until_it_expires_and_only_under_its_secret() -> None:
    token = issue_token(SECRET, 1000.0)
    assert "s3cret" not in token
    assert token_valid(SECRET, token, 1000.0) and token_valid(SECRET, token, 1000.0 + LIFETIME - 1)
    assert not token_valid(SECRET, token, 1000.0 + LIFETIME)
    other = AdminSettings(api_key="other").derived_secret("test")
    assert other is not None and not token_valid(other, token, 1000.0)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t[:-1] + ("0" if t[-1] != "0" else "1"),  # signature
        lambda t: str(int(t.split(".")[0]) + 9999) + t[t.index(".") :],  # expiry pushed later
        lambda t: t + ".x",
        lambda t: "",
        lambda t: "x" * 500,
        lambda t: "１２３." + t.split(".", 1)[1],  # non-ASCII digits
        lambda t: t.replace(".", "\udcff", 1),
    ],
)
def test_a_tampered_token_is_refused(mutate) -> None:
    assert not token_valid(SECRET, mutate(issue_token(SECRET, 1000.0)), 1000.0)


def test_basic_credentials() -> None:
    def header(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert basic_password(header("admin:s3cret")) == "s3cret"
    assert basic_password(header(":pa:ss")) == "pa:ss"
    assert basic_password(header("nocolon")) is None
    assert basic_password("Basic !!!") is None and basic_password("Bearer s3cret") is None
    assert basic_password(None) is None and basic_password("Basic " + base64.b64encode(b"\xff:\xfe").decode()) is None


def test_viewer_by_cookie_or_basic_and_their_csrf_tokens_differ() -> None:
    secret = AdminSettings(api_key="s3cret").derived_secret("ctxproxy inspector session v1")
    assert secret is not None
    token = issue_token(secret, 1000.0)
    by_cookie = viewer(ADMIN, token, None, 1000.0)
    basic = viewer(ADMIN, None, "Basic " + base64.b64encode(b"x:s3cret").decode(), 1000.0)
    assert by_cookie is not None and by_cookie.by_cookie and basic is not None and not basic.by_cookie
    assert by_cookie.csrf != basic.csrf
    assert csrf_valid(by_cookie, by_cookie.csrf) and not csrf_valid(by_cookie, basic.csrf)
    other = viewer(ADMIN, issue_token(secret, 1000.0), None, 1000.0)
    assert other is not None and other.csrf != by_cookie.csrf  # bound to the session token
    assert viewer(ADMIN, None, "Basic " + base64.b64encode(b"x:wrong").decode(), 1000.0) is None
    assert viewer(AdminSettings(), token, "Basic " + base64.b64encode(b"x:").decode(), 1000.0) is None
