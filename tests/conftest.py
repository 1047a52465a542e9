"""Hypothesis profiles: ``ci`` (default, derandomised) and ``thorough`` (HYPOTHESIS_PROFILE=thorough)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=25, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", deadline=None, max_examples=500, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=10,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# `drill check` records each attempt for `drill stats` under the user's data directory: the tests (and the
# commands they start, which inherit the environment) write to a throwaway one instead
if "NT_DRILL_DATA" not in os.environ:
    import tempfile
    os.environ["NT_DRILL_DATA"] = tempfile.mkdtemp(prefix="nt-drill-stats-")
