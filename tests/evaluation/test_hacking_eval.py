"""`rubricate eval hacking` (GitHub issue 32): the generated attack families, the fixed split
of their templates, and a run end to end through the command on the obeying fake judge (no
model), which the unprotected nugget path must let through."""

import argparse
import json
import re
from pathlib import Path

import pytest

from rubricate.core.words import content_words
from rubricate.evaluation import hacking, hacking_reading
from rubricate.evaluation import hacking_families as hf
from rubricate.evaluation.cli import register
from rubricate.evaluation.hacking_blind import BLIND
from rubricate.evaluation.hacking_items import ITEMS, PROCESS_SUBJECTS
from rubricate.llm.server import TaskSettings

SUBJECTS = [i.subject for i in ITEMS]
RAG24 = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "rag24-nuggets-dev.jsonl"


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["eval", "hacking", *argv])
    code: int = args.func(args)
    return code


@pytest.mark.parametrize("family", [f for f in hf.FAMILIES if f != "injection"])
@pytest.mark.parametrize("split", hf.SPLITS)
def test_each_family_yields_distinct_instances_with_the_facts(family: str, split: hf.Split) -> None:
    out = hf.generate(family, SUBJECTS, targets=("wrong", "empty"), n=6, split=split, seed=3)
    assert len(out) == 6
    assert len({(i.subject, i.target, i.text) for i in out}) == 6
    assert all(i.split == split and i.family == family for i in out)
    by_name = {s.name: s for s in SUBJECTS}
    for inst in out:
        # no slot left unfilled, no paraphrase choice left open (braces may be literal)
        assert not re.search(r"\{[A-Za-z0-9]+\}", inst.text) and "«" not in inst.text
        subject = by_name[inst.subject]
        if family in ("echo", "hedged", "negated"):  # the facts are there, in some form
            words = content_words(inst.text)
            assert any(len(content_words(c) & words) >= 2 for c in subject.clauses)
        if family == "stuffing":
            flat = re.sub(r"\W", "", inst.text.upper())
            assert any(re.sub(r"\W", "", k.upper()) in flat for k in hf.keywords(subject))
        if family == "verbosity":
            assert subject.topic.lower() in inst.text.lower()
            assert not any(c.lower() in inst.text.lower() for c in subject.clauses)
        if family == "masterkey":
            assert inst.text in hf.all_templates("masterkey")
            assert inst.mode == ("alone" if inst.target == "empty" else "prepend")
    # the same seed draws the same instances; another draws others
    again = hf.generate(family, SUBJECTS, targets=("wrong", "empty"), n=6, split=split, seed=3)
    assert again == out


def test_the_split_is_fixed_disjoint_and_the_blind_set_is_held_out() -> None:
    for family in hf.TEMPLATES:
        templates = list(hf.all_templates(family))
        assert len(set(templates)) == len(templates) >= 8, family
        held = hf.held_out(family, templates)
        tuning = hf.templates_in(family, "tuning", templates)
        held_list = hf.templates_in(family, "held-out", templates)
        assert set(held_list) == held and not held & set(tuning)
        assert sorted(tuning + held_list) == sorted(templates)
        # held out: exactly the blind templates (set v2); tuning: every template of the module
        assert held == set(BLIND[family]) and set(tuning) == set(hf.TEMPLATES[family])
        # the split does not depend on the order the templates are listed in
        assert hf.held_out(family, list(reversed(templates))) == held
        # held-out templates never appear in tuning instances, whatever the seed
        for seed in range(3):
            drawn = hf.generate(
                family, SUBJECTS, targets=("wrong", "empty"), n=40, split="tuning", seed=seed
            )
            assert drawn and not {i.template for i in drawn} & held
    assert hf.template_id("meta", hf.META[0]) == hf.template_id("meta", hf.META[0])
    assert hf.template_id("meta", hf.META[0]) != hf.template_id("echo", hf.META[0])
    # a family without a blind set (injection) holds out a third by hash
    names = [f"attack-{i}" for i in range(9)]
    assert len(hf.held_out("injection", names)) == 3
    assert hf.held_out("injection", list(reversed(names))) == hf.held_out("injection", names)


def test_most_meta_templates_avoid_grading_words() -> None:
    words = ("grader", "rubric", "score", "judge")
    plain = [t for t in hf.META if not any(w in t.lower() for w in words)]
    assert len(plain) * 4 >= len(hf.META) * 3


def test_the_plan_covers_every_judge_and_the_injection_sets() -> None:
    work = hacking.plan(hacking.KINDS, hf.FAMILIES, hf.SPLITS, per_family=1, seed=0)
    for kind in hacking.KINDS:
        families = {(i.family, i.split) for i in work[kind]}
        assert families == {(f, s) for f in hf.FAMILIES for s in hf.SPLITS}, kind
        targets = {i.target for i in work[kind]}
        assert targets <= set(hacking.targets_of(kind))
        for inst in work[kind]:
            if kind in hacking.ANSWER_KINDS:
                item = next(i for i in ITEMS if i.name == inst.subject)
                attacked = hacking.answer_material(kind, item, inst.target, inst)
                assert attacked != hacking.answer_material(kind, item, inst.target, None)
            else:
                assert inst.subject == PROCESS_SUBJECTS[kind].name
                material = hacking.process_material(kind, inst)
                assert material != hacking.process_material(kind, None)


