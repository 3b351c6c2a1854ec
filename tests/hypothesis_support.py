"""The suite's hypothesis profiles, and which one a run loads.

CI runs the same examples every time (``derandomize``), so a red build is
reproducible and a green one is not luck; a developer's run keeps drawing
new examples and remembers failing ones in the local example database.
tests/conftest.py loads the profile before any test module is imported: a
``@settings(...)`` decorator copies what it does not set from the profile
loaded at that moment.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, settings

__all__ = ["CI", "DEV", "profile_name"]

CI = "ci"
DEV = "dev"

settings.register_profile(
    CI,
    settings.get_profile("default"),
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Hypothesis's own defaults (named: with CI set, hypothesis has already loaded its "ci" one,
# which a profile without a parent would copy); print_blob so a local failure can be replayed.
settings.register_profile(DEV, settings.get_profile("default"), print_blob=True)


def profile_name(environ: Mapping[str, str]) -> str:
    """HYPOTHESIS_PROFILE when set, else the CI profile when CI is set (.ci/run sets CI=true)."""
    explicit = environ.get("HYPOTHESIS_PROFILE", "")
    if explicit:
        return explicit
    return CI if environ.get("CI", "") else DEV
