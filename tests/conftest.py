import os

from hypothesis import settings

# Property tests draw random examples on a developer's machine (``dev``). The CI gate (.ci/run sets
# ROOFLINE_REQUIRE_TOOLS; hosted CI sets CI) draws the same examples on every run (derandomize), so
# a pass or a failure there repeats; ``HYPOTHESIS_PROFILE=stress`` draws STRESS_EXAMPLES (default
# 1,000) for the tests without their own count, to hunt for a property that does not hold.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None)
settings.register_profile("gate", max_examples=30, deadline=None, derandomize=True, database=None)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("stress", max_examples=int(os.environ.get("STRESS_EXAMPLES", "1000")), deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE")
                      or ("ci" if os.environ.get("CI") else "gate" if os.environ.get("ROOFLINE_REQUIRE_TOOLS") else "dev"))
