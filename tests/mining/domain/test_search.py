"""The mining tree search (Search-Gen-V §3.2, Alg. 1) against a fake retriever and a fake
LLM: both are fakes defined here, answering from tables."""

from dataclasses import dataclass, field

import pytest

from rubricate.mining.domain import search as mining
from rubricate.mining.domain.search import (
    Hit,
    MergeGroup,
    MiningLimits,
    MiningState,
    RewrittenQuery,
)

Q = "How does the json module encode Python objects?"

NUGGET_A = "The json module encodes Python dictionaries as JSON objects with string keys only."
NUGGET_A2 = "The json module encodes Python dictionaries as JSON objects whose keys are strings."
NUGGET_B = "The json.dumps function serializes a Python object to a JSON formatted string value."
NUGGET_C = (
    "Passing indent to json.dumps pretty-prints JSON output with the given indentation level."
)


def hit(pid: str, score: float = 0.9) -> Hit:
    return Hit(passage_id=pid, text=f"text of {pid}", score=score)


@dataclass
class FakeRetriever:
    """A fake: hits per query text (unknown queries retrieve nothing)."""

    table: dict[str, list[Hit]]
    calls: list[str] = field(default_factory=list)

    def __call__(self, action: mining.Retrieve) -> list[Hit]:
        self.calls.append(action.query)
        return list(self.table.get(action.query, []))


@dataclass
class FakeLLM:
    """A fake judge: rewrites per passage id, duplicates by text, temporal failures by
    passage id, nuggets per passage id, merges and labels by rule."""

    rewrites: dict[str, list[str]] = field(default_factory=dict)
    duplicates: set[str] = field(default_factory=set)
    stale: set[str] = field(default_factory=set)
    nuggets: dict[str, list[str]] = field(default_factory=dict)
    merges: list[tuple[list[str], str]] = field(default_factory=list)
    vital: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    def answer(self, state: MiningState, action: object) -> object:
        if isinstance(action, mining.TemporalCheck):
            self.calls.append("temporal")
            return [h.passage_id not in self.stale for h in action.passages]
        if isinstance(action, mining.Rewrite):
            self.calls.append("rewrite")
            pid = state.passages[action.passage_node].passage_id
            return [
                RewrittenQuery(text=t, operations=["synonym_replacement"])
                for t in self.rewrites.get(pid, [])
            ]
        if isinstance(action, mining.DuplicateCheck):
            self.calls.append(f"duplicate:{action.query}")
            return action.query in self.duplicates
        if isinstance(action, mining.Extract):
            self.calls.append("extract")
            return [
                list(self.nuggets.get(state.passages[p.node].passage_id, []))
                for p in action.passages
            ]
        if isinstance(action, mining.Merge):
            self.calls.append("merge")
            groups = []
            for members, text in self.merges:
                ids = [action.nuggets.index(m) for m in members if m in action.nuggets]
                if len(ids) == len(members):
                    groups.append(MergeGroup(text=text, ids=ids))
            return groups
        if isinstance(action, mining.Label):
            self.calls.append("label")
            return ["vital" if n in self.vital else "okay" for n in action.nuggets]
        raise AssertionError(f"unexpected action {action!r}")


def run(
    state: MiningState,
    retriever: FakeRetriever,
    llm: FakeLLM,
    *,
    max_steps: int = 10_000,
) -> MiningState:
    """Drive the state machine; round-trip the state through JSON at every step, as a job
    that stores its tree after every step does."""
    for _ in range(max_steps):
        state, action = mining.next_action(state)
        if action is None:
            return state
        result = (
            retriever(action) if isinstance(action, mining.Retrieve) else llm.answer(state, action)
        )
        state = mining.apply_result(state, action, result)
        state = MiningState.model_validate_json(state.model_dump_json())
    return state


def limits(**kw: object) -> MiningLimits:
    return MiningLimits.model_validate({"similarity_threshold": 0.5, **kw})


def test_query_stops_when_it_retrieves_nothing_new() -> None:
    """Stopping rule (i): the rewrite retrieves only passages already in the tree."""
    retriever = FakeRetriever({Q: [hit("p1"), hit("p2")], "json encoder class": [hit("p1")]})
    llm = FakeLLM(rewrites={"p1": ["json encoder class"]})
    state = run(mining.new_state(question=Q, limits=limits()), retriever, llm)
    rewrite = state.queries[1]
    assert rewrite.text == "json encoder class"
    assert rewrite.status == "exhausted" and rewrite.retrieved == 1 and rewrite.children == []
    assert [p.passage_id for p in state.passages] == ["p1", "p2"]
    assert state.passages[0].status == "expanded"
    assert state.passages[1].status == "saturated"  # no rewrites at all
    assert state.stop_reason == "exhausted"
    assert state.phase == "done"
    assert mining.progress(state).nodes_expanded == 2


