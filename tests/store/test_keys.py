"""The Store key spellings are pinned, and the families cannot reach each other.

The literal keys below are what stores written so far hold: a change to a spelling fails here
before it orphans a store. The isolation tests check the module docstring's promises on many
keys: every family's keys, for two tenants, two users and session ids chosen to look like other
families (a client may send ``X-Session-Id: ckpt:x``).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.session import SessionKey
from ctxproxy.store import keys

HEADER = SessionKey("acme", "chat-1", "header")
DERIVED = SessionKey("acme", "s_0123456789abcdef01234567", "derived")
ALICE = "69b5957599f918e276a3d2428acdc997"  # blake2b-16 of "alice"
BILLING = "82885a0c29db7bad98201c40b8006d8c"  # of "billing"
CHAT_1 = "f93e348adc273cefa6c1efb05d37f329"  # of "acme:h:chat-1", HEADER's store id

PINNED: list[tuple[str, Callable[[], str], str]] = [
    ("tenant", lambda: keys.tenant_prefix("acme"), "ctx:acme:"),
    ("store id, header", lambda: keys.session_store_id(HEADER), "acme:h:chat-1"),
    ("store id, derived", lambda: keys.session_store_id(DERIVED), "acme:d:s_0123456789abcdef01234567"),
    ("session records", lambda: keys.session_records_prefix("acme"), "ctx:acme:session:"),
    ("session record", lambda: keys.session_record_key(HEADER), "ctx:acme:session:h:chat-1"),
    ("derived record", lambda: keys.session_record_key(DERIVED), "ctx:acme:session:d:s_0123456789abcdef01234567"),
    ("history", lambda: keys.session_history_key(HEADER), "ctx:acme:history:h:chat-1"),
    ("stats", lambda: keys.tenant_stats_prefix("acme"), "ctx:acme:stats:"),
    ("stats bucket", lambda: keys.tenant_stats_key("acme", 1764000000), "ctx:acme:stats:1764000000"),
    ("pages", lambda: keys.archived_pages_prefix(HEADER), "ctx:acme:page:h:chat-1:"),
    ("user layers", lambda: keys.user_layers_prefix("acme"), "ctx:acme:mem:user:"),
    ("checkpoints", lambda: keys.checkpoints_key(HEADER), "ctx:acme:ckpt:h:chat-1"),
    ("compaction lock", lambda: keys.compaction_lock_key(HEADER), "ctx:acme:compacting:h:chat-1"),
    ("branch lock", lambda: keys.branch_lock_key(HEADER), "ctx:acme:forking:h:chat-1"),
    ("pending", lambda: keys.compaction_pending_key(DERIVED), "ctx:acme:pending:d:s_0123456789abcdef01234567"),
    ("page", lambda: keys.archived_page_key(HEADER, "3:0123456789abcdef"), "ctx:acme:page:h:chat-1:3:0123456789abcdef"),
    ("recalls", lambda: keys.page_recalls_key(HEADER), "ctx:acme:recall:h:chat-1"),
    ("served", lambda: keys.served_compactions_key(HEADER), "ctx:acme:served:h:chat-1"),
    ("toolout", lambda: keys.tool_outputs_key(HEADER), "ctx:acme:toolout:h:chat-1"),
    ("original", lambda: keys.tool_output_original_key(HEADER, "r00ab"), "ctx:acme:original:h:chat-1:r00ab"),
    ("windows", lambda: keys.learned_windows_prefix("acme"), "ctx:acme:window:"),
    ("window", lambda: keys.learned_window_key("acme", "gpt-4o"), "ctx:acme:window:a2a69af70d1b9be70f1abf82"),
    ("no model", lambda: keys.learned_window_key("acme", None), "ctx:acme:window:e3b0c44298fc1c149afbf4c8"),
    ("memory", lambda: keys.memory_prefix("acme"), "ctx:acme:mem:"),
    ("user layer", lambda: keys.user_layer_key("acme", "alice"), f"ctx:acme:mem:user:{ALICE}"),
    ("user owned", lambda: keys.user_owned_prefix("acme", "alice"), f"ctx:acme:mem:user:{ALICE}:"),
    ("user sessions", lambda: keys.user_sessions_prefix("acme", "alice"), f"ctx:acme:mem:user:{ALICE}:session:"),
    (
        "user session layer",
        lambda: keys.user_session_layer_key("acme", "alice", "acme:h:chat-1"),
        f"ctx:acme:mem:user:{ALICE}:session:{CHAT_1}",
    ),
    ("scope layer", lambda: keys.scope_layer_key("acme", "billing"), f"ctx:acme:mem:scope:{BILLING}"),
    ("session layer", lambda: keys.session_layer_key("acme", "acme:h:chat-1"), f"ctx:acme:mem:session:{CHAT_1}"),
    (
        "lineage layer",
        lambda: keys.lineage_layer_key("acme", "acme:d:s_0123456789abcdef01234567"),
        "ctx:acme:mem:lineage:415aa6db7ab18396f8aedaba93bcf89d",
    ),
    ("markers", lambda: keys.writer_markers_prefix("acme", "alice"), f"ctx:acme:mem:user:{ALICE}:wrote:"),
    (
        "marker",
        lambda: keys.writer_marker_key("acme", "alice", "billing"),
        f"ctx:acme:mem:user:{ALICE}:wrote:{BILLING}",
    ),
    ("version", lambda: keys.layer_version_key(f"ctx:acme:mem:user:{ALICE}"), f"ctx:acme:mem:user:{ALICE}:v"),
    (
        "lease record",
        lambda: keys.lease_record_key("ctx:acme:compacting:h:chat-1"),
        "__store__:lock:ctx:acme:compacting:h:chat-1",
    ),
    ("probe", lambda: keys.probe_key("00ff"), "__store__:probe:00ff"),
    ("inspector login", lambda: keys.inspector_login_key("1.ab.cd"), "ui:login:b71cf58399efb0c04ee080380e4bcda3"),
]


@pytest.mark.parametrize(("spelled", "expected"), [(f, e) for _, f, e in PINNED], ids=[n for n, _, _ in PINNED])
def test_each_key_is_spelled_as_stores_already_hold_it(spelled: Callable[[], str], expected: str) -> None:
    assert spelled() == expected


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        (Layer("acme", "user", "alice"), f"ctx:acme:mem:user:{ALICE}"),
        (Layer("acme", "scope", "billing"), f"ctx:acme:mem:scope:{BILLING}"),
        (Layer("acme", "session", HEADER.store_id), f"ctx:acme:mem:session:{CHAT_1}"),
        (Layer("acme", "session", HEADER.store_id, owner="alice"), f"ctx:acme:mem:user:{ALICE}:session:{CHAT_1}"),
        (
            Layer("acme", "session", DERIVED.store_id, bound=True),
            "ctx:acme:mem:lineage:415aa6db7ab18396f8aedaba93bcf89d",
        ),
        # memory.scopes composes the id of a scope's session layer before it is hashed
        (
            MemoryScope("acme", HEADER.store_id, scope="billing").session_layer,
            "ctx:acme:mem:session:ad39a962b2eaacd1cd35513044c1ad1a",
        ),
    ],
    ids=["user", "scope", "session", "owned session", "lineage", "scope's session"],
)
def test_memory_layers_use_the_pinned_keys(layer: Layer, expected: str) -> None:
    assert layer.key == expected


# -- isolation -----------------------------------------------------------------------------------

TENANTS = ("a", "ab")  # one tenant's name is the start of the other's
USERS = ("alice", "alice:session")
SESSION_VALUES = ("chat-1", "ckpt:x", "x:session:h", "1:abcd", "window", "mem:user")


def _sessions(tenant: str) -> list[SessionKey]:
    return [SessionKey(tenant, value, source) for value in SESSION_VALUES for source in ("header", "derived")]


def _layers(tenant: str) -> list[str]:
    """Example memory layer keys of ``tenant`` (each has a version entry beside it)."""
    store_ids = [s.store_id for s in _sessions(tenant)]
    return [
        *(keys.user_layer_key(tenant, u) for u in USERS),
        *(keys.user_session_layer_key(tenant, u, i) for u in USERS for i in store_ids),
        *(keys.scope_layer_key(tenant, s) for s in ("billing", "alice")),
        *(keys.session_layer_key(tenant, i) for i in store_ids),
        *(keys.lineage_layer_key(tenant, i) for i in store_ids),
    ]


def _families(tenant: str) -> dict[str, list[str]]:
    """Example keys of every family of ``tenant``."""
    sessions = _sessions(tenant)
    layers = _layers(tenant)
    markers = [keys.writer_marker_key(tenant, u, "billing") for u in USERS]
    return {
        "session": [keys.session_record_key(s) for s in sessions],
        "history": [keys.session_history_key(s) for s in sessions],
        "stats": [keys.tenant_stats_key(tenant, b) for b in (0, 300, 1764000000)],
        "ckpt": [keys.checkpoints_key(s) for s in sessions],
        "compacting": [keys.compaction_lock_key(s) for s in sessions],
        "forking": [keys.branch_lock_key(s) for s in sessions],
        "pending": [keys.compaction_pending_key(s) for s in sessions],
        "page": [keys.archived_page_key(s, page) for s in sessions for page in ("1:00ab", "12:ffff")],
        "recall": [keys.page_recalls_key(s) for s in sessions],
        "served": [keys.served_compactions_key(s) for s in sessions],
        "toolout": [keys.tool_outputs_key(s) for s in sessions],
        "original": [keys.tool_output_original_key(s, r) for s in sessions for r in ("r00ab", "rffff")],
        "window": [keys.learned_window_key(tenant, m) for m in ("gpt-4o", "", None, "ckpt:x")],
        "mem": layers + [keys.layer_version_key(key) for key in layers] + markers,
    }


def _all_keys(tenant: str) -> list[str]:
    return [key for family in _families(tenant).values() for key in family]


def test_no_key_of_one_family_starts_with_a_key_of_another() -> None:
    families = _families("a")
    for (name_a, keys_a), (name_b, keys_b) in itertools.permutations(families.items(), 2):
        clashes = [(a, b) for a in keys_a for b in keys_b if b.startswith(a)]
        assert clashes == [], f"{name_a} keys are prefixes of {name_b} keys"
        assert all(k.startswith(f"ctx:a:{name_a}:") for k in keys_a)


def test_every_key_starts_with_its_tenant_and_with_no_other_tenants_prefix() -> None:
    for tenant, other in itertools.permutations(TENANTS, 2):
        for key in _all_keys(tenant):
            assert key.startswith(keys.tenant_prefix(tenant))
            assert not key.startswith(keys.tenant_prefix(other))
            assert not key.startswith(keys.RESERVED_PREFIX)


def test_inspector_logins_are_no_tenants_keys_nor_reserved() -> None:
    login = keys.inspector_login_key("ctx:a:session:h:chat-1")  # whatever the token, it is hashed
    assert login.startswith("ui:login:") and len(login) == len("ui:login:") + 32
    assert not login.startswith(keys.RESERVED_PREFIX)
    assert not any(login.startswith(keys.tenant_prefix(tenant)) for tenant in TENANTS)


def test_a_tenant_name_with_a_colon_is_refused() -> None:
    with pytest.raises(ValueError, match="':'"):
        keys.checkpoints_key(SessionKey("a:ckpt", "x", "header"))
    with pytest.raises(ValueError, match="':'"):
        keys.user_layer_key("", "alice")


def test_each_scan_prefix_finds_exactly_its_own_keys() -> None:
    everything = [key for tenant in TENANTS for key in _all_keys(tenant)]
    user = "alice"
    own_sessions = {keys.user_session_layer_key("a", user, s.store_id) for s in _sessions("a")}
    own_versions = {keys.layer_version_key(k) for k in own_sessions}
    scans = {
        keys.session_records_prefix("a"): {keys.session_record_key(s) for s in _sessions("a")},
        keys.tenant_stats_prefix("a"): set(_families("a")["stats"]),
        keys.user_layers_prefix("a"): {k for k in _families("a")["mem"] if ":mem:user:" in k},
        keys.learned_windows_prefix("a"): set(_families("a")["window"]),
        keys.memory_prefix("a"): set(_families("a")["mem"]),
        keys.user_sessions_prefix("a", user): own_sessions | own_versions,
        keys.writer_markers_prefix("a", user): {keys.writer_marker_key("a", user, "billing")},
        keys.user_owned_prefix("a", user): own_sessions
        | own_versions
        | {keys.writer_marker_key("a", user, "billing"), keys.layer_version_key(keys.user_layer_key("a", user))},
    }
    for prefix, expected in scans.items():
        assert {key for key in everything if key.startswith(prefix)} == expected, prefix


def test_layer_versions_and_writer_markers_lead_back_to_their_layers() -> None:
    layers = _layers("a")
    assert not any(keys.is_layer_version_key(key) for key in layers)
    assert all(keys.is_layer_version_key(keys.layer_version_key(key)) for key in layers)
    marker = keys.writer_marker_key("a", "alice", "billing")
    assert keys.scope_layer_of_marker("a", marker) == keys.scope_layer_key("a", "billing")


def test_backend_records_are_reserved() -> None:
    assert keys.lease_record_key("ctx:a:compacting:h:x").startswith(keys.RESERVED_PREFIX)
    assert keys.probe_key("00").startswith(keys.RESERVED_PREFIX)
    assert keys.lease_record_key("x") != keys.probe_key("x")


def test_the_keys_module_imports_nothing_of_ctxproxy() -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(Path(keys.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported == {"__future__", "hashlib", "typing"}


def test_a_scan_of_a_sessions_page_prefix_keeps_only_its_own_pages() -> None:
    everything = [key for tenant in TENANTS for key in _all_keys(tenant)]
    for session in _sessions("a"):
        prefix = keys.archived_pages_prefix(session)
        own = {keys.archived_page_key(session, page) for page in ("1:00ab", "12:ffff")}
        scanned = [key for key in everything if key.startswith(prefix)]
        assert {key for key in scanned if keys.is_archived_page_of(session, key)} == own, session
    # "1:abcd"'s pages start with the prefix of the session "1", and are not its pages.
    one, lookalike = SessionKey("a", "1", "header"), SessionKey("a", "1:abcd", "header")
    page = keys.archived_page_key(lookalike, "2:00ff")
    assert page.startswith(keys.archived_pages_prefix(one)) and not keys.is_archived_page_of(one, page)
    assert not keys.is_archived_page_of(one, keys.archived_pages_prefix(one) + "x:00")
    assert not keys.is_archived_page_of(one, keys.archived_pages_prefix(one) + "3:")


def test_user_session_layers_are_found_by_the_session_they_belong_to() -> None:
    session = SessionKey("a", "chat-1", "header").store_id
    mine = [keys.user_session_layer_key("a", u, session) for u in USERS]
    found = [k for k in _layers("a") if keys.is_user_session_layer_of("a", k, session)]
    assert found == mine
    assert keys.scoped_session_ident(session, "billing") == "a:h:chat-1\0scope:billing"
