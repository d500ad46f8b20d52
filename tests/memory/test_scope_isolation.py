"""Scopes: tenants and users never see each other's memories — not even through a session
they share; the write rule; the keys."""

from __future__ import annotations

import orjson
import pytest

from ctxproxy.memory.cards import MemoryCard, card_id, page_doc
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.store import Store
from ctxproxy.store.keys import layer_version_key, user_layer_key, user_sessions_prefix


def card(content: str, type_: str = "fact", now: float = 1.0) -> MemoryCard:
    return MemoryCard(card_id(content), content, type_, (), now, "src")  # type: ignore[arg-type]


SECRET = "The staging database password rotates on Fridays."


async def contents(memories: MemoryStore, scope: MemoryScope, query: str) -> list[str]:
    return [hit.doc.content for hit in await memories.search(scope, query, 10)]


async def test_another_tenant_never_finds_the_memory(memories: MemoryStore) -> None:
    a = MemoryScope("tenant-a", "tenant-a:h:s1", user="u")
    b = MemoryScope("tenant-b", "tenant-b:h:s1", user="u")
    await memories.add(a, [card(SECRET)])
    assert await contents(memories, a, "database password") == [SECRET]
    assert await contents(memories, b, "database password") == []
    # Even a scope that names tenant A's session and user, under tenant B's name:
    assert await contents(memories, MemoryScope("tenant-b", "tenant-a:h:s1", user="u"), "database password") == []


async def test_another_user_never_finds_the_memory(memories: MemoryStore) -> None:
    u = MemoryScope("acme", "acme:h:s1", user="u")
    v = MemoryScope("acme", "acme:h:s2", user="v")
    await memories.add(u, [card(SECRET)])
    assert await contents(memories, MemoryScope("acme", "acme:h:s9", user="u"), "password") == [
        SECRET
    ]  # u, new session
    assert await contents(memories, v, "password") == []
    assert await contents(memories, MemoryScope("acme", "acme:h:s9"), "password") == []  # anonymous


async def test_scope_layer_is_shared_by_users_of_the_scope_but_not_across_tenants(memories: MemoryStore) -> None:
    await memories.add(MemoryScope("acme", "acme:h:s1", user="u", scope="billing"), [card(SECRET)])
    assert await contents(memories, MemoryScope("acme", "acme:h:s2", user="v", scope="billing"), "password") == [SECRET]
    assert await contents(memories, MemoryScope("acme", "acme:h:s2", user="v", scope="search"), "password") == []
    assert await contents(memories, MemoryScope("other", "other:h:s2", scope="billing"), "password") == []


async def test_two_users_of_one_session_have_two_session_layers(memories: MemoryStore) -> None:
    # The same X-Session-Id, or the same system prompt and first message: one session key.
    alice, bob = MemoryScope("acme", "acme:h:s1", user="alice"), MemoryScope("acme", "acme:h:s1", user="bob")
    assert alice.session_layer.key != bob.session_layer.key
    await memories.add(alice, [card(SECRET), page_doc(1, [{"role": "user", "content": SECRET}], "src", 1.0)])
    assert await contents(memories, bob, "database password") == []
    assert await contents(memories, MemoryScope("acme", "acme:h:s1"), "database password") == []
    assert sorted(await contents(memories, alice, "database password")) == sorted([SECRET, f"User: {SECRET}"])


async def test_without_a_user_a_session_layer_is_the_sessions(memories: MemoryStore) -> None:
    first, second = MemoryScope("acme", "acme:h:s1"), MemoryScope("acme", "acme:h:s1", user="")
    assert first.session_layer == second.session_layer == Layer("acme", "session", "acme:h:s1")
    await memories.add(first, [card(SECRET)])
    assert await contents(memories, second, "database password") == [SECRET]


