"""Nugget mining (Search-Gen-V §3.2, Algorithm 1, App. C) as a pure, step-wise state machine.

The search tree alternates query and passage nodes: a query node's children are the passages
it retrieved (above a similarity threshold, temporally consistent with the query), a passage
node's children are the queries rewritten from it (not duplicates of queries in the tree).
Two stopping rules end a path: (i) a query that retrieves no new, unseen passage; (ii) a
passage whose rewrites all duplicate existing queries. Then nuggets are extracted from every
passage node, merged across passages, and labelled vital / okay.

No I/O here. The caller loops::

    state, action = next_action(state)       # None when the job is done
    result = <run the action: retrieval, or one judge task per item>
    state = apply_result(state, action, result)

`MiningState` is a pydantic model, so it is stored as JSON after every step and a job
resumes from it: an action whose result was never applied is simply asked for again.
"""

import re
from collections.abc import Sequence
from typing import Annotated, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rubricate.core.normalize import normalize_question
from rubricate_client.schemas.mining import MinedNugget, Provenance
from rubricate_client.schemas.nuggets import Importance

# --- defaults -----------------------------------------------------------------------------

# Search-Gen-V App. C (query rewriting): the seven executable rewriting operations.
REWRITE_OPERATIONS: Final = (
    "synonym_replacement",
    "hypernym_replacement",
    "hyponym_replacement",
    "entity_name_fuzzification",
    "entity_name_specification",
    "interrogative_switch",
    "constraint_modification",
)
# Search-Gen-V App. C: at most three operations combined per rewrite.
MAX_COMBINED_OPERATIONS: Final = 3
# Search-Gen-V §3.2 / App. C: a nugget is a statement of about 10–20 words; merged nuggets
# must not exceed 20 words.
NUGGET_MIN_WORDS: Final = 10
NUGGET_MAX_WORDS: Final = 20
NUGGET_WORD_SLACK: Final = 3
"""Ours: "about 10–20 words" accepts 7–23 words; the prompt asks for 10–20."""
# Search-Gen-V §3.2: binary importance labels.
IMPORTANCE_LABELS: Final = ("vital", "okay")

# Not fixed by the paper (ours, all overridable per job):
DEFAULT_SIMILARITY_THRESHOLD: Final = 0.45
"""Cosine similarity (all-MiniLM-L6-v2) a passage needs to count as retrieved. §3.2 derives
the threshold from relevance labels; without labels for a corpus this default applies."""
DEFAULT_MAX_DEPTH: Final = 3
"""Rewrite hops from the question: passages retrieved at this depth are not rewritten."""
DEFAULT_MAX_NODES: Final = 60
"""Query plus passage nodes in the tree."""
DEFAULT_REWRITES_PER_PASSAGE: Final = 3
"""App. C's `max_num_new_queries`."""
DEFAULT_MAX_NUGGETS_PER_PASSAGE: Final = 5
"""App. C's `creator_max_nuggets`."""
DEFAULT_MAX_HITS_PER_QUERY: Final = 20
"""A safety cap on one retrieval; the threshold, not this cap, decides what is relevant."""
DUPLICATE_CONTEXT_QUERIES: Final = 30
"""Existing queries shown to the duplicate check: those sharing the most words."""
EXTRACT_BATCH: Final = 4
MERGE_BATCH: Final = 20
LABEL_BATCH: Final = 20

_T = TypeVar("_T")

Operation = Literal[
    "synonym_replacement",
    "hypernym_replacement",
    "hyponym_replacement",
    "entity_name_fuzzification",
    "entity_name_specification",
    "interrogative_switch",
    "constraint_modification",
]
Phase = Literal["search", "extract", "merge", "label", "done"]
QueryStatus = Literal["pending", "checking", "expanded", "exhausted"]
PassageStatus = Literal["queued", "expanding", "expanded", "saturated", "depth_limit", "unexpanded"]
StopReason = Literal["exhausted", "max_nodes"]


class MiningProtocolError(ValueError):
    """A result that does not fit the action it answers (a caller bug, never model output)."""


# --- limits and state ---------------------------------------------------------------------


class MiningLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=0, le=20)
    """Rewrite hops from the question."""
    max_nodes: int = Field(default=DEFAULT_MAX_NODES, ge=2, le=10_000)
    """Query plus passage nodes in the tree."""
    rewrites_per_passage: int = Field(default=DEFAULT_REWRITES_PER_PASSAGE, ge=0, le=10)
    similarity_threshold: float = Field(default=DEFAULT_SIMILARITY_THRESHOLD, ge=-1.0, le=1.0)
    max_hits_per_query: int = Field(default=DEFAULT_MAX_HITS_PER_QUERY, ge=1, le=500)
    max_nuggets_per_passage: int = Field(default=DEFAULT_MAX_NUGGETS_PER_PASSAGE, ge=1, le=30)


class Hit(BaseModel):
    """A retrieved passage: corpus passage id, text, similarity to the query."""

    passage_id: str
    text: str
    score: float


class QueryNode(BaseModel):
    id: int
    text: str
    parent: int | None
    """The passage node it was rewritten from; None for the question itself."""
    depth: int
    operations: list[str] = Field(default_factory=list)
    status: QueryStatus = "pending"
    retrieved: int = 0
    """Hits at or above the threshold."""
    hits: list[Hit] = Field(default_factory=list)
    """New hits awaiting the temporal check."""
    children: list[int] = Field(default_factory=list)


class PassageNode(BaseModel):
    id: int
    passage_id: str
    text: str
    score: float
    parent: int
    """The query node that retrieved it."""
    depth: int
    status: PassageStatus = "queued"
    rewrites_proposed: int = 0
    children: list[int] = Field(default_factory=list)
    extracted: bool = False
    extraction_failed: bool = False


class RewriteCandidate(BaseModel):
    text: str
    operations: list[str] = Field(default_factory=list)


class Nugget(BaseModel):
    text: str
    sources: list[int]
    """Passage node ids it was extracted from."""
    importance: Importance | None = None


class Counters(BaseModel):
    nodes_expanded: int = 0
    passages_examined: int = 0
    """Retrieved unseen passages the temporal check looked at."""
    temporal_rejections: int = 0
    duplicate_queries: int = 0
    nuggets_extracted: int = 0
    extraction_failures: int = 0
    """Passages whose extraction output stayed invalid after the repair retry (flagged)."""
    nuggets_rejected: int = 0
    """Extracted statements outside the length rule or not self-contained."""
    merged_away: int = 0


class MiningState(BaseModel):
    version: Literal[1] = 1
    question: str
    limits: MiningLimits
    phase: Phase = "search"
    queries: list[QueryNode]
    passages: list[PassageNode] = Field(default_factory=list)
    queue: list[int] = Field(default_factory=list)
    """W: passage nodes waiting to be expanded, first in first out."""
    current: int | None = None
    """The passage node being expanded."""
    candidates: list[RewriteCandidate] = Field(default_factory=list)
    """The current passage's rewrites awaiting the duplicate check."""
    nuggets: list[Nugget] = Field(default_factory=list)
    """Extracted nuggets (exact duplicates already folded together)."""
    merge_batches: list[list[int]] = Field(default_factory=list)
    merge_next: int = 0
    merged: list[Nugget] = Field(default_factory=list)
    label_next: int = 0
    stop_reason: StopReason | None = None
    counters: Counters = Field(default_factory=Counters)


def new_state(*, question: str, limits: MiningLimits | None = None) -> MiningState:
    text = question.strip()
    if not text:
        raise ValueError("question must not be blank")
    root = QueryNode(id=0, text=text, parent=None, depth=0)
    return MiningState(question=text, limits=limits or MiningLimits(), queries=[root])


# --- actions ------------------------------------------------------------------------------


class Retrieve(BaseModel):
    kind: Literal["retrieve"] = "retrieve"
    query_node: int
    query: str
    threshold: float
    limit: int


class TemporalCheck(BaseModel):
    """One judgment per (query, passage): does the passage meet the query's time scope?"""

    kind: Literal["temporal_check"] = "temporal_check"
    query_node: int
    query: str
    passages: list[Hit]


class Rewrite(BaseModel):
    kind: Literal["rewrite"] = "rewrite"
    passage_node: int
    question: str
    query: str
    passage: str
    max_queries: int


