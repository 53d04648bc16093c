"""Fitting a `LabelCalibration` on labelled dev data (multinomial logistic regression).

Samples are (features, gold label) pairs, features as `core.nugget_calibration.features`
computes them from the verifier's raw label probabilities. The fit minimises the
class-balanced cross-entropy (each label weighs as much in total, since the reward cares
about the rare `partial_support` as much as the common `not_support`) plus an L2 penalty on
the non-bias weights, by Newton's method (a dozen iterations on a few hundred samples).
`cross_validate` reports out-of-sample metrics with whole topics held out per fold, so a
topic's nuggets never sit on both sides.
"""

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rubricate.evaluation import metrics
from rubricate.evaluation.nuggets import SUPPORTED_GROUPS
from rubricate.nuggets.domain.calibration import LabelCalibration, model_probabilities
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.schemas.nuggets import Label

DEFAULT_L2 = 0.01
"""Chosen by cross-validation on the RAG24 dev features (0.01 to 0.3 tried: the smallest
penalty gave the best out-of-fold macro-F1; docs/judge-quality.md)."""


@dataclass(frozen=True)
class Sample:
    topic: str
    features: tuple[float, ...]
    gold: Label


def fit_weights(
    samples: Sequence[Sample],
    *,
    l2: float = DEFAULT_L2,
    balanced: bool = True,
    iterations: int = 50,
) -> dict[Label, tuple[float, ...]]:
    """Weight rows (bias first) of the multinomial logistic model fitted on `samples`."""
    if not samples:
        raise ValueError("no samples to fit a calibration on")
    x = np.array([[1.0, *s.features] for s in samples])
    k, d = len(LABELS), x.shape[1]
    y = np.zeros((len(samples), k))
    for i, s in enumerate(samples):
        y[i, LABELS.index(s.gold)] = 1.0
    counts = y.sum(axis=0)
    if balanced:
        present = counts > 0
        class_w = np.where(present, len(samples) / (present.sum() * np.maximum(counts, 1)), 0.0)
    else:
        class_w = np.ones(k)
    sample_w = y @ class_w
    penalty = np.full(d, l2)
    penalty[0] = 0.0
    # the last label's row stays 0 (softmax is invariant to a shared shift): k-1 free rows
    w = np.zeros((k - 1) * d)
    for _ in range(iterations):
        grad, hess = _gradient_hessian(w, x, y, sample_w, penalty, k)
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    rows = np.vstack([w.reshape(k - 1, d), np.zeros(d)])
    return {label: tuple(float(v) for v in rows[j]) for j, label in enumerate(LABELS)}


def _gradient_hessian(
    w: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    sample_w: npt.NDArray[np.float64],
    penalty: npt.NDArray[np.float64],
    k: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    _, d = x.shape
    rows = np.vstack([w.reshape(k - 1, d), np.zeros(d)])
    scores = x @ rows.T
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=1, keepdims=True)
    total = sample_w.sum()
    grad = np.zeros((k - 1, d))
    hess = np.zeros(((k - 1) * d, (k - 1) * d))
    for a in range(k - 1):
        grad[a] = ((sample_w * (p[:, a] - y[:, a])) @ x) / total + penalty * rows[a]
        for b in range(k - 1):
            coeff = sample_w * p[:, a] * ((1.0 if a == b else 0.0) - p[:, b])
            block = (x * coeff[:, None]).T @ x / total
            if a == b:
                block += np.diag(penalty)
            hess[a * d : (a + 1) * d, b * d : (b + 1) * d] = block
    return grad.reshape(-1), hess


def fit(
    samples: Sequence[Sample],
    *,
    model: str,
    fitted_on: str,
    l2: float = DEFAULT_L2,
    folds: int = 5,
    seed: int = 0,
) -> LabelCalibration:
    """A calibration for `model` fitted on all `samples`, carrying its cross-validated
    metrics (`cross_validate` with the same settings)."""
    report = cross_validate(samples, l2=l2, folds=folds, seed=seed)
    return LabelCalibration(
        model=model,
        weights=fit_weights(samples, l2=l2),
        fitted_on=fitted_on,
        cross_validated=report,
        topics=tuple(sorted({s.topic for s in samples})),
    )


def predict(weights: Mapping[Label, Sequence[float]], sample_features: Sequence[float]) -> Label:
    probs = model_probabilities(weights, sample_features)
    return max(LABELS, key=lambda lab: probs[lab])


def out_of_fold(
    samples: Sequence[Sample], *, l2: float = DEFAULT_L2, folds: int = 5, seed: int = 0
) -> list[tuple[Label, Label]]:
    """(calibrated, raw) label of every sample, in `samples` order, each predicted by a model
    fitted without its topic's fold (whole topics per fold)."""
    topics = sorted({s.topic for s in samples})
    if len(topics) < folds:
        raise ValueError(f"cross-validation needs at least {folds} topics, got {len(topics)}")
    random.Random(seed).shuffle(topics)
    fold_of = {t: i % folds for i, t in enumerate(topics)}
    out: list[tuple[Label, Label] | None] = [None] * len(samples)
    for f in range(folds):
        train = [s for s in samples if fold_of[s.topic] != f]
        weights = fit_weights(train, l2=l2)
        for i, s in enumerate(samples):
            if fold_of[s.topic] == f:
                # the first len(LABELS) features are the raw log-probabilities, in LABELS order
                raw = LABELS[max(range(len(LABELS)), key=lambda j: s.features[j])]
                out[i] = (predict(weights, s.features), raw)
    return [pair for pair in out if pair is not None]


def label_metrics(gold: Sequence[Label], predicted: Sequence[Label]) -> dict[str, float]:
    """Accuracy, macro-F1 over the three labels, macro-F1 supported-vs-not, kappa."""
    matrix = metrics.confusion(list(gold), list(predicted), LABELS)
    return {
        "accuracy": metrics.accuracy(matrix),
        "macro_f1": metrics.macro_f1(matrix),
        "supported_f1": metrics.macro_f1(metrics.collapse(matrix, SUPPORTED_GROUPS)),
        "kappa": metrics.cohen_kappa(matrix),
    }


def cross_validate(
    samples: Sequence[Sample], *, l2: float = DEFAULT_L2, folds: int = 5, seed: int = 0
) -> dict[str, float]:
    """Accuracy, macro-F1 (3 labels), macro-F1 supported-vs-not and kappa of out-of-fold
    predictions, whole topics per fold; plus the same for the raw most-probable label."""
    topics = {s.topic for s in samples}
    predicted = out_of_fold(samples, l2=l2, folds=folds, seed=seed)
    gold = [s.gold for s in samples]
    out: dict[str, float] = {"pairs": float(len(samples)), "topics": float(len(topics))}
    for name, labels in (
        ("calibrated", [p for p, _ in predicted]),
        ("raw", [r for _, r in predicted]),
    ):
        for key, value in label_metrics(gold, labels).items():
            out[f"{name}_{key}"] = value
    return out