def test_write_rule() -> None:
    scope = MemoryScope("acme", "acme:h:s1", user="u", scope="billing")
    fact, rule = card("A fact."), card("Never deploy on Fridays.", "constraint")
    page = page_doc(1, [{"role": "user", "content": "hi"}], "src", 1.0)
    assert [layer.kind for layer in scope.write_layers(fact)] == ["session", "scope"]
    assert [layer.kind for layer in scope.write_layers(rule)] == ["session", "scope", "user"]
    assert [layer.kind for layer in scope.write_layers(page)] == ["session"]
    no_scope = MemoryScope("acme", "acme:h:s1", user="u")
    assert [layer.kind for layer in no_scope.write_layers(fact)] == ["session", "user"]
    assert [layer.kind for layer in no_scope.write_layers(rule)] == ["session", "user"]
    anonymous = MemoryScope("acme", "acme:h:s1")
    assert [layer.kind for layer in anonymous.write_layers(rule)] == ["session"]


def test_read_layers_broadest_first() -> None:
    assert [layer.kind for layer in MemoryScope("t", "t:h:1", user="u", scope="s").read_layers()] == [
        "user",
        "scope",
        "session",
    ]
    assert [layer.kind for layer in MemoryScope("t", "t:h:1", scope="s").read_layers()] == ["scope", "session"]


def test_keys_carry_the_tenant_and_only_a_hash_of_the_id() -> None:
    layer = Layer("acme", "user", "alice@example.com:../../x")
    assert layer.key.startswith("ctx:acme:mem:user:")
    suffix = layer.key.removeprefix("ctx:acme:mem:user:")
    assert len(suffix) == 32 and all(c in "0123456789abcdef" for c in suffix)
    assert Layer("acme", "user", "a").key != Layer("acme", "scope", "a").key != Layer("other", "user", "a").key


def test_a_users_session_layers_sit_under_the_users_prefix() -> None:
    owned = MemoryScope("acme", "acme:h:s1", user="alice").session_layer
    assert owned == Layer("acme", "session", "acme:h:s1", owner="alice")
    assert owned.key.startswith(user_sessions_prefix("acme", "alice"))
    assert owned.key.startswith(user_layer_key("acme", "alice") + ":session:")
    assert Layer("acme", "session", "acme:h:s1").key.startswith("ctx:acme:mem:session:")
    assert owned.key != Layer("acme", "session", "acme:h:s1").key
    with pytest.raises(ValueError):
        Layer("acme", "user", "alice", owner="alice")


def value_epoch(value: object) -> str:
    assert isinstance(value, dict)
    return str(value["epoch"])


async def test_stored_under_the_documented_keys(memories: MemoryStore, store: Store) -> None:
    scope = MemoryScope("acme", "acme:h:s1", user="u", scope="billing")
    await memories.add(scope, [card("Never deploy on Fridays.", "constraint")])
    layers = [layer.key for layer in scope.read_layers()]
    marker = user_layer_key("acme", "u") + ":wrote:" + Layer("acme", "scope", "billing").key.rsplit(":", 1)[1]
    assert await store.keys("ctx:acme:mem:") == sorted(layers + [layer_version_key(key) for key in layers] + [marker])
    assert await store.get(marker) == {"user": "u", "scope": "billing"}
    assert await store.get(layer_version_key(Layer("acme", "user", "u").key)) == {
        "epoch": value_epoch(await store.get(Layer("acme", "user", "u").key)),
        "rev": 1,
        "count": 1,
    }
    value = await store.get(Layer("acme", "user", "u").key)
    assert isinstance(value, dict) and value["kind"] == "user" and value["ident"] == "u"
    assert orjson.loads(value["texts"][0])["content"] == "Never deploy on Fridays." and value["rev"] == 1


async def test_search_given_layers_and_has_docs(memories: MemoryStore) -> None:
    scope = MemoryScope("acme", "acme:h:s1", user="u")
    assert await memories.has_docs(scope) is False
    await memories.add(scope, [card(SECRET)])
    assert await memories.has_docs(scope) is True
    assert await memories.has_docs(MemoryScope("acme", "acme:h:s2", user="v")) is False
    hits = await memories.search_layers([Layer("acme", "user", "u")], "password", 5)
    assert [(hit.doc.content, hit.layer) for hit in hits] == [(SECRET, "user")]
    assert await memories.search_layers([Layer("acme", "user", "v")], "password", 5) == []
