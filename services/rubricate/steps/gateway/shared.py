"""What the step orchestrations (`service`, `ranking`) share: the verifier's step-verdicts
call, and at the end of a request its timing, the failure when no judge call worked and its
hand-over to the audit."""

import time
from collections.abc import Sequence

from rubricate.common.errors import ServiceError
from rubricate.common.request_context import RequestContext
from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate.common.usage import usage_out
from rubricate.steps.domain.rewards import Criterion, Verdict
from rubricate.steps.verifier.endpoints import STEP_VERDICTS
from rubricate.steps.verifier.schemas import StepVerdictsRequest
from rubricate_client.schemas.stagewise import Timing


async def step_verdicts(
    verifier: ServiceClient,
    *,
    question: str,
    history: str,
    action: str,
    criteria: Sequence[Criterion],
) -> tuple[list[Verdict], list[str]]:
    """One step-verdicts call (its wait and usage count to the request's context): the
    verdicts, and what in the material addresses the judge (the verifier's
    `judge_addressing`: `action: ...`, `history: ...`, `criterion i: ...`)."""
    body = StepVerdictsRequest(
        question=question,
        history=history,
        action=action,
        criteria=[c.text for c in criteria],
    )
    out = await verifier.call(STEP_VERDICTS, body)
    if len(out.verdicts) != len(criteria):
        raise UpstreamError(
            service=verifier.service,
            status=None,
            type="upstream_invalid_response",
            message=f"{len(out.verdicts)} verdicts for {len(criteria)} criteria",
        )
    return [Verdict(satisfied=v.satisfied) for v in out.verdicts], list(out.judge_addressing)


def timing_since(started: float, ctx: RequestContext) -> Timing:
    """The request's time since `started`, of which its context's clock waited upstream."""
    total = time.perf_counter() - started
    upstream = ctx.clock.total()
    return Timing(total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream))


def judge_unavailable(what: str, error: str | None, ctx: RequestContext) -> ServiceError:
    """502 `judge_unavailable`: no `what` could be scored (the first one's error), with the
    usage the request spent."""
    return ServiceError(
        502,
        f"no {what} could be scored: {error}",
        type="judge_unavailable",
        usage=usage_out(ctx.usage),
    )