class DuplicateCheck(BaseModel):
    kind: Literal["duplicate_check"] = "duplicate_check"
    query: str
    existing: list[str]


class PassageRef(BaseModel):
    node: int
    text: str


class Extract(BaseModel):
    kind: Literal["extract"] = "extract"
    question: str
    passages: list[PassageRef]
    max_nuggets: int


class Merge(BaseModel):
    kind: Literal["merge"] = "merge"
    question: str
    nuggets: list[str]


class Label(BaseModel):
    kind: Literal["label"] = "label"
    question: str
    nuggets: list[str]


MiningAction = Retrieve | TemporalCheck | Rewrite | DuplicateCheck | Extract | Merge | Label
Action = Annotated[MiningAction, Field(discriminator="kind")]
"""An action as data (e.g. to log or store it)."""


class RewrittenQuery(BaseModel):
    text: str
    operations: list[str] = Field(default_factory=list)


class MergeGroup(BaseModel):
    text: str
    ids: list[int]
    """0-based positions in the Merge action's `nuggets`."""


# --- helpers ------------------------------------------------------------------------------

_WORD = re.compile(r"[\w'’-]+")
_PRONOUN_START = re.compile(r"^(it|its|they|their|them|this|these|those|he|she|his|her)\b", re.I)


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def acceptable_nugget(text: str) -> bool:
    """About 10–20 words, and not opening with a pronoun (a nugget stands on its own)."""
    n = word_count(text)
    if not NUGGET_MIN_WORDS - NUGGET_WORD_SLACK <= n <= NUGGET_MAX_WORDS + NUGGET_WORD_SLACK:
        return False
    return _PRONOUN_START.match(text.strip()) is None


