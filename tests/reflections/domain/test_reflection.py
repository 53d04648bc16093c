import pytest

from rubricate.reflections.domain.reflection import (
    CATEGORIES,
    DIMENSION_WEIGHTS,
    CandidateOutcome,
    UseScores,
    bank_decision,
    best_candidate,
    check_format,
    utility,
    weighted_use_score,
)

RUBRICS = """
Critical Requirement:
- Name the unit mismatch (pound-force seconds vs newton seconds) as the root cause.
Analytical Approach:
- Check the navigation team's trajectory corrections against the primary report.
Communication & Structure:
- Lead with the cause, then the chain of missed checks.
Pitfalls:
- Do not blame a single engineer; the report names process failures.
"""
TAKEAWAYS = """
1. Trace a failure to the interface where two teams' assumptions met.
2. Prefer the investigation board's report over press summaries.
"""


def reflection(rubrics: str = RUBRICS, takeaways: str = TAKEAWAYS) -> str:
    return (
        f"<reflection_rubrics>{rubrics}</reflection_rubrics>\n"
        f"<reflection_takeaways>{takeaways}</reflection_takeaways>"
    )


def test_a_well_formed_reflection_is_parsed_into_categories_and_lessons() -> None:
    check = check_format(reflection())
    assert check.valid and check.reason is None and check.parsed is not None
    assert list(check.parsed.rubrics) == list(CATEGORIES)
    assert check.parsed.rubrics["Pitfalls"] == [
        "Do not blame a single engineer; the report names process failures."
    ]
    assert check.parsed.takeaways == [
        "Trace a failure to the interface where two teams' assumptions met.",
        "Prefer the investigation board's report over press summaries.",
    ]


def test_markdown_headings_plurals_and_inline_guidance_are_accepted() -> None:
    rubrics = """
### 1. **Critical Requirements:** state the root cause
## Analytical approach
* verify against the report
**Communication and Structure**: cause first
- Pitfalls: blaming one person
"""
    check = check_format(reflection(rubrics, "- one lesson"))
    assert check.valid, check.reason
    assert check.parsed is not None
    assert check.parsed.rubrics["Critical Requirement"] == ["state the root cause"]
    assert check.parsed.rubrics["Communication & Structure"] == ["cause first"]
    assert check.parsed.rubrics["Pitfalls"] == ["blaming one person"]
    assert check.parsed.takeaways == ["one lesson"]


def test_continuation_lines_join_their_list_item() -> None:
    check = check_format(reflection(takeaways="- first lesson\n  continues here\n- second"))
    assert check.parsed is not None
    assert check.parsed.takeaways == ["first lesson continues here", "second"]


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        ("", "empty"),
        ("just some advice", "tags found: none"),
        (f"<reflection_rubrics>{RUBRICS}</reflection_rubrics>", "tags found"),
        (
            f"<reflection_takeaways>{TAKEAWAYS}</reflection_takeaways>"
            f"<reflection_rubrics>{RUBRICS}</reflection_rubrics>",
            "followed by",
        ),
        (reflection() + reflection(), "tags found"),
        ("Here is my reflection:\n" + reflection(), "outside the two blocks"),
        (reflection() + "\nHope this helps", "outside the two blocks"),
        (reflection(RUBRICS.replace("Pitfalls:", "Risks:")), "lacks the categories ['Pitfalls']"),
        (reflection(RUBRICS + "\nPitfalls:\n- again"), "appears twice"),
        (reflection("intro line\n" + RUBRICS), "text before the first category"),
        (
            reflection(
                RUBRICS.replace("- Lead with the cause, then the chain of missed checks.", "")
            ),
            "'Communication & Structure'",
        ),
        (reflection(takeaways="   \n"), "no lesson"),
        (reflection(takeaways="\n".join(f"- lesson {i}" for i in range(5))), "5 lessons"),
        (reflection(takeaways="x" * 13_000), "longer than"),
    ],
)
def test_malformed_reflections_are_rejected_with_the_reason(text: str, reason_part: str) -> None:
    check = check_format(text)
    assert not check.valid and check.parsed is None
    assert check.reason is not None and reason_part in check.reason


def test_four_lessons_is_the_most_allowed() -> None:
    check = check_format(reflection(takeaways="\n".join(f"{i}. lesson {i}" for i in range(1, 5))))
    assert check.valid and check.parsed is not None and len(check.parsed.takeaways) == 4


def test_weights_are_the_papers_and_u_averages_the_two_uses() -> None:
    assert DIMENSION_WEIGHTS == {
        "diagnostic_accuracy": 0.4,
        "specificity": 0.3,
        "scope_balance": 0.3,
    }
    within = UseScores(diagnostic_accuracy=1.0, specificity=0.5, scope_balance=0.0)
    cross = UseScores(diagnostic_accuracy=0.0, specificity=1.0, scope_balance=1.0)
    assert weighted_use_score(within) == pytest.approx(0.4 + 0.15)
    u = utility(within=within, cross=cross)
    assert u.within == pytest.approx(0.55)
    assert u.cross == pytest.approx(0.6)
    assert u.u == pytest.approx(0.575)


def test_dimension_scores_outside_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match="specificity"):
        UseScores(diagnostic_accuracy=0.5, specificity=1.5, scope_balance=0.0)


def test_best_is_the_highest_judged_candidate_and_ties_go_to_the_first() -> None:
    outcomes = [
        CandidateOutcome(status="invalid_format", u=0.0, reason="bad"),
        CandidateOutcome(status="scored", u=0.7),
        CandidateOutcome(status="scored", u=0.9),
        CandidateOutcome(status="scored", u=0.9),
    ]
    assert best_candidate(outcomes) == 2
    assert best_candidate([CandidateOutcome(status="invalid_format", u=0.0)]) is None
    # a zero-u valid candidate still beats malformed ones
    assert (
        best_candidate(
            [
                CandidateOutcome(status="invalid_format", u=0.0),
                CandidateOutcome(status="scored", u=0.0),
            ]
        )
        == 1
    )


def test_bank_decision_writes_only_a_fully_judged_best() -> None:
    ok = [CandidateOutcome(status="scored", u=0.2), CandidateOutcome(status="scored", u=0.6)]
    decision = bank_decision(ok)
    assert decision.write and decision.index == 1

    failed = [*ok, CandidateOutcome(status="judge_failed", reason="timeout")]
    decision = bank_decision(failed)
    assert not decision.write and "judge failed on candidates [2]" in decision.reason

    assert not bank_decision([CandidateOutcome(status="invalid_format", u=0.0)]).write
    low = bank_decision(ok, accept_threshold=0.8)
    assert not low.write and "threshold" in low.reason
