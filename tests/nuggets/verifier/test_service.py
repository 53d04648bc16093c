"""NuggetLabelService against fake backends (named as fakes): batching, call order,
repair of a wrong label count, the flagged failure, label probabilities."""

import asyncio
import math
from collections.abc import Sequence

import pytest

from rubricate.common.deadlines import deadline_scope
from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message, TokenLogprob
from rubricate.llm.errors import DeadlineExceeded, OutputParseError, TransportError
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest
from rubricate.nuggets.verifier.service import NuggetLabelService, NuggetTaskSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller, parse_prompt

UNITS_OFF = TaskSettings(unit_reading="off")
"""The answer's assertion-unit reading is off in these tests of the labelling calls: its
model calls would mix into the calls they count (tests/nuggets/verifier/test_units.py)."""

FAST = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)

BLOCKS = [
    "Pew Research Center is a nonpartisan fact tank founded in 2004.",
    "It conducts public opinion polling and demographic research.",
]
NUGGETS = [
    "nonpartisan fact tank",  # block 0: support
    "founded 2004 Washington",  # block 0: partial
    "public opinion polling",  # block 1: support
    "funded by advertisers",  # nowhere
]


def service(
    labeller: FakeNuggetLabeller, **settings: object
) -> tuple[NuggetLabelService, FakeJudgeBackend]:
    backend = FakeJudgeBackend(handlers={"nugget_labels": labeller})
    return (
        NuggetLabelService(
            tasks=UNITS_OFF, backend=backend, llm=FAST, settings=NuggetTaskSettings(**settings)
        ),  # type: ignore[arg-type]
        backend,
    )


@pytest.mark.parametrize(("batch_size", "calls"), [(1, 8), (3, 4), (10, 2)])
async def test_every_block_is_judged_against_every_batch(batch_size: int, calls: int) -> None:
    labeller = FakeNuggetLabeller()
    svc, backend = service(labeller)
    out = await svc.label(
        NuggetLabelsRequest(question="q?", blocks=BLOCKS, nuggets=NUGGETS, batch_size=batch_size)
    )
    assert out.usage.calls == calls == len(backend.calls)
    assert [b.labels for b in out.blocks] == [
        ["support", "partial_support", "not_support", "not_support"],
        ["not_support", "not_support", "support", "not_support"],
    ]
    assert out.repairs == 0
    assert out.usage.prompt_tokens > 0 and out.backend == "fake"


async def test_calls_are_issued_block_major_so_a_block_prefix_stays_cached() -> None:
    labeller = FakeNuggetLabeller()
    svc, _ = service(labeller, concurrency=3)
    await svc.label(
        NuggetLabelsRequest(question="q?", blocks=BLOCKS, nuggets=NUGGETS, batch_size=1)
    )
    order = [(parse_prompt(p)[0], parse_prompt(p)[1][0]) for p in labeller.prompts]
    assert order == [(b, n) for b in BLOCKS for n in NUGGETS]


async def test_a_wrong_label_count_is_repaired_once() -> None:
    labeller = FakeNuggetLabeller(short_replies=1)
    svc, backend = service(labeller)
    out = await svc.label(
        NuggetLabelsRequest(question="q?", blocks=BLOCKS[:1], nuggets=NUGGETS, batch_size=10)
    )
    assert out.repairs == 1 and out.usage.calls == 2
    assert out.blocks[0].labels == ["support", "partial_support", "not_support", "not_support"]
    assert "expected exactly 4 labels" in backend.calls[1][1]


async def test_a_wrong_count_twice_is_a_flagged_error_with_usage_not_a_zero() -> None:
    labeller = FakeNuggetLabeller(short_replies=2)
    svc, _ = service(labeller)
    with pytest.raises(OutputParseError) as info:
        await svc.label(
            NuggetLabelsRequest(question="q?", blocks=BLOCKS[:1], nuggets=NUGGETS, batch_size=10)
        )
    assert "expected exactly 4 labels" in str(info.value)
    assert info.value.usage.calls == 2 and info.value.usage.prompt_tokens > 0


