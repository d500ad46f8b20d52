"""Which of a client's headers a call of ctxproxy's own carries (``Credential``), per protocol, and
whose key it is: the hash that keeps one client's pending compaction from being summarised under
another client's key (``CompactionInput.summary_caller``) — for Messages clients too, whose key
is in ``x-api-key``."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from multidict import CIMultiDict

from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.config.models import TenantConfig
from ctxproxy.session import PrefixChain, SessionKey
from ctxproxy.strategies.base import Window
from ctxproxy.upstream.completion import Completion, Credential
from ctxproxy.wire.anthropic.completion import ANTHROPIC_VERSION, MESSAGES_COMPLETION
from ctxproxy.wire.openai_chat.completion import CHAT_COMPLETION


def test_a_chat_clients_credential_is_its_authorization_header() -> None:
    credential = CHAT_COMPLETION.credential(CIMultiDict({"authorization": "Bearer sk-a", "x-api-key": "k"}))
    assert credential.key == (("Authorization", "Bearer sk-a"),) and credential.protocol == ()
    assert credential.value("AUTHORIZATION") == "Bearer sk-a"
    assert CHAT_COMPLETION.credential(CIMultiDict()) == Credential()


def test_a_messages_clients_credential_is_its_key_as_sent_and_the_api_version() -> None:
    sent = MESSAGES_COMPLETION.credential(CIMultiDict({"X-Api-Key": "sk-ant-a", "anthropic-version": "2023-01-01"}))
    assert sent.key == (("x-api-key", "sk-ant-a"),)
    assert sent.protocol == (("anthropic-version", "2023-01-01"),)
    bearer = MESSAGES_COMPLETION.credential(CIMultiDict({"Authorization": "Bearer sk-ant-a"}))
    assert bearer.key == (("Authorization", "Bearer sk-ant-a"),)
    assert bearer.protocol == (("anthropic-version", ANTHROPIC_VERSION),)
    assert bearer.value("authorization") == "Bearer sk-ant-a" and sent.value("authorization") is None
    assert "sk-ant-a" not in repr(sent) + repr(bearer)  # a log line that shows one shows no key


def test_the_caller_is_the_key_not_the_api_version() -> None:
    def caller(headers: dict[str, str]) -> str:
        return MESSAGES_COMPLETION.credential(CIMultiDict(headers)).caller()

    alice = caller({"x-api-key": "sk-ant-alice"})
    assert alice == caller({"X-API-KEY": "sk-ant-alice", "anthropic-version": "2023-01-01"})
    assert alice != caller({"x-api-key": "sk-ant-bob"})
    assert alice != caller({})
    assert "sk-ant-alice" not in alice


def _input(completion: Completion, headers: Mapping[str, str] | None = None) -> CompactionInput:
    tenant = TenantConfig(name="t")
    key, chain = SessionKey("t", "s", "header"), PrefixChain(())
    if headers is None:
        return CompactionInput(tenant, key, [], chain, [], None, Window(1000), completion)
    return CompactionInput(tenant, key, [], chain, [], None, Window(1000), completion, headers)


@pytest.mark.parametrize("completion", [CHAT_COMPLETION, MESSAGES_COMPLETION])
def test_a_requests_credential_is_read_from_its_headers_when_asked(completion: Completion) -> None:
    headers = CIMultiDict({"authorization": "Bearer sk-a", "X-Api-Key": "sk-ant-a", "anthropic-version": "2023-01-01"})
    req = _input(completion, headers)
    assert req.credential == completion.credential(headers) != Credential()
    assert req.summary_caller == completion.credential(headers).caller()
    assert req.authorization == completion.credential(headers).value("Authorization")
    assert _input(completion).credential == completion.credential(CIMultiDict())
    assert "sk-a" not in repr(req)  # its headers hold the client's key: never shown
    assert "CompactionInput(tenant=" in repr(req) and "window=Window(context_window=1000" in repr(req)
    narrowed = req._replace(window=Window(500))
    assert narrowed.credential == req.credential and narrowed.window == Window(500) and req.window == Window(1000)
    assert narrowed._replace(window=Window(1000)) == req
