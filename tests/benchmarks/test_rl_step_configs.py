"""The RL-step benchmark's configurations side by side (`benchmarks/rl_step.py --configs`):
names, `NAME@DIR` for another checkout's services, and the comparison table's ratio against
the first configuration, computed on the CPU that includes the background work."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rl_step


def test_a_configuration_may_name_another_checkout(tmp_path: Path) -> None:
    deployed = rl_step.parse_config("deployed")
    assert deployed.miner and dict(deployed.env)["RUBRICATE_GATEWAY_GRPC_ENABLED"] == "true"
    assert (deployed.worker_pool, deployed.worker_concurrency) == ("prefork", 2)
    assert not rl_step.parse_config("lean").miner
    before = rl_step.parse_config(f"deployed@{tmp_path}")
    assert before.name == f"deployed@{tmp_path.name}" and before.source == str(tmp_path)
    assert before.miner == deployed.miner and before.env == deployed.env
    with pytest.raises(ValueError, match="unknown configuration"):
        rl_step.parse_config("production")


def test_parse_args_refuses_an_unknown_configuration() -> None:
    with pytest.raises(SystemExit):
        rl_step.parse_args(["--configs", "lean,nope"])
    args = rl_step.parse_args(["--configs", "lean,deployed", "--sizes", "1024"])
    assert args.configs == ["lean", "deployed"] and args.settle_s == 2.0


def result(config: str, settled: float, **cpu: float) -> rl_step.RunResult:
    return rl_step.RunResult(
        size=1024,
        pattern="openrlhf",
        tenant="t",
        wall_s=10.0,
        floor_s=5.0,
        work_floor_s=5.0,
        critical_s=1.0,
        ok=1024,
        errors={},
        attempts={"200": 1024},
        partial_groups=0,
        partial_samples=0,
        groups=64,
        rewards_equal=None,
        rewards_differ=None,
        reward_missing=0,
        judge_util=0.1,
        judge_busy=0.5,
        judge_requests={},
        judge_rejected=0,
        judge_after=0,
        redis_per_sample=7.0,
        redis_sent_per_sample=1.4,
        lag_p99_ms={},
        cpu_ms_per_rollout=cpu,
        platform_cpu_ms=settled - 1.0,
        peak_rss_mib={"gateway": 200.0},
        config=config,
        cpu_settled_ms_per_rollout=cpu,
        platform_cpu_settled_ms=settled,
    )


def test_the_comparison_is_against_the_first_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rl_step.compare(
        [
            result("lean", 8.0, gateway=3.0, verifier=5.0),
            result("deployed", 9.2, gateway=3.0, verifier=5.0, miner=0.5, worker=0.7),
        ]
    )
    rows = [line for line in capsys.readouterr().out.splitlines() if "| openrlhf |" in line]
    assert rows[0].startswith("| 1,024 | openrlhf | lean | 8.0 | 1.00 | 3.0 | 5.0 | – |")
    assert rows[1].startswith("| 1,024 | openrlhf | deployed | 9.2 | 1.15 |")
    assert "| 0.5 | 0.7 |" in rows[1]
