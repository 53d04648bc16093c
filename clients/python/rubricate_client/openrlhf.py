"""OpenRLHF (0.11.2). Its single-turn agent executor fetches each sample's reward on its
own, one sample per call, in one of two ways:

- URL mode, `--reward.remote_url http://gateway:8000/get_reward`: a plain JSON POST of
  `{"query": [q], "prompts": [p], "labels": [l]}` with a fixed 180 s timeout, up to 5 tries,
  no Idempotency-Key and no credentials. The label (`--label_key`) is the only per-sample
  field it carries: put `group_size` (= `--n_samples_per_prompt`) and, if one prompt can
  appear twice in a step, a `group_key` in the dataset's label JSON so the gateway gathers the
  group.
- Reward-function mode, `--reward.remote_url /path/rubricate_reward.py`, a file holding
  `from rubricate_client.openrlhf import reward_func`: this function, called in a thread per
  sample. It adds `group_size` (RUBRICATE_GROUP_SIZE = `--n_samples_per_prompt`) and a
  `group_key` (a hash of the prompt) to the label, and sends the request with the SDK:
  the API key from RUBRICATE_API_KEY (never in a URL or a log line), an Idempotency-Key
  kept across its retries, and the SDK's timeout and backoff.

With API keys, URL mode authenticates with a short-lived token scoped to `/get_reward`, put in
the URL's user-info (aiohttp sends it as `Authorization: Basic`): `scoped_reward_url` asks the
gateway for one with the API key and returns the URL to pass, so the long-lived key never
reaches OpenRLHF's logged arguments (`python -m rubricate_client.openrlhf url --ttl-hours 48`).

Stage credit: none. OpenRLHF 0.11.2 takes one scalar reward per sample (the agent's
`rewards`, summed over a multi-turn agent's steps), normalizes the scalars per prompt group and
puts the result on the response's last token (`compute_reward`); neither its reward protocol
nor its agent API carries a per-token or per-stage reward. It therefore trains on R_answer;
the stage scores reach its logs (`extra_logs`) only. The reward function says so once at
start-up (a log line).

OpenRLHF needs a number for every sample. The gateway answers a null reward (with
`rubricate/scored` 0) where it could not score one; this function then raises
`UnscoredSampleError` instead of handing OpenRLHF a made-up 0.0, unless RUBRICATE_UNSCORED_SCORE
chooses the value explicitly.
"""

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from rubricate_client.endpoints import AUTH_TOKEN, GET_REWARD
from rubricate_client.http import Client
from rubricate_client.schemas.rewards import GetRewardRequest
from rubricate_client.trainers import (
    AdapterSettings,
    group_key_of,
    merge_label,
    numeric_rewards,
    sync_client,
    with_group,
)

logger = logging.getLogger(__name__)
STAGE_CREDIT_LINE = (
    "rubricate stage credit: none (OpenRLHF reward function): OpenRLHF 0.11.2 takes one "
    "scalar reward per sample, so it trains on R_answer; stage scores are logged only"
)
_announced: list[bool] = []


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None, **_: Any
) -> dict[str, Any]:
    if not _announced:
        _announced.append(True)
        logger.warning(STAGE_CREDIT_LINE)
    settings = AdapterSettings.from_env()
    raw = list(labels) if labels is not None else [None] * len(queries)
    request = GetRewardRequest.model_validate(
        {
            "query": list(queries),
            "prompts": list(prompts),
            "labels": [
                with_group(
                    merge_label(label),
                    group_size=settings.group_size,
                    group_key=group_key_of(prompt),
                    step=None,
                )
                for prompt, label in zip(prompts, raw, strict=True)
            ],
            "kind": settings.kind,
        }
    )
    response = sync_client(settings).get_reward(request)
    rewards = numeric_rewards(response, settings, trainer="OpenRLHF")
    out: dict[str, Any] = {**response.model_dump(), "rewards": rewards, "scores": list(rewards)}
    try:
        import torch
    except ImportError:
        return out
    return {
        "rewards": torch.tensor(rewards),
        "scores": torch.tensor(rewards),
        "extra_logs": {k: torch.tensor(v) for k, v in response.extra_logs.items()},
    }


def scoped_reward_url(
    gateway_url: str,
    *,
    api_key: str,
    ttl_s: int = 48 * 3600,
    tenant: str | None = None,
    user: str = "rubricate",
) -> str:
    """`http://rubricate:<token>@gateway:8000/get_reward`: a URL for OpenRLHF's URL mode whose
    credential is a token valid `ttl_s` seconds on `/get_reward` only (`POST /v1/auth/tokens`,
    called with `api_key`). Make `ttl_s` cover the run; a new URL needs a restart."""
    with Client(gateway_url, api_key=api_key, tenant=tenant) as client:
        issued = client.call(AUTH_TOKEN, {"ttl_s": ttl_s, "paths": [GET_REWARD.path]})
    parts = urlsplit(gateway_url.rstrip("/"))
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(user, safe='')}:{quote(issued.token, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path + GET_REWARD.path, "", ""))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rubricate_client.openrlhf",
        description="Print a --reward.remote_url for OpenRLHF's URL mode that carries a "
        "short-lived token instead of the API key (read from RUBRICATE_API_KEY).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    url = sub.add_parser("url", help="mint a /get_reward token and print the URL")
    url.add_argument("--gateway", default=os.environ.get("RUBRICATE_URL", "http://localhost:8000"))
    url.add_argument("--ttl-hours", type=float, default=48.0)
    args = parser.parse_args(argv)
    api_key = os.environ.get("RUBRICATE_API_KEY")
    if not api_key:
        print("RUBRICATE_API_KEY is not set", file=sys.stderr)
        return 2
    print(scoped_reward_url(args.gateway, api_key=api_key, ttl_s=int(args.ttl_hours * 3600)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
