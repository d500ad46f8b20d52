"""The recorder against a real Store: records, histories and tenant buckets written in one batch,
bounded, and a forgotten session's pending lines never written."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import TempPathFactory

from ctxproxy.session import SessionKey
from ctxproxy.session.recorder import SessionRecorder
from ctxproxy.session.records import MAX_HISTORY, Observation
from ctxproxy.session.tenant_stats import bucket_of
from ctxproxy.store import Store, open_store
from ctxproxy.store.keys import session_history_key, session_record_key, tenant_stats_key

A = SessionKey("acme", "chat-a", "header")
B = SessionKey("acme", "chat-b", "header")


def seen(at: float, before: int = 100, after: int = 60, **kw: object) -> Observation:
    return Observation(at, 4, before, "ab", "m", forwarded=after, **kw)  # type: ignore[arg-type]


async def test_one_flush_writes_records_histories_and_buckets(store: Store) -> None:
    recorder = SessionRecorder(store)
    recorder.observe(A, seen(1000.0, compacted=True, user="alice", billed=(100, 80), nano_usd=(250, 200)), ttl=3600)
    recorder.observe(A, seen(1001.0, retried=True, billed=(30, 60)), ttl=3600)
    recorder.observe(B, seen(1400.0, before=50, after=50), ttl=3600)
    await recorder.flush()
    record = await store.get(session_record_key(A))
    assert record["requests"] == 2 and record["users"] == ["alice"] and record["last_seen"] == 1001.0
    history = await store.get(session_history_key(A))
    assert [(e["compacted"], e["retried"]) for e in history] == [(True, False), (False, True)]
    first = await store.get(tenant_stats_key("acme", bucket_of(1000.0)))
    money = {"billed_before": 130, "billed_after": 140, "nano_usd_before": 250, "nano_usd_after": 200}
    assert first == {"requests": 2, "before": 200, "after": 120, "compactions": 1, "retries": 1, **money}
    second = await store.get(tenant_stats_key("acme", bucket_of(1400.0)))
    nothing = {"billed_before": 0, "billed_after": 0, "nano_usd_before": 0, "nano_usd_after": 0}
    assert second == {"requests": 1, "before": 50, "after": 50, "compactions": 0, "retries": 0, **nothing}
    # A second flush adds to what is there.
    recorder.observe(A, seen(1002.0), ttl=3600)
    await recorder.flush()
    assert (await store.get(tenant_stats_key("acme", bucket_of(1000.0))))["requests"] == 3
    assert len(await store.get(session_history_key(A))) == 3


async def test_the_history_stays_bounded_across_batches(store: Store) -> None:
    recorder = SessionRecorder(store)
    for batch in range(3):
        for i in range(150):
            recorder.observe(A, seen(batch * 1000 + i), ttl=3600)
        await recorder.flush()
    history = await store.get(session_history_key(A))
    assert len(history) == MAX_HISTORY and history[-1]["at"] == 2149 and history[0]["at"] == 1100
    assert (await store.get(session_record_key(A)))["requests"] == 450


async def test_forget_drops_pending_lines_and_deletes(store: Store) -> None:
    recorder = SessionRecorder(store)
    recorder.observe(A, seen(1.0), ttl=3600)
    await recorder.flush()
    recorder.observe(A, seen(2.0), ttl=3600)
    recorder.observe(B, seen(2.0), ttl=3600)
    assert await recorder.forget(A) is True
    await recorder.flush()
    assert await store.get(session_record_key(A)) is None and await store.get(session_history_key(A)) is None
    assert await store.get(session_record_key(B)) is not None
    assert await recorder.forget(A) is False


SESSIONS = st.sampled_from([A, B, SessionKey("other", "chat-a", "derived")])
NOTED = st.lists(
    st.one_of(
        st.tuples(SESSIONS, st.integers(0, 900), st.integers(0, 500), st.booleans()),  # at, tokens, compacted
        st.just("flush"),
        st.just("forget"),
    ),
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(noted=NOTED)
def test_sorting_in_batches_writes_what_sorting_each_request_writes(
    tmp_path_factory: TempPathFactory, noted: list[Any]
) -> None:
    """``observe`` keeps requests as they come and sorts them ``BATCH`` at a time: the records,
    histories and buckets written are those of sorting each request as it comes (a batch of 1)."""

    async def run(batch: int) -> dict[str, Any]:
        store = open_store("diskcache", tmp_path_factory.mktemp("store"))
        recorder = SessionRecorder(store, batch=batch)
        for step in noted:
            if step == "flush":
                await recorder.flush()
            elif step == "forget":
                await recorder.forget(A)
            else:
                key, at, tokens, compacted = step
                recorder.observe(key, seen(1000.0 + at, tokens, tokens // 2, compacted=compacted), ttl=3600)
        await recorder.flush()
        keys = [
            f(k)
            for k in (A, B, SessionKey("other", "chat-a", "derived"))
            for f in (session_record_key, session_history_key)
        ]
        keys += [tenant_stats_key(t, bucket_of(1000.0 + at)) for t in ("acme", "other") for at in (0, 900)]
        written = {key: await store.get(key) for key in keys}
        await store.close()
        return written

    assert asyncio.run(run(7)) == asyncio.run(run(1))
