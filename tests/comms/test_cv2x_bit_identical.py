"""The cv2x channel's results stay bit for bit what they were before its speed-ups (the compiled subframe loop, the
spatial index, the columnar log): the digests below were recorded from the model as it stood before them (commit
245ef48), for each configuration of ``cv2x_digest_run`` (ETSI CAMs of variable size with fading and stations
leaving and joining, 100 ms periodic messages, congestion control dropping transmissions, NR dynamic grants with a
blind retransmission, NR semi-persistent with 50 ms reservations, LTE with 20 ms reservations kept at p = 0.5, the
bench's platoons over 11 km).
A change of any trace row, CBR, trigger, delivery or metric changes a digest."""

from __future__ import annotations

import pytest

from comms_models.cv2x import history, model
from tests.comms.cv2x_digest_run import CONFIGS, run

RECORDED = {
    "etsi": {"trace": "cddc6c515c43e00d", "load": "65fdc728a14a8349", "triggers": "4355f92a7a35ca6b",
             "deliveries": "e1241a65fdc94d9c", "metrics": "eda573d0c49f2c22"},
    "periodic": {"trace": "0562170eac054bda", "load": "ddacf4ca810f9c3b", "triggers": "80cdc46db8254b51",
                 "deliveries": "170be458ec96308f", "metrics": "0d38d950e6ee683c"},
    "congestion": {"trace": "92864c356782ae25", "load": "d8d6ec2917d7d39a", "triggers": "afbcf61e1e99a55a",
                   "deliveries": "c8ffefbaf6b13396", "metrics": "b55dc09611c8c9d1"},
    "nr_dynamic": {"trace": "ebd08b6ee5059486", "load": "586f764411972ffd", "triggers": "c1d42c5939fc8e08",
                   "deliveries": "da726d105d0661d4", "metrics": "e034c0e20a79e4f2"},
    "nr_sps": {"trace": "ec96ebba8301f161", "load": "593d657c6745c6f1", "triggers": "9ea3253797947460",
               "deliveries": "8946c45d44bbdc19", "metrics": "1507d4efc848e03a"},
    "long_road": {"trace": "224e2ef356edd590", "load": "da6e563efcaf6210", "triggers": "6eb195a931e58602",
                  "deliveries": "7fbbbbd30f3ff1fc", "metrics": "a6770815fb854993"},
    "lte_rri20": {"trace": "e1fdd1d401b06724", "load": "9b2c109098208d79", "triggers": "47ac894ea75b2a40",
                  "deliveries": "a6af19909086da9a", "metrics": "d9dea5d22f0950f1"},
}


def test_every_configuration_has_a_recorded_digest() -> None:
    assert set(RECORDED) == set(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_run_is_bit_identical_to_the_model_before_its_speed_ups(name: str) -> None:
    assert run(name) == RECORDED[name]


@pytest.mark.slow  # three more runs
@pytest.mark.parametrize("name", ["etsi", "nr_dynamic", "lte_rri20"])
def test_recomputing_the_sensing_instead_of_keeping_the_rings_changes_nothing(name: str,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With no memory for the rings of what each station heard, they are dropped at their first growth and every
    later selection recomputes its sensing from the history: the same digests."""
    monkeypatch.setattr(history, "RING_BUDGET_BYTES", 0)
    assert run(name) == RECORDED[name]


@pytest.mark.slow  # one more run
def test_resolving_a_step_s_receptions_in_parts_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense step resolves its held receptions whenever more than ``HELD_LINKS`` links wait: with 100 (every few
    subframes), the same digests."""
    monkeypatch.setattr(model, "HELD_LINKS", 100)
    assert run("etsi") == RECORDED["etsi"]
