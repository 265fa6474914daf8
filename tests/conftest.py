"""Shared test set-up: Hypothesis profiles; a real redis-server for the shared-store tests;
under Wine (``make test-windows``), the one Wine gap the SDKs meet (:mod:`windows_runtime`).

The default profile keeps the property tests quick enough to run on every change; run
``HYPOTHESIS_PROFILE=thorough pytest`` for many more examples before a release.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# The gateway's rebuild deadline makes what a request sends depend on the machine's speed; the
# suite compares bytes, so its gateways (and the processes they start) decide without one, and
# the deadline's own tests set it (tests/gateway/proxy/test_app.py, tests/chat/test_deadline.py).
os.environ.setdefault("TOMC_COMPILE_DEADLINE_S", "off")

from redis_server import RedisServer, running_redis
from windows_runtime import tolerate_wine_keepalive_options

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
tolerate_wine_keepalive_options()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session (see :mod:`redis_server`); tests keep apart by
    key prefix (``redis_url``)."""
    yield from running_redis(tmp_path_factory.mktemp("redis"))


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A store URL on the session's redis-server with a key prefix of its own."""
    return f"{redis_server.url}?prefix=test-{uuid.uuid4().hex[:12]}:"
