"""How Hypothesis draws its examples. Under `make test` (scripts/test-all.sh sets
TERRAPIN_HYPOTHESIS=make-test) each property test's examples are derived from the test itself,
not drawn at random: the same examples every run, so the suite's verdict does not depend on
luck (issue 33: a property that finds a new counterexample in one CI run of three fails work
that did not touch it). Run pytest directly, without the variable, and the examples are drawn
afresh each time, which is how new counterexamples are found; one found is kept in
.hypothesis/ and replayed first next time."""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE = "make-test"
settings.register_profile(PROFILE, derandomize=True, print_blob=True)


def load() -> None:
    if os.environ.get("TERRAPIN_HYPOTHESIS") == PROFILE:
        settings.load_profile(PROFILE)
