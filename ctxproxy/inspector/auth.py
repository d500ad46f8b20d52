"""Who may look: a person who knows the admin key (``[admin] api_key``).

Two ways to show it: the login form, whose answer is a cookie holding a signed session token
(``issue_token``: an expiry and a random nonce, signed with HMAC-SHA256 under a secret derived
from the admin key, ``AdminSettings.derived_secret`` — never the key itself), or HTTP Basic
with the key as the password (any user name). The key is checked by ``AdminSettings.accepts``,
the same check the admin API makes; every comparison is constant-time. Changing the key ends
every session, since the secret follows it.

Each form that changes something (delete, logout) carries a CSRF token derived from the same
secret and the viewer's session token (or ``basic``), checked on the POST: another site can
make a browser send the cookie or the Basic credentials, but cannot read a page to learn it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final

from ctxproxy.config.models import AdminSettings

COOKIE: Final = "ctxproxy_ui"
COOKIE_PATH: Final = "/admin/ui"
LIFETIME: Final = 12 * 3600
_PURPOSE: Final = "ctxproxy inspector session v1"
_MAX_TOKEN: Final = 200


@dataclass(frozen=True)
class Viewer:
    """A request that showed the admin key; ``csrf`` is the token its forms must send back."""

    csrf: str
    by_cookie: bool


def _sign(secret: bytes, text: str) -> str:
    return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()


def issue_token(secret: bytes, now: float) -> str:
    """A session token: ``{expiry}.{nonce}.{signature}``."""
    body = f"{int(now) + LIFETIME}.{secrets.token_hex(16)}"
    return f"{body}.{_sign(secret, body)}"


def token_valid(secret: bytes, token: str, now: float) -> bool:
    """Whether ``token`` was issued under ``secret`` and has not expired."""
    parts = token.split(".") if len(token) <= _MAX_TOKEN and token.isascii() else []
    if len(parts) != 3 or not parts[0].isascii() or not parts[0].isdecimal():
        return False
    expected = _sign(secret, f"{parts[0]}.{parts[1]}")
    return hmac.compare_digest(parts[2].encode(), expected.encode()) and int(parts[0]) > now


def csrf_token(secret: bytes, basis: str) -> str:
    return _sign(secret, "csrf\0" + basis)


def csrf_valid(viewer: Viewer, given: str) -> bool:
    return hmac.compare_digest(given.encode(), viewer.csrf.encode())


def basic_password(authorization: str | None) -> str | None:
    """The password of an ``Authorization: Basic`` header, or None."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon else None


def session_secret(admin: AdminSettings) -> bytes | None:
    """What signs session and CSRF tokens; None while the admin key (and so the UI) is off."""
    return admin.derived_secret(_PURPOSE)


def viewer(admin: AdminSettings, cookie: str | None, authorization: str | None, now: float) -> Viewer | None:
    """The viewer a request's cookie or Basic credentials show, or None."""
    secret = session_secret(admin)
    if secret is None:
        return None
    if cookie and token_valid(secret, cookie, now):
        return Viewer(csrf_token(secret, cookie), by_cookie=True)
    password = basic_password(authorization)
    if password is not None and admin.accepts(password):
        return Viewer(csrf_token(secret, "basic"), by_cookie=False)
    return None
