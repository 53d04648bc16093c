"""The judge metrics' `task` label takes only the agreed values (dashboards, alerts and
docs/observability.md use them): every `*TASK = "..."` constant a service passes as the task
of a model call is one of common.metrics.JUDGE_TASKS."""

import re
from pathlib import Path

from rubricate.common.metrics import JUDGE_TASKS

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "rubricate"
_CONSTANT = re.compile(r'^(\w*TASK)\s*=\s*"([^"]+)"', re.MULTILINE)


def test_task_constants_use_the_agreed_label_values() -> None:
    found: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for name, value in _CONSTANT.findall(path.read_text(encoding="utf-8")):
            if "." in value:  # Celery task names (rubricate.miner.mine), not judge tasks
                continue
            found[f"{path.relative_to(PACKAGE)}:{name}"] = value
    assert found, "no task constants found: the scan is broken"
    unknown = {k: v for k, v in found.items() if v not in JUDGE_TASKS}
    assert not unknown, f"task labels outside common.metrics.JUDGE_TASKS: {unknown}"
    used = set(found.values())
    assert {"stage_rubric_generation", "stage_scoring"} <= used


def test_label_lists_have_no_duplicates() -> None:
    names = JUDGE_TASKS
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z][a-z_]*", n) for n in names)