async def test_transport_failures_are_retried_then_raised_with_usage() -> None:
    labeller = FakeNuggetLabeller()
    svc, backend = service(labeller)
    with pytest.raises(TransportError):
        await svc.label(
            NuggetLabelsRequest(
                question="q?", blocks=["[[verifier-down]] text"], nuggets=NUGGETS, batch_size=10
            )
        )
    assert len(backend.calls) == 2  # first try + max_retries=1


async def test_short_mode_asks_for_binary_labels() -> None:
    labeller = FakeNuggetLabeller(formats=("json",))
    svc, backend = service(labeller)
    out = await svc.label(
        NuggetLabelsRequest(
            question="Who wrote Hamlet?",
            blocks=["It was William Shakespeare"],
            nuggets=["Shakespeare"],
            mode="short",
        )
    )
    assert out.blocks[0].labels == ["support"]
    assert "partial_support" not in backend.calls[0][1]


class FakeLogprobBackend(LLMBackend):
    """A fake that replies with fixed labels and made-up token log-probabilities."""

    name = "fake-logprobs"
    model = "fake"

    def __init__(self) -> None:
        self.params: list[GenerationParams] = []

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self.params.append(params)
        _, nuggets, _ = parse_prompt(messages[-1].content)
        tokens = [TokenLogprob("[", 0.0)]
        for i in range(len(nuggets)):
            if i:
                tokens.append(TokenLogprob(", ", 0.0))
            tokens.append(TokenLogprob('"', 0.0))
            tokens.append(
                TokenLogprob(
                    "not",
                    math.log(0.6),
                    {"not": math.log(0.6), "support": math.log(0.3), "partial": math.log(0.1)},
                )
            )
            tokens.append(TokenLogprob('_support"', 0.0))
        tokens.append(TokenLogprob("]", 0.0))
        return Completion(
            text="".join(t.token for t in tokens),
            prompt_tokens=10,
            completion_tokens=len(tokens),
            latency_s=0.0,
            model=self.model,
            backend=self.name,
            logprobs=tuple(tokens),
        )


async def test_label_probabilities_come_from_token_logprobs() -> None:
    backend = FakeLogprobBackend()
    svc = NuggetLabelService(tasks=UNITS_OFF, backend=backend, llm=FAST)
    out = await svc.label(
        NuggetLabelsRequest(
            question="q?", blocks=BLOCKS[:1], nuggets=NUGGETS[:2], label_probabilities=True
        )
    )
    assert backend.params[0].logprobs == 5
    assert backend.params[0].json_schema is not None
    assert backend.params[0].json_schema["maxItems"] == 2
    (block,) = out.blocks
    assert block.labels == ["not_support", "not_support"]
    expected = {"support": 0.3, "partial_support": 0.1, "not_support": 0.6}
    assert block.probabilities is not None
    assert [dict(p or {}) for p in block.probabilities] == [pytest.approx(expected)] * 2


async def test_no_probabilities_unless_asked() -> None:
    backend = FakeLogprobBackend()
    svc = NuggetLabelService(tasks=UNITS_OFF, backend=backend, llm=FAST)
    out = await svc.label(NuggetLabelsRequest(question="q?", blocks=BLOCKS[:1], nuggets=["a b c"]))
    assert backend.params[0].logprobs is None
    assert out.blocks[0].probabilities is None


@pytest.mark.parametrize(("backend_name", "calls"), [("embedded", 8), ("openai", 2)])
async def test_default_batch_size_depends_on_the_backend(backend_name: str, calls: int) -> None:
    svc, backend = service(FakeNuggetLabeller())
    backend.name = backend_name  # the fake stands in for that backend kind
    out = await svc.label(NuggetLabelsRequest(question="q?", blocks=BLOCKS, nuggets=NUGGETS))
    assert out.usage.calls == calls
    assert out.batch_size == (1 if backend_name == "embedded" else 10)


