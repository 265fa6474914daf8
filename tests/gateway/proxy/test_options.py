"""What every conversation's session starts from, and the warm-up at the gateway's start."""

from __future__ import annotations

import logging
import threading

from dialect_fixtures import chat_agent_request
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


def test_the_warm_ups_log_lines_are_marked_and_a_real_requests_are_not(caplog):
    """At --verbose the warm-up's throwaway requests must not read like the first real ones
    ("request 1 compiled ... TOMC's estimate so far ..."); a real request prepared in another
    thread meanwhile (whether or not the two overlap) and one after it are not marked."""
    caplog.set_level(logging.INFO, logger="tomc")
    real = threading.Thread(
        target=lambda: new_session().prepare_request(chat_agent_request(4), api="chat")
    )
    real.start()
    warm_up()
    real.join()
    new_session().prepare_request(chat_agent_request(4), api="chat")  # after it, too
    lines = [r.getMessage() for r in caplog.records if r.name == "tomc.chat"]
    warming = [line for line in lines if line.startswith("warm-up: ")]
    assert len(warming) >= len(DIALECTS)
    assert all(line.startswith("warm-up: request 1 ") for line in warming if "request" in line)
    real_ones = [line for line in lines if not line.startswith("warm-up: ")]
    assert len(real_ones) == 2 and all(line.startswith("request 1 ") for line in real_ones)