def _norm(text: str) -> str:
    return re.sub(r"[^\w ]", "", normalize_question(text)).strip()


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _overlap(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def node_count(state: MiningState) -> int:
    return len(state.queries) + len(state.passages)


def _room(state: MiningState) -> int:
    return max(0, state.limits.max_nodes - node_count(state))


def query_path(state: MiningState, passage_node: int) -> list[str]:
    """Query texts from the question down to the query that retrieved the passage."""
    path: list[str] = []
    query: QueryNode | None = state.queries[state.passages[passage_node].parent]
    while query is not None:
        path.append(query.text)
        query = None if query.parent is None else state.queries[state.passages[query.parent].parent]
    return list(reversed(path))


def _duplicate_context(state: MiningState, candidate: str) -> list[str]:
    words = _words(candidate)
    ranked = sorted(
        state.queries, key=lambda q: (-_overlap(words, _words(q.text)), q.id)
    )  # stable: most overlapping first, then tree order
    return [q.text for q in ranked[:DUPLICATE_CONTEXT_QUERIES]]


def _merge_batches(nuggets: Sequence[Nugget], size: int) -> list[list[int]]:
    """Greedy batches of word-overlapping nuggets, so likely duplicates meet in one call."""
    words = [_words(n.text) for n in nuggets]
    left = list(range(len(nuggets)))
    batches: list[list[int]] = []
    while left:
        seed = left.pop(0)
        left.sort(key=lambda i: (-_overlap(words[seed], words[i]), i))
        batch = [seed, *left[: size - 1]]
        left = left[size - 1 :]
        left.sort()
        batches.append(sorted(batch))
    return batches


# --- the step function --------------------------------------------------------------------


def next_action(state: MiningState) -> tuple[MiningState, MiningAction | None]:
    """The next external step, after any internal transitions (returned in the new state).

    None when the job is done; then `state.phase == "done"`.
    """
    s = state.model_copy(deep=True)
    while True:
        if s.phase == "search":
            action = _search_action(s)
            if action is not None:
                return s, action
            s.phase = "extract"
        if s.phase == "extract":
            pending = [p for p in s.passages if not p.extracted]
            if pending:
                return s, Extract(
                    question=s.question,
                    passages=[PassageRef(node=p.id, text=p.text) for p in pending[:EXTRACT_BATCH]],
                    max_nuggets=s.limits.max_nuggets_per_passage,
                )
            s.phase = "merge"
            s.merge_batches = _merge_batches(s.nuggets, MERGE_BATCH)
            s.merge_next = 0
        if s.phase == "merge":
            while s.merge_next < len(s.merge_batches):
                batch = s.merge_batches[s.merge_next]
                if len(batch) > 1:
                    return s, Merge(question=s.question, nuggets=[s.nuggets[i].text for i in batch])
                s.merged.append(s.nuggets[batch[0]].model_copy())
                s.merge_next += 1
            s.phase = "label"
        if s.phase == "label":
            if s.label_next < len(s.merged):
                chunk = s.merged[s.label_next : s.label_next + LABEL_BATCH]
                return s, Label(question=s.question, nuggets=[n.text for n in chunk])
            s.phase = "done"
        return s, None


def _search_action(s: MiningState) -> Retrieve | TemporalCheck | Rewrite | DuplicateCheck | None:
    for q in s.queries:
        if q.status == "pending":
            return Retrieve(
                query_node=q.id,
                query=q.text,
                threshold=s.limits.similarity_threshold,
                limit=s.limits.max_hits_per_query,
            )
    for q in s.queries:
        if q.status == "checking":
            return TemporalCheck(query_node=q.id, query=q.text, passages=list(q.hits))
    if s.current is not None:
        if s.candidates and _room(s) == 0:
            s.candidates.clear()
            s.stop_reason = "max_nodes"
        if s.candidates:
            text = s.candidates[0].text
            return DuplicateCheck(query=text, existing=_duplicate_context(s, text))
        passage = s.passages[s.current]
        # stopping rule (ii): every rewrite duplicated an existing query (or none was made)
        passage.status = "expanded" if passage.children else "saturated"
        s.counters.nodes_expanded += 1
        s.current = None
    while s.queue:
        if _room(s) == 0:
            s.stop_reason = "max_nodes"
            for pid in s.queue:
                s.passages[pid].status = "unexpanded"
            s.queue.clear()
            break
        pid = s.queue.pop(0)
        passage = s.passages[pid]
        if passage.depth >= s.limits.max_depth or s.limits.rewrites_per_passage == 0:
            passage.status = "depth_limit"
            continue
        passage.status = "expanding"
        s.current = pid
        return Rewrite(
            passage_node=pid,
            question=s.question,
            query=s.queries[passage.parent].text,
            passage=passage.text,
            max_queries=s.limits.rewrites_per_passage,
        )
    if s.stop_reason is None:
        s.stop_reason = "exhausted"
    return None


def apply_result(
    state: MiningState,
    action: MiningAction,
    result: object,
) -> MiningState:
    """The state after `action` produced `result` (see each `_apply_*` for the result type)."""
    s = state.model_copy(deep=True)
    if isinstance(action, Retrieve):
        _apply_retrieve(s, action, _list_of(result, Hit, "retrieve"))
    elif isinstance(action, TemporalCheck):
        _apply_temporal(s, action, _list_of(result, bool, "temporal_check"))
    elif isinstance(action, Rewrite):
        _apply_rewrite(s, action, _list_of(result, RewrittenQuery, "rewrite"))
    elif isinstance(action, DuplicateCheck):
        if not isinstance(result, bool):
            raise MiningProtocolError("duplicate_check: result must be a bool")
        _apply_duplicate(s, action, result)
    elif isinstance(action, Extract):
        if not isinstance(result, list) or not all(
            item is None or isinstance(item, list) for item in result
        ):
            raise MiningProtocolError("extract: result must be a list of nugget lists or None")
        if len(result) != len(action.passages):
            raise MiningProtocolError("extract: one nugget list per passage is required")
        _apply_extract(
            s, action, [None if items is None else [str(x) for x in items] for items in result]
        )
    elif isinstance(action, Merge):
        _apply_merge(s, action, _list_of(result, MergeGroup, "merge"))
    else:
        labels = _list_of(result, str, "label")
        if len(labels) != len(action.nuggets) or any(x not in IMPORTANCE_LABELS for x in labels):
            raise MiningProtocolError("label: one label (vital | okay) per nugget is required")
        _apply_label(s, labels)
    return s


def _list_of(value: object, kind: type[_T], what: str) -> list[_T]:
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise MiningProtocolError(f"{what}: result must be a list of {kind.__name__}")
    return value


def _expect(s: MiningState, phase: Phase, what: str) -> None:
    if s.phase != phase:
        raise MiningProtocolError(f"{what}: the job is in phase {s.phase!r}")


def _apply_retrieve(s: MiningState, action: Retrieve, hits: list[Hit]) -> None:
    _expect(s, "search", "retrieve")
    query = s.queries[action.query_node]
    if query.status != "pending":
        raise MiningProtocolError(f"retrieve: query node {query.id} is {query.status}")
    seen = {p.passage_id for p in s.passages}
    relevant: list[Hit] = []
    batch: set[str] = set()
    for hit in sorted(hits, key=lambda h: -h.score):
        if hit.score < s.limits.similarity_threshold or hit.passage_id in batch:
            continue
        batch.add(hit.passage_id)
        relevant.append(hit)
    relevant = relevant[: s.limits.max_hits_per_query]
    query.retrieved = len(relevant)
    new = [h for h in relevant if h.passage_id not in seen]
    if not new:
        query.status = "exhausted"  # stopping rule (i): nothing new, nothing unseen
        return
    query.hits = new
    query.status = "checking"


def _apply_temporal(s: MiningState, action: TemporalCheck, verdicts: list[bool]) -> None:
    _expect(s, "search", "temporal_check")
    query = s.queries[action.query_node]
    if query.status != "checking" or len(verdicts) != len(query.hits):
        raise MiningProtocolError("temporal_check: one verdict per pending hit is required")
    s.counters.passages_examined += len(query.hits)
    s.counters.temporal_rejections += sum(1 for ok in verdicts if not ok)
    seen = {p.passage_id for p in s.passages}
    kept = [
        h for h, ok in zip(query.hits, verdicts, strict=True) if ok and h.passage_id not in seen
    ]
    room = _room(s)
    if len(kept) > room:
        kept = kept[:room]
        s.stop_reason = "max_nodes"
    for hit in kept:
        node = PassageNode(
            id=len(s.passages),
            passage_id=hit.passage_id,
            text=hit.text,
            score=hit.score,
            parent=query.id,
            depth=query.depth,
        )
        s.passages.append(node)
        query.children.append(node.id)
        s.queue.append(node.id)
    query.hits = []
    query.status = "expanded" if query.children else "exhausted"


def _apply_rewrite(s: MiningState, action: Rewrite, rewrites: list[RewrittenQuery]) -> None:
    _expect(s, "search", "rewrite")
    if s.current != action.passage_node:
        raise MiningProtocolError("rewrite: the result is for a passage not being expanded")
    passage = s.passages[action.passage_node]
    existing = {_norm(q.text) for q in s.queries}
    accepted: list[RewriteCandidate] = []
    for rewrite in rewrites[: action.max_queries]:
        text = " ".join(rewrite.text.split())
        if not text:
            continue
        passage.rewrites_proposed += 1
        key = _norm(text)
        if not key or key in existing:
            s.counters.duplicate_queries += 1  # the same words: no judge call needed
            continue
        existing.add(key)
        ops = [op for op in rewrite.operations if op in REWRITE_OPERATIONS]
        accepted.append(RewriteCandidate(text=text, operations=ops[:MAX_COMBINED_OPERATIONS]))
    s.candidates = accepted


def _apply_duplicate(s: MiningState, action: DuplicateCheck, duplicate: bool) -> None:
    _expect(s, "search", "duplicate_check")
    if s.current is None or not s.candidates or s.candidates[0].text != action.query:
        raise MiningProtocolError("duplicate_check: the result is for another candidate")
    candidate = s.candidates.pop(0)
    if duplicate:
        s.counters.duplicate_queries += 1
        return
    if _room(s) == 0:
        s.stop_reason = "max_nodes"
        s.candidates.clear()
        return
    passage = s.passages[s.current]
    node = QueryNode(
        id=len(s.queries),
        text=candidate.text,
        parent=passage.id,
        depth=passage.depth + 1,
        operations=candidate.operations,
    )
    s.queries.append(node)
    passage.children.append(node.id)


def _apply_extract(s: MiningState, action: Extract, per_passage: list[list[str] | None]) -> None:
    """`None` for a passage: the judge's output stayed invalid after its repair. The passage
    is flagged (`extraction_failed`, counted, listed in the result) instead of failing a job
    that may have run for hours; infrastructure failures still fail the job."""
    _expect(s, "extract", "extract")
    index = {_norm(n.text): i for i, n in enumerate(s.nuggets)}
    for ref, texts in zip(action.passages, per_passage, strict=True):
        passage = s.passages[ref.node]
        if passage.extracted:
            continue
        passage.extracted = True
        if texts is None:
            passage.extraction_failed = True
            s.counters.extraction_failures += 1
            continue
        for raw in texts[: action.max_nuggets]:
            text = " ".join(raw.split())
            if not acceptable_nugget(text):
                s.counters.nuggets_rejected += 1
                continue
            s.counters.nuggets_extracted += 1
            key = _norm(text)
            if key in index:
                sources = s.nuggets[index[key]].sources
                if passage.id not in sources:
                    sources.append(passage.id)
                s.counters.merged_away += 1
                continue
            index[key] = len(s.nuggets)
            s.nuggets.append(Nugget(text=text, sources=[passage.id]))


def _apply_merge(s: MiningState, action: Merge, groups: list[MergeGroup]) -> None:
    _expect(s, "merge", "merge")
    batch = s.merge_batches[s.merge_next]
    if len(batch) != len(action.nuggets):
        raise MiningProtocolError("merge: the result is for another batch")
    used: set[int] = set()
    for group in groups:
        ids = [i for i in dict.fromkeys(group.ids) if 0 <= i < len(batch) and i not in used]
        text = " ".join(group.text.split())
        if len(ids) >= 2 and acceptable_nugget(text):
            used.update(ids)
            sources: list[int] = []
            for i in ids:
                for src in s.nuggets[batch[i]].sources:
                    if src not in sources:
                        sources.append(src)
            s.merged.append(Nugget(text=text, sources=sorted(sources)))
            s.counters.merged_away += len(ids) - 1
    for i, index in enumerate(batch):
        if i not in used:  # not merged (or an invalid merge): kept as extracted
            s.merged.append(s.nuggets[index].model_copy())
    s.merge_next += 1


def _apply_label(s: MiningState, labels: list[str]) -> None:
    _expect(s, "label", "label")
    for offset, label in enumerate(labels):
        s.merged[s.label_next + offset].importance = "vital" if label == "vital" else "okay"
    s.label_next += len(labels)


# --- views --------------------------------------------------------------------------------


def mined_nuggets(state: MiningState) -> list[MinedNugget]:
    """The labelled nuggets of a finished job, vital first, with their provenance."""
    if state.phase != "done":
        raise MiningProtocolError("the job has not finished")
    if any(n.importance is None for n in state.merged):
        raise MiningProtocolError("a finished job has an unlabelled nugget")
    out = [
        MinedNugget(
            text=n.text,
            importance=n.importance or "okay",  # never None here (checked above)
            provenance=[
                Provenance(passage_id=s_.passage_id, query_path=query_path(state, s_.id))
                for s_ in (state.passages[i] for i in n.sources)
            ],
        )
        for n in state.merged
    ]
    return sorted(out, key=lambda n: 0 if n.importance == "vital" else 1)


class Progress(BaseModel):
    phase: Phase
    nodes_expanded: int
    queries: int
    passages_kept: int
    passages_examined: int
    passages_extracted: int
    extraction_failures: int
    nuggets_so_far: int
    queued: int
    stop_reason: StopReason | None
    temporal_rejections: int
    duplicate_queries: int


def progress(state: MiningState) -> Progress:
    nuggets = len(state.merged) if state.phase in ("label", "done") else len(state.nuggets)
    return Progress(
        phase=state.phase,
        nodes_expanded=state.counters.nodes_expanded,
        queries=len(state.queries),
        passages_kept=len(state.passages),
        passages_examined=state.counters.passages_examined,
        passages_extracted=sum(1 for p in state.passages if p.extracted),
        extraction_failures=state.counters.extraction_failures,
        nuggets_so_far=nuggets,
        queued=len(state.queue),
        stop_reason=state.stop_reason,
        temporal_rejections=state.counters.temporal_rejections,
        duplicate_queries=state.counters.duplicate_queries,
    )