async def test_configured_batch_size_wins() -> None:
    svc, backend = service(FakeNuggetLabeller(), batch_size=3)
    backend.name = "embedded"
    out = await svc.label(NuggetLabelsRequest(question="q?", blocks=BLOCKS, nuggets=NUGGETS))
    assert (out.batch_size, out.usage.calls) == (3, 4)


@pytest.mark.parametrize(
    ("backend_name", "backend_concurrency", "prefix_cache", "interleaved"),
    [
        ("embedded", None, "shared", False),
        ("fake", 1, "shared", False),
        ("fake", 4, "shared", True),
    ],
)
async def test_concurrent_requests_do_not_interleave_on_a_one_call_backend(
    backend_name: str, backend_concurrency: int | None, prefix_cache: str, interleaved: bool
) -> None:
    labeller = FakeNuggetLabeller()
    backend = FakeJudgeBackend(handlers={"nugget_labels": labeller}, delay_s=0.01)
    backend.name = backend_name  # the fake stands in for that backend kind
    llm = FAST.model_copy(update={"concurrency": backend_concurrency, "prefix_cache": prefix_cache})
    # fewer calls in flight than a request has: its later calls queue behind other requests'
    svc = NuggetLabelService(
        tasks=UNITS_OFF, backend=backend, llm=llm, settings=NuggetTaskSettings(concurrency=2)
    )
    one = NuggetLabelsRequest(question="q", blocks=BLOCKS[:1], nuggets=NUGGETS, batch_size=1)
    two = NuggetLabelsRequest(question="q", blocks=BLOCKS[1:], nuggets=NUGGETS, batch_size=1)
    await asyncio.gather(svc.label(one), svc.label(two))
    blocks = [parse_prompt(p)[0] for p in labeller.prompts]
    contiguous = blocks == [BLOCKS[0]] * 4 + [BLOCKS[1]] * 4
    assert contiguous is not interleaved


async def test_a_cache_per_slot_gets_a_requests_calls_back_to_back() -> None:
    """llama-server -np N: each request's calls one after another (so each lands on the slot
    holding its block), requests side by side up to the slot count."""
    labeller = FakeNuggetLabeller()
    backend = FakeJudgeBackend(handlers={"nugget_labels": labeller}, delay_s=0.01)
    in_flight: dict[str, int] = {}
    most: dict[str, int] = {}
    complete = backend.complete

    async def counted(messages: Sequence[Message], params: GenerationParams) -> Completion:
        block = parse_prompt(messages[-1].content)[0]
        in_flight[block] = in_flight.get(block, 0) + 1
        most[block] = max(most.get(block, 0), in_flight[block])
        try:
            return await complete(messages, params)
        finally:
            in_flight[block] -= 1

    backend.complete = counted  # type: ignore[method-assign]
    llm = FAST.model_copy(update={"concurrency": 2, "prefix_cache": "per_slot"})
    svc = NuggetLabelService(
        tasks=UNITS_OFF, backend=backend, llm=llm, settings=NuggetTaskSettings(concurrency=4)
    )
    requests = [
        NuggetLabelsRequest(question="q", blocks=[block], nuggets=NUGGETS, batch_size=1)
        for block in BLOCKS[:2]
    ]
    await asyncio.gather(*(svc.label(r) for r in requests))
    assert most == {BLOCKS[0]: 1, BLOCKS[1]: 1}  # never two calls of a request at once
    blocks = [parse_prompt(p)[0] for p in labeller.prompts]
    assert blocks != [BLOCKS[0]] * 4 + [BLOCKS[1]] * 4  # the two requests ran side by side


async def test_no_call_is_made_once_the_requests_deadline_has_passed() -> None:
    labeller = FakeNuggetLabeller()
    svc, backend = service(labeller)
    request = NuggetLabelsRequest(question="q?", blocks=BLOCKS, nuggets=NUGGETS, batch_size=1)
    with deadline_scope(0.01):
        await asyncio.sleep(0.02)
        with pytest.raises(DeadlineExceeded):
            await svc.label(request)
    assert backend.calls == []  # dropped, not labelled