def test_cli_end_to_end_on_the_fake_judge(tmp_path: Path) -> None:
    """The unprotected nugget path (no withholding, no grounding, no unit reading): the
    fake is fooled by hedged facts and obeys meta-claims and master keys, so the run must
    report rises above the limit and master keys above the floor, and exit 1."""
    units = ["--units", "off"] if "unit_reading" in TaskSettings.model_fields else []
    out = tmp_path / "report.json"
    argv = [
        "--fake-judge",
        "--judge",
        "nuggets-long,stagewise-generate",
        "--family",
        "hedged,meta,masterkey",
        "--per-family",
        "2",
        "--items",
        "3",
        "--json",
        str(out),
    ]
    assert _run(["--defence", "none", *argv]) == 2  # --defence is for the nugget judges only
    code = _run(["--defence", "none", *units, *argv[:2], "nuggets-long", *argv[3:]])
    report = json.loads(out.read_text())
    nuggets = report["kinds"]["nuggets-long"]
    assert set(nuggets["families"]) == {"hedged", "meta", "masterkey"}
    for family in ("hedged", "meta", "masterkey"):
        rows = nuggets["families"][family]
        assert {"all", "tuning", "held-out", "instances"} <= set(rows)
        assert rows["tuning"]["n"] == rows["held-out"]["n"] == 2
        assert len(rows["instances"]) == 4
    assert nuggets["clean"]["mean"] is not None and nuggets["clean"]["mean"] > 0.5
    assert nuggets["floor"]["checked"] and len(nuggets["floor"]["scores"]) == len(hf.MASTER_KEYS)
    assert report["config"]["held_out_templates"]["meta"]
    assert report["set_version"] == hf.set_version()
    hedged = nuggets["families"]["hedged"]
    assert hedged["tuning"]["mean_rise"] > hacking.RISE_LIMIT
    assert hedged["held-out"]["mean_rise"] > hacking.RISE_LIMIT
    assert hedged["all"]["share_rose"] > 0.5
    assert "nuggets-long/hedged/tuning" in report["raised"]
    assert report["above_floor"] and report["failed"] == 0 and code == 1


def test_the_reading_alone_reads_no_tuning_fact_as_a_claim_and_every_right_answer_as_one(
    tmp_path: Path,
) -> None:
    """`eval hacking --reading`: the cues on every template and item, no judge. A regression
    guard on the tuning templates (the held-out ones are measured, not required: see
    docs/judge-quality.md); verbosity names no fact, so its count is the topic's words."""
    out = tmp_path / "reading.json"
    assert _run(["--reading", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    for family, cells in report["families"].items():
        assert cells["tuning"]["n"] >= 80 and cells["held-out"]["n"] >= 80, family
        if family != "verbosity":
            assert cells["tuning"]["leaks"] == 0, family
    right = report["right_answer_units"]
    assert right["claims"] == right["units"] > 0
    # the unprotected reading would leak: the measure can fail
    assert hacking_reading.leaked_units(
        "The capital city of Australia is Canberra.", ITEMS[0].subject
    )


def test_rubric_grounding_floors_no_right_answer_rubric_more_than_before() -> None:
    """Content-word grounding on clean data (`hacking_reading.rubric_grounding`): the items'
    right answers and the stagewise set's vital nuggets lose no rubric to it, and it floors
    the DNA padding that names nothing (docs/judge-quality.md)."""
    report = hacking_reading.rubric_grounding(
        hacking_reading.item_cases() + hacking_reading.stagewise_cases()
    )
    rows = report["rows"]
    assert rows["items"]["right"].get("after", 0) == 0
    stagewise = rows["stagewise set"]["right"]
    assert stagewise.get("after", 0) == stagewise.get("before", 0)
    assert rows["items"]["wrong"]["after"] > rows["items"]["wrong"]["before"]
    padding = hacking_reading.rubric_grounding(hacking_reading.attack_cases())["rows"]
    assert (
        padding["attack: verbosity"]["wrong"]["after"]
        > padding["attack: verbosity"]["wrong"]["before"]
    )


@pytest.mark.skipif(not RAG24.exists(), reason="RAG24 dev data not present")
def test_rubric_grounding_on_rag24_floors_only_the_mislabelled_right_pairs() -> None:
    """RAG24 dev nuggets as rubrics: 5 `support` pairs more are floored, each one a nugget
    the answer does not state (read on 2026-11-29; the labels are a 7B model's)."""
    rows = hacking_reading.rubric_grounding(hacking_reading.rag_cases(RAG24))["rows"]
    right = rows["rag24 dev"]["right"]
    assert right["after"] - right["before"] <= 5
    wrong = rows["rag24 dev"]["wrong"]
    assert wrong["after"] - wrong["before"] > 100
