"""A request's own id is ``uuid.uuid4().hex``, made without the ``UUID`` object."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.server.middleware import uuid4_hex


@given(st.binary(min_size=16, max_size=16))
def test_it_is_the_version_4_uuid_of_its_random_bytes(random: bytes) -> None:
    assert uuid4_hex(random) == uuid.UUID(bytes=random, version=4).hex
