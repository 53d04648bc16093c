import pytest

from rubricate.audit.domain.sampling import audit_reason, draw, within_share


def test_a_questions_first_group_is_audited_while_the_share_allows() -> None:
    # the first group of a step: nothing audited yet
    assert audit_reason(tenant="t", scoring_id="sc_1", fraction=0.0, question_audited=False) == (
        "first"
    )
    # 9 groups seen, 1 audited, share 0.1: a second audit would be 2 of 10, over the share
    assert (
        audit_reason(
            tenant="t",
            scoring_id="sc_1",
            fraction=0.0,
            question_audited=False,
            seen=9,
            audited=1,
            max_share=0.1,
        )
        is None
    )
    # 19 seen, 1 audited: 2 of 20 is within 0.1
    assert (
        audit_reason(
            tenant="t",
            scoring_id="sc_1",
            fraction=0.0,
            question_audited=False,
            seen=19,
            audited=1,
            max_share=0.1,
        )
        == "first"
    )
    # a question audited already is not a first again
    assert audit_reason(tenant="t", scoring_id="sc_1", fraction=0.0, question_audited=True) is None


def test_within_share_counts_the_group_being_decided() -> None:
    assert within_share(seen=0, audited=0, share=0.0)  # at least one
    assert not within_share(seen=5, audited=1, share=0.0)
    assert within_share(seen=9, audited=0, share=0.1)
    assert not within_share(seen=8, audited=1, share=0.1)
    assert within_share(seen=3, audited=3, share=1.0)


def test_a_first_epoch_audits_at_most_its_share() -> None:
    """Every question new (a first epoch): the audit takes about the share, not every group."""
    audited = 0
    for seen in range(1000):
        reason = audit_reason(
            tenant="t",
            scoring_id=f"sc_{seen}",
            fraction=0.05,
            question_audited=False,
            seen=seen,
            audited=audited,
            max_share=0.1,
        )
        audited += reason is not None
    assert audited == 100  # max(0.1, 0.05) of 1000, never over at any point


def test_a_sampled_draw_is_audited_beyond_the_share() -> None:
    ids = [f"sc_{i}" for i in range(200)]
    assert all(
        audit_reason(
            tenant="t",
            scoring_id=i,
            fraction=1.0,
            question_audited=True,
            seen=100,
            audited=100,
            max_share=0.0,
        )
        == "sampled"
        for i in ids
    )


def test_a_fraction_of_zero_audits_nothing_else_and_one_audits_everything() -> None:
    ids = [f"sc_{i}" for i in range(200)]
    assert all(
        audit_reason(tenant="t", scoring_id=i, fraction=0.0, question_audited=True) is None
        for i in ids
    )
    assert all(
        audit_reason(tenant="t", scoring_id=i, fraction=1.0, question_audited=True) == "sampled"
        for i in ids
    )


def test_the_draw_is_stable_and_close_to_the_fraction() -> None:
    assert draw("t", "sc_1") == draw("t", "sc_1")
    assert draw("t", "sc_1") != draw("u", "sc_1")
    n = 4000
    hits = sum(
        audit_reason(tenant="t", scoring_id=f"sc_{i}", fraction=0.05, question_audited=True)
        is not None
        for i in range(n)
    )
    # binomial(4000, 0.05): mean 200, sd ~13.8; 5 sd either side
    assert 130 < hits < 270


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError):
        audit_reason(tenant="t", scoring_id="s", fraction=1.5, question_audited=True)
