from rubricate.core.rubrics import make_rubric
from rubricate.stagewise.domain.buffer import (
    RubricState,
    curation_conflict,
    select_prunes,
    variance,
)
from rubricate_client.schemas.curation import RubricAction
from rubricate_client.schemas.rubrics import Rubric, RubricSpec, Stage


def rubric(
    title: str, *, stage: Stage = "plan", origin: str = "active", var: float | None
) -> Rubric:
    r = make_rubric(
        stage=stage,
        spec=RubricSpec(title=title, description=f"checks {title}"),
        origin="active" if origin == "active" else "persistent",
    )
    return r.model_copy(update={"variance": var})


def test_variance_population() -> None:
    assert variance([0.0, 1.0]) == 0.25
    assert variance([0.5]) == 0.0


def test_prunes_lowest_variance_over_cap() -> None:
    rs = [rubric(t, var=v) for t, v in (("a", 0.2), ("b", 0.0), ("c", 0.1), ("d", 0.3))]
    assert select_prunes(rs) == [rs[1].id]  # plan cap 3: one over, lowest variance goes


def test_within_cap_nothing_pruned() -> None:
    rs = [rubric(t, stage="review", var=0.0) for t in ("a", "b")]
    assert select_prunes(rs) == []


def test_persistent_never_pruned_and_not_counted() -> None:
    rs = [rubric("p", stage="answer", origin="persistent", var=0.0)]
    rs += [rubric(t, stage="answer", var=0.5) for t in "abc"]
    assert select_prunes(rs) == []
    rs.append(rubric("z", stage="answer", var=0.4))
    assert select_prunes(rs) == [rs[-1].id]


def test_ties_go_against_the_older_rubric() -> None:
    rs = [rubric(t, stage="research", var=0.1) for t in ("old", "mid", "new")]
    assert select_prunes(rs) == [rs[0].id]


def test_unmeasured_rubrics_are_kept() -> None:
    rs = [rubric(t, stage="research", var=None) for t in "abc"]
    assert select_prunes(rs) == []
    rs[2] = rs[2].model_copy(update={"variance": 0.9})
    assert select_prunes(rs) == [rs[2].id]


def test_custom_caps() -> None:
    rs = [rubric(t, var=float(i)) for i, t in enumerate("abcd")]
    caps: dict[Stage, int] = {"plan": 1, "research": 2, "review": 2, "answer": 3}
    assert select_prunes(rs, caps=caps) == [rs[0].id, rs[1].id, rs[2].id]


def test_rubric_id_is_derived_from_normalized_content() -> None:
    a = rubric("a", var=None)
    assert a.id == rubric("A ", var=None).id  # normalized title: same criterion, same id
    assert a.id != rubric("b", var=None).id


def test_a_pinned_rubric_is_never_pruned_the_next_unpinned_one_goes() -> None:
    rs = [rubric(t, var=v) for t, v in (("a", 0.0), ("b", 0.5), ("c", 0.3), ("d", 0.4))]
    assert select_prunes(rs) == [rs[0].id]  # plan cap 3: "a" has the lowest variance
    rs[0] = rs[0].model_copy(update={"pinned": True})
    assert select_prunes(rs) == [rs[2].id]  # pinned "a" stays; "c" is the next lowest


def test_pinned_rubrics_count_toward_the_cap() -> None:
    pinned = [rubric(t, stage="review", var=0.0).model_copy(update={"pinned": True}) for t in "ab"]
    other = rubric("c", stage="review", var=0.9)
    assert select_prunes([*pinned, other]) == [other.id]  # review cap 2, filled by the pins
    assert select_prunes(pinned) == []
    three = [*pinned, rubric("z", stage="review", var=0.0).model_copy(update={"pinned": True})]
    assert select_prunes(three) == []  # over the cap, but nothing unpinned to prune


def state(*, pinned: bool = False, pruned: bool = False, retired: bool = False) -> RubricState:
    return RubricState(pinned=pinned, pruned=pruned or retired, retired=retired)


def test_curation_rules() -> None:
    live = state()
    assert curation_conflict("pin", live) is None
    assert curation_conflict("retire", live) is None
    assert curation_conflict("edit", live) is None
    assert curation_conflict("unpin", live) == "cannot unpin: the rubric is not pinned"
    assert curation_conflict("unpin", state(pinned=True)) is None
    assert curation_conflict("pin", state(pinned=True)) == (
        "cannot pin: the rubric is already pinned"
    )
    retired = state(retired=True)
    actions: tuple[RubricAction, ...] = ("pin", "unpin", "retire", "edit")
    for action in actions:
        assert curation_conflict(action, retired) == f"cannot {action}: the rubric is retired"
    pruned = state(pruned=True)
    assert curation_conflict("retire", pruned) is None  # so it can never be re-activated
    for action in ("pin", "unpin", "edit"):
        message = curation_conflict(action, pruned)
        assert message is not None and "pruned" in message
