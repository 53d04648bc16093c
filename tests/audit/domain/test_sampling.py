import pytest

from rubricate.audit.domain.sampling import audit_reason, draw


def test_the_first_group_of_a_question_is_always_audited() -> None:
    assert (
        audit_reason(tenant="t", scoring_id="sc_1", fraction=0.0, first_of_question=True) == "first"
    )


def test_a_fraction_of_zero_audits_nothing_else_and_one_audits_everything() -> None:
    ids = [f"sc_{i}" for i in range(200)]
    assert all(
        audit_reason(tenant="t", scoring_id=i, fraction=0.0, first_of_question=False) is None
        for i in ids
    )
    assert all(
        audit_reason(tenant="t", scoring_id=i, fraction=1.0, first_of_question=False) == "sampled"
        for i in ids
    )


def test_the_draw_is_stable_and_close_to_the_fraction() -> None:
    assert draw("t", "sc_1") == draw("t", "sc_1")
    assert draw("t", "sc_1") != draw("u", "sc_1")
    n = 4000
    hits = sum(
        audit_reason(tenant="t", scoring_id=f"sc_{i}", fraction=0.05, first_of_question=False)
        is not None
        for i in range(n)
    )
    # binomial(4000, 0.05): mean 200, sd ~13.8; 5 sd either side
    assert 130 < hits < 270


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError):
        audit_reason(tenant="t", scoring_id="s", fraction=1.5, first_of_question=False)
