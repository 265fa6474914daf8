"""Shared test set-up: Hypothesis profiles.

The default profile keeps the property tests quick enough to run on every change; run
``HYPOTHESIS_PROFILE=thorough pytest`` for many more examples before a release.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
