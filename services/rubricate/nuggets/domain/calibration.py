"""Calibrated nugget labels from a verifier's label probabilities and the word overlap.

A small verifier model's raw label probabilities are informative but biased (the embedded
1.5B model says `not_support` for many stated facts, docs/judge-quality.md). A calibration
is a multinomial logistic model fitted on labelled dev data for one model: its features
are the log-probabilities of the three labels and the nugget's word overlap with the block
(`core.lexical.overlap`); it gives calibrated label probabilities, and the label is the most
probable one. Fitting lives in `rubricate.evaluation.calibration`; this module only applies
a fitted model, so it is pure and cheap (a few multiplications per nugget).
"""

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import Label

FEATURES: tuple[str, ...] = (
    "logp_support",
    "logp_partial_support",
    "logp_not_support",
    "overlap",
)
"""The inputs of a calibration, in order (a bias term comes first in each weight row)."""

MIN_PROBABILITY = 1e-6
"""Probabilities are floored here before the log, so a label the model never gives is a
large negative feature instead of minus infinity."""


def features(distribution: Mapping[Label, float], overlap: float) -> list[float]:
    """The calibration inputs for one (block, nugget): log p of each label, then overlap.

    `distribution` is renormalised over the three labels first; a label missing from it
    has probability 0.
    """
    total = math.fsum(max(0.0, distribution.get(label, 0.0)) for label in LABELS)
    if total <= 0.0:
        raise DomainError("a label distribution needs a positive probability", field="labels")
    logs = [
        math.log(max(MIN_PROBABILITY, distribution.get(label, 0.0) / total)) for label in LABELS
    ]
    return [*logs, float(overlap)]


def softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = math.fsum(exps)
    return [e / total for e in exps]


def model_probabilities(
    weights: Mapping[Label, Sequence[float]], feature_values: Sequence[float]
) -> dict[Label, float]:
    """The multinomial model's label probabilities for one input (weight rows: bias first)."""
    x = [1.0, *feature_values]
    scores = [math.fsum(w * v for w, v in zip(weights[lab], x, strict=True)) for lab in LABELS]
    return dict(zip(LABELS, softmax(scores), strict=True))


@dataclass(frozen=True)
class LabelCalibration:
    """A fitted multinomial logistic model: one weight row per label (bias, then FEATURES)."""

    model: str
    """The model it was fitted for (the backend's model name, e.g. `qwen2.5-coder-1.5b`)."""
    weights: Mapping[Label, tuple[float, ...]]
    fitted_on: str = ""
    """Where the weights come from (data file, pairs, date): provenance for the docs."""
    cross_validated: Mapping[str, float] = field(default_factory=dict)
    """Out-of-sample metrics measured when it was fitted (by topic folds)."""
    topics: tuple[str, ...] = ()
    """The topics of the fitting data, so an evaluation can tell in-sample topics apart."""

    def __post_init__(self) -> None:
        if set(self.weights) != set(LABELS):
            raise DomainError(
                f"a calibration needs weights for exactly {list(LABELS)}", field="weights"
            )
        for label, row in self.weights.items():
            if len(row) != len(FEATURES) + 1:
                raise DomainError(
                    f"weights[{label}] needs {len(FEATURES) + 1} numbers "
                    f"(bias + {', '.join(FEATURES)}), got {len(row)}",
                    field="weights",
                )
            if not all(math.isfinite(w) for w in row):
                raise DomainError(f"weights[{label}] holds a non-finite number", field="weights")

    def probabilities(
        self, distribution: Mapping[Label, float], overlap: float
    ) -> dict[Label, float]:
        return model_probabilities(self.weights, features(distribution, overlap))

    def label(self, distribution: Mapping[Label, float], overlap: float) -> Label:
        probs = self.probabilities(distribution, overlap)
        return max(LABELS, key=lambda lab: probs[lab])

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "features": ["bias", *FEATURES],
            "labels": list(LABELS),
            "weights": {lab: list(self.weights[lab]) for lab in LABELS},
            "fitted_on": self.fitted_on,
            "cross_validated": dict(self.cross_validated),
            "topics": list(self.topics),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "LabelCalibration":
        try:
            if list(raw["features"]) != ["bias", *FEATURES]:
                raise DomainError(
                    f"calibration features {raw['features']} are not {['bias', *FEATURES]}",
                    field="features",
                )
            weights = {lab: tuple(float(w) for w in raw["weights"][lab]) for lab in LABELS}
            return cls(
                model=str(raw["model"]),
                weights=weights,
                fitted_on=str(raw.get("fitted_on", "")),
                cross_validated={k: float(v) for k, v in raw.get("cross_validated", {}).items()},
                topics=tuple(str(t) for t in raw.get("topics", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DomainError(
                f"not a nugget label calibration: {exc}", field="calibration"
            ) from exc

    @classmethod
    def loads(cls, text: str) -> "LabelCalibration":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DomainError(f"calibration is not JSON: {exc}", field="calibration") from exc
        if not isinstance(raw, dict):
            raise DomainError("calibration must be a JSON object", field="calibration")
        return cls.from_json(raw)
