"""What every conversation's session starts from, and the warm-up at the gateway's start."""

from __future__ import annotations

from tomc._gateway.proxy.options import SESSION_OPTIONS, new_session, warm_up
from tomc.chat.dialects import DIALECTS


def test_the_warm_up_compiles_a_request_in_every_format():
    # Compiling (not merely counting) loads the compiler's modules too; one per format, so a
    # format added later is warmed as well or this fails.
    assert warm_up() == ["compiled"] * len(DIALECTS)


def test_a_new_session_has_the_gateways_options():
    session = new_session()
    assert session.options is SESSION_OPTIONS
    assert session.options.min_recent_messages == 0
