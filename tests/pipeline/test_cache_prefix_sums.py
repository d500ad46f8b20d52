"""The cache prefix's token sums read the shared messages' counts from the shorter end of the
prompt (``Sent.leading``): they must be what summing the shared counts gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.pipeline.cache_prefix import Sent


@given(st.lists(st.integers(0, 10**6), max_size=60), st.data())
def test_the_leading_counts_sum_as_a_plain_sum_does(tokens: list[int], data: st.DataObject) -> None:
    sent = Sent([], [], tokens, [], 0, sum(tokens))
    k = data.draw(st.integers(0, len(tokens)))
    assert sent.leading(k) == sum(tokens[:k])
