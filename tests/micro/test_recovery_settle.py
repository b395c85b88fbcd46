"""``validate --places`` counters (issue 32, item 3): a sample one place gave up and another
answered is named as answered elsewhere, not as failed."""

from __future__ import annotations

import numpy as np

from project_api.micro.recovery import RecoveryStats


def test_given_up_samples_answered_by_another_place_are_named_apart() -> None:
    place_a, place_b = RecoveryStats(), RecoveryStats()
    place_a.failed_samples = {1: "16 faults in a row", 3: "16 faults in a row"}
    place_b.failed_samples = {0: "the run used up its retries"}
    merged = RecoveryStats()
    merged.merge(place_a, 8)  # place a ran samples 8..
    merged.merge(place_b, 0)
    done = np.zeros(16, dtype=np.int32)
    done[[9, 11]] = 1  # another place answered 9 and 11; nobody answered 0
    assert merged.settle(lambda s: bool(done[s] == 1)) == [9, 11]
    assert merged.failed_samples == {0: "the run used up its retries"}
    assert merged.answered_elsewhere == {9: "16 faults in a row", 11: "16 faults in a row"}
    data = merged.to_json()
    assert data["samples_failed"] == {"0": "the run used up its retries"}
    assert list(data["samples_answered_elsewhere"]) == ["9", "11"]
