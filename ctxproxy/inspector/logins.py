"""The inspector's sign-ins, kept in the store so that signing out ends one.

A login-form cookie is honoured only while its sign-in is recorded (``inspector_login_key``: a
hash of the session token, never the token), which lasts until the token expires. Signing out
deletes the record, so the old cookie no longer opens a page even if it was copied; a sign-in
recorded in a shared store is seen by every replica. Changing the admin key ends every sign-in
anyway (the tokens' signature follows the key). HTTP Basic has no sign-in to end: the browser
sends the key with each request until it is closed.
"""

from __future__ import annotations

from ctxproxy.store import Store
from ctxproxy.store.keys import inspector_login_key

__all__ = ["end_login", "login_open", "open_login"]


async def open_login(store: Store, token: str, lifetime: float) -> None:
    await store.put(inspector_login_key(token), {"signed_in": True}, ttl=lifetime)


async def login_open(store: Store, token: str) -> bool:
    return await store.get(inspector_login_key(token)) is not None


async def end_login(store: Store, token: str) -> None:
    await store.delete(inspector_login_key(token))
