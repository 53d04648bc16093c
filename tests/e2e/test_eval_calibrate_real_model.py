"""`rubricate eval calibrate` end to end on the real embedded model (slow): five real RAG24
dev records (cross-validation needs five topics), answers cut to their first sentences,
one or two nuggets each with their reference labels; then a resumed run that needs no
model, and the fitted file driving the verifier."""

import json
from pathlib import Path

import pytest

from rubricate.cli import main
from rubricate.evaluation.calibrate_run import load_samples
from rubricate.nuggets.domain.calibration import LabelCalibration
from rubricate.nuggets.verifier.service import load_calibration

pytestmark = pytest.mark.model

DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "rag24-nuggets-dev.jsonl"


def short_records(n_topics: int) -> list[dict[str, object]]:
    out = []
    for line in DEV.read_text(encoding="utf-8").splitlines()[:n_topics]:
        rec = json.loads(line)
        answer = ". ".join(rec["answer"].split(". ")[:2]) + "."
        out.append({**rec, "answer": answer, "nuggets": rec["nuggets"][:2]})
    return out


@pytest.mark.skipif(not DEV.exists(), reason=f"no dev data at {DEV}")
def test_calibrate_fits_resumes_and_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "dev.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in short_records(5)) + "\n")
    out, features = tmp_path / "cal.json", tmp_path / "cal.features.jsonl"
    args = ["eval", "calibrate", "--data", str(data), "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "calibrated" in printed and "raw" in printed
    samples = load_samples(features)
    assert len(samples) == 10
    for sample in samples.values():
        assert len(sample.features) == 4 and all(v <= 0.0 for v in sample.features[:3])
    calibration = LabelCalibration.loads(out.read_text())
    assert calibration.model == "qwen2.5-coder-1.5b" and len(calibration.topics) == 5
    assert calibration.cross_validated["pairs"] == 10
    # a second run finds every pair in the features file: same samples, same weights
    before = features.read_text()
    assert main(args) == 0
    assert features.read_text() == before
    assert LabelCalibration.loads(out.read_text()).weights == calibration.weights
    assert load_calibration(str(out), model="qwen2.5-coder-1.5b") == calibration
