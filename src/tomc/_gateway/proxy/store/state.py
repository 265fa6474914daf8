"""A session's state as a shared store keeps it: ``ConversationState`` JSON, UTF-8 encoded.

What a session learns about its conversation (frozen memory, decisions so far, usage hints,
rebuilds; :class:`tomc.chat.ConversationState`) round-trips through JSON, so a
session built from the gateway's shared options and given the loaded state behaves as the
session that saved it.
"""

from __future__ import annotations

from ....chat import AutomaticChatSession, ConversationState

__all__ = ["restore_state", "snapshot_state"]


def snapshot_state(session: AutomaticChatSession) -> bytes:
    """The session's state, ready to save."""
    return session.state.to_json().encode("utf-8")


def restore_state(session: AutomaticChatSession, data: bytes) -> None:
    """Give ``session`` the saved state ``data``."""
    session.state = ConversationState.from_json(data.decode("utf-8"))
