"""The ``protocol`` fixture of the conversation-level tests: metrics are checked per wire protocol."""

from tests.protocols.conftest import protocol

__all__ = ["protocol"]
