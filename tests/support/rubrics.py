from rubricate.core.rubrics import make_rubric
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Origin, Rubric, RubricSpec, Stage


def rubric(
    title: str,
    *,
    stage: Stage = "plan",
    origin: Origin = "active",
    weight: int = 2,
    step: int | None = None,
) -> Rubric:
    return make_rubric(
        stage=stage,
        spec=RubricSpec(title=title, description=f"The response {title}.", weight=weight),
        origin=origin,
        step=step,
    )


def ids(view: BufferView, stage: Stage | None = None) -> list[str]:
    if stage is not None:
        return [r.id for r in view.rubrics[stage]]
    return [r.id for r in view.all_rubrics()]