def test_passage_stops_when_every_rewrite_duplicates_an_existing_query() -> None:
    """Stopping rule (ii): the judge calls one rewrite a duplicate; the other repeats the
    question word for word and never reaches the judge."""
    retriever = FakeRetriever({Q: [hit("p1")], "json module encoding": [hit("p9")]})
    llm = FakeLLM(
        rewrites={
            "p1": ["json module encoding", "  how does the JSON module encode python objects "]
        },
        duplicates={"json module encoding"},
    )
    state = run(mining.new_state(question=Q, limits=limits()), retriever, llm)
    assert state.passages[0].status == "saturated"
    assert state.passages[0].rewrites_proposed == 2
    assert len(state.queries) == 1
    assert state.counters.duplicate_queries == 2
    assert [c for c in llm.calls if c.startswith("duplicate")] == ["duplicate:json module encoding"]
    assert "json module encoding" not in retriever.calls


def test_tree_alternates_queries_and_passages_with_provenance() -> None:
    retriever = FakeRetriever(
        {
            Q: [hit("p1", 0.8), hit("low", 0.3)],
            "json dumps indent": [hit("p1"), hit("p2", 0.7)],
            "json dumps indent separators": [hit("p3")],
        }
    )
    llm = FakeLLM(
        rewrites={"p1": ["json dumps indent"], "p2": ["json dumps indent separators"]},
        nuggets={"p1": [NUGGET_B], "p2": [NUGGET_C], "p3": []},
        vital={NUGGET_B},
    )
    state = run(mining.new_state(question=Q, limits=limits(max_depth=3)), retriever, llm)
    # the passage under the threshold never entered the tree
    assert [p.passage_id for p in state.passages] == ["p1", "p2", "p3"]
    p2, p3 = state.passages[1], state.passages[2]
    assert (p2.parent, p2.depth) == (1, 1) and (p3.parent, p3.depth) == (2, 2)
    assert state.queries[1].parent == 0 and state.queries[2].parent == 1
    mined = mining.mined_nuggets(state)
    assert [(n.text, n.importance) for n in mined] == [(NUGGET_B, "vital"), (NUGGET_C, "okay")]
    assert mined[1].provenance[0].passage_id == "p2"
    assert mined[1].provenance[0].query_path == [Q, "json dumps indent"]
    assert mining.query_path(state, 2) == [Q, "json dumps indent", "json dumps indent separators"]


def test_temporal_check_discards_passages_per_query() -> None:
    retriever = FakeRetriever({Q: [hit("p1"), hit("old")]})
    llm = FakeLLM(stale={"old"})
    state = run(mining.new_state(question=Q, limits=limits()), retriever, llm)
    assert [p.passage_id for p in state.passages] == ["p1"]
    assert state.counters.passages_examined == 2
    assert state.counters.temporal_rejections == 1


def test_similarity_threshold_replaces_top_k() -> None:
    retriever = FakeRetriever(
        {Q: [hit(f"p{i}", 0.5 + i / 100) for i in range(8)] + [hit("x", 0.49)]}
    )
    state = run(mining.new_state(question=Q, limits=limits(max_depth=0)), retriever, FakeLLM())
    assert len(state.passages) == 8
    assert state.passages[0].passage_id == "p7"  # best first
    nothing = run(
        mining.new_state(question=Q, limits=limits(similarity_threshold=0.95)),
        retriever,
        FakeLLM(),
    )
    assert nothing.passages == [] and nothing.queries[0].status == "exhausted"


def test_depth_limit_and_node_budget() -> None:
    table = {Q: [hit("p1"), hit("p2"), hit("p3")]}
    rewrites = {}
    for i in range(1, 40):
        table[f"query {i}"] = [hit(f"p{3 * i + 1}"), hit(f"p{3 * i + 2}")]
        rewrites[f"p{i}"] = [f"query {i}"]
    retriever, llm = FakeRetriever(table), FakeLLM(rewrites=rewrites)

    shallow = run(mining.new_state(question=Q, limits=limits(max_depth=0)), retriever, llm)
    assert {p.status for p in shallow.passages} == {"depth_limit"}
    assert len(shallow.queries) == 1 and "rewrite" not in llm.calls

    budget = run(
        mining.new_state(question=Q, limits=limits(max_depth=10, max_nodes=12)), retriever, llm
    )
    assert mining.node_count(budget) == 12
    assert budget.stop_reason == "max_nodes"
    assert all(p.extracted for p in budget.passages)  # kept passages are still mined


