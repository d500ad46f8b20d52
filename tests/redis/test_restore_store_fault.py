"""A store that fails to read the recall statistics costs only the restored page, never the
request: a real Redis whose ACL refuses reads of the ``recall`` keys (and only those) for a while."""

from __future__ import annotations

import secrets

import redis
from structlog.testing import capture_logs

from tests.conftest import MakeProxy, Upstream
from tests.recall.test_restore_http import FACTS, TENANT, ask, forwarded, history, recall
from tests.redis_server import RedisServer


def refuse_recall_reads(server: RedisServer, prefix: str) -> None:
    """Reads of ``{prefix}ctx:default:recall:…`` fail with NOPERM; every other key reads and
    writes as before (``recall`` is the only key family of a tenant that starts with ``r``)."""
    with redis.Redis.from_url(server.url) as raw:
        raw.execute_command(
            "ACL", "SETUSER", "default", "resetkeys", f"%R~{prefix}ctx:default:[^r]*", f"%R~{prefix}__store__:*", "%W~*"
        )


def allow_everything(server: RedisServer) -> None:
    with redis.Redis.from_url(server.url) as raw:
        raw.execute_command("ACL", "SETUSER", "default", "resetkeys", "allkeys")


async def test_failing_to_read_the_recall_statistics_costs_only_the_restoration(
    make_proxy: MakeProxy, own_redis: RedisServer, upstream: Upstream
) -> None:
    """Note 004's restored page (从文件系统恢复 Page，插入窗口) needs the recall statistics: when
    the store cannot read them, the request is forwarded with the Contents Page as archived and
    answered; the page comes back once the store reads again."""
    prefix = f"restore-{secrets.token_hex(3)}:"
    toml = f'backend = "redis"\nurl = "{own_redis.url}"\ntimeout = 0.5\nkey_prefix = "{prefix}"\n'
    proxy = await make_proxy({"default": TENANT}, proxy_toml=toml)
    upstream.fake.reply_json(tool_calls=[recall(2)])
    upstream.fake.reply_json("orders-stg.")
    assert (await ask(proxy, history(6)))[0] == "orders-stg."

    refuse_recall_reads(own_redis, prefix)
    try:
        with capture_logs() as logs:
            already = len(upstream.fake.chat_requests())
            answer, _ = await ask(proxy, history(7))
            sent = forwarded(upstream, already)
    finally:
        allow_everything(own_redis)
    assert answer == "echo: Question 7: anything else?"  # answered, by the fake's echo model
    (failed,) = [e for e in logs if e["event"] == "checkpoint.show_failed"]
    assert failed["error"].startswith("get failed for key 'ctx:default:recall:") and "NoPermission" in failed["error"]
    assert sent[1]["name"] == "contents_page" and "recalled" not in sent[1]["content"]  # as archived at turn 6
    assert all(FACTS[2] != m.get("content") for m in sent)  # not restored
    assert sent[2:] == history(7)[9:]  # pages 5, 6 and the question, raw: nothing else lost

    already = len(upstream.fake.chat_requests())
    await ask(proxy, history(8))
    back = forwarded(upstream, already)
    assert back[2:4] == history(8)[3:5]  # the store reads again: page 2 is restored