def test_extraction_keeps_self_contained_statements_of_ten_to_twenty_words() -> None:
    retriever = FakeRetriever({Q: [hit("p1"), hit("p2"), hit("p3")]})
    llm = FakeLLM(
        nuggets={
            "p1": [
                NUGGET_A,
                "Too short to count.",
                "It encodes dictionaries as JSON objects with string keys only.",
            ],
            "p2": [NUGGET_A.upper(), " ".join(["word"] * 30)],
            "p3": [],  # nothing fits: no nugget
        }
    )
    state = run(mining.new_state(question=Q, limits=limits(max_depth=0)), retriever, llm)
    assert [n.text for n in state.merged] == [NUGGET_A]
    assert state.merged[0].sources == [0, 1]  # the same statement from two passages
    assert state.counters.nuggets_rejected == 3


def test_an_invalid_extraction_is_flagged_not_fatal() -> None:
    """The executor passes None for a passage whose judge output stayed invalid."""
    state = mining.new_state(question=Q, limits=limits(max_depth=0))
    state, action = mining.next_action(state)
    state = mining.apply_result(state, action, [hit("p1"), hit("p2")])
    state, action = mining.next_action(state)
    state = mining.apply_result(state, action, [True, True])
    state, action = mining.next_action(state)
    assert isinstance(action, mining.Extract) and len(action.passages) == 2
    state = mining.apply_result(state, action, [None, [NUGGET_B]])
    assert [p.extraction_failed for p in state.passages] == [True, False]
    assert state.counters.extraction_failures == 1
    assert mining.progress(state).extraction_failures == 1
    assert [n.text for n in state.nuggets] == [NUGGET_B]


def test_merging_across_passages_and_labels() -> None:
    merged_text = "The json module encodes Python dictionaries as JSON objects with string keys."
    retriever = FakeRetriever({Q: [hit("p1"), hit("p2")]})
    llm = FakeLLM(
        nuggets={"p1": [NUGGET_A, NUGGET_B], "p2": [NUGGET_A2]},
        merges=[([NUGGET_A, NUGGET_A2], merged_text)],
        vital={merged_text},
    )
    state = run(mining.new_state(question=Q, limits=limits(max_depth=0)), retriever, llm)
    mined = mining.mined_nuggets(state)
    assert [(n.text, n.importance) for n in mined] == [(merged_text, "vital"), (NUGGET_B, "okay")]
    assert sorted(p.passage_id for p in mined[0].provenance) == ["p1", "p2"]
    assert llm.calls.count("merge") == 1 and llm.calls.count("label") == 1


def test_an_overlong_merge_keeps_the_originals() -> None:
    retriever = FakeRetriever({Q: [hit("p1"), hit("p2")]})
    llm = FakeLLM(
        nuggets={"p1": [NUGGET_A], "p2": [NUGGET_A2]},
        merges=[([NUGGET_A, NUGGET_A2], " ".join(["long"] * 40))],
    )
    state = run(mining.new_state(question=Q, limits=limits(max_depth=0)), retriever, llm)
    assert sorted(n.text for n in state.merged) == sorted([NUGGET_A, NUGGET_A2])


def test_resuming_from_the_stored_state_gives_the_same_result() -> None:
    retriever = FakeRetriever(
        {Q: [hit("p1"), hit("p2")], "json dumps": [hit("p3")], "json loads": [hit("p4")]}
    )

    def llm() -> FakeLLM:
        return FakeLLM(
            rewrites={"p1": ["json dumps"], "p2": ["json loads"]},
            nuggets={"p1": [NUGGET_A], "p3": [NUGGET_B], "p4": [NUGGET_C]},
            vital={NUGGET_B},
        )

    whole = run(mining.new_state(question=Q, limits=limits()), retriever, llm())
    for cut in range(1, 12):
        part = run(mining.new_state(question=Q, limits=limits()), retriever, llm(), max_steps=cut)
        stored = part.model_dump_json()  # the worker dies here
        resumed = run(MiningState.model_validate_json(stored), retriever, llm())
        assert resumed == whole


def test_results_that_do_not_fit_the_action_are_rejected() -> None:
    state = mining.new_state(question=Q, limits=limits())
    state, action = mining.next_action(state)
    assert isinstance(action, mining.Retrieve)
    state = mining.apply_result(state, action, [hit("p1")])
    state, action = mining.next_action(state)
    assert isinstance(action, mining.TemporalCheck)
    with pytest.raises(mining.MiningProtocolError):
        mining.apply_result(state, action, [True, False])
    with pytest.raises(mining.MiningProtocolError):
        mining.apply_result(state, action, "yes")


def test_new_state_rejects_a_blank_question() -> None:
    with pytest.raises(ValueError):
        mining.new_state(question="   ")
