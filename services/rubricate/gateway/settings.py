from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.tenant_limits import DEFAULT_PENDING_ROLLOUTS


class GatewaySettings(BaseSettings):
    """Gateway settings (env prefix RUBRICATE_GATEWAY_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_GATEWAY_", extra="ignore")

    rubric_generator_url: str = "http://127.0.0.1:8001"
    verifier_url: str = "http://127.0.0.1:8002"
    store_url: str = "http://127.0.0.1:8003"
    miner_url: str = "http://127.0.0.1:8004"
    """The miner (corpora, nugget-mining jobs, mined nuggets)."""
    model_timeout_s: float = Field(default=900.0, gt=0)
    """Timeout of one call to a model server (a CPU model can take minutes)."""
    store_timeout_s: float = Field(default=30.0, gt=0)
    upstream_retries: int = Field(default=2, ge=0, le=10)
    """Retries of an upstream call on connection errors and 503, with exponential backoff."""
    upstream_connect_wait_s: float = Field(default=30.0, ge=0, le=600)
    """How long a call to the rubric generator, the verifier or the store holds, beyond
    `upstream_retries`, while that service accepts no connection (restarting, its pod being
    replaced): tried again at most a second apart. 0: no hold. Past it, a group whose
    scoring needed that service is answered 503 `upstream_unreachable` (retryable), never a
    null reward (docs/gateway.md, "Failure model")."""
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    max_rollouts: int = Field(default=64, ge=1)
    max_trajectory_chars: int = Field(default=400_000, ge=1)
    scoring_concurrency: int = Field(default=16, ge=1)
    """Rollouts of one request scored at once: the gateway sends them to the verifier in
    calls of this many (one call for a group of 16), one call after another."""
    redis_url: str | None = None
    """Redis for Idempotency-Key results and the `/get_reward` group rendezvous, shared by
    replicas; unset: kept in process memory."""
    idempotency_ttl_s: int = Field(default=24 * 3600, ge=60)
    """How long a first result is replayed for a retried Idempotency-Key."""
    idempotency_lease_s: float = Field(default=30.0, ge=1, le=3600)
    """Lease of a key whose first request is still running, renewed by its owner every
    third of it: when the owner dies (a gateway crash, a Redis restart) a retry takes the
    key over after at most this long instead of waiting the whole model timeout."""
    max_in_flight_per_tenant: int = Field(default=DEFAULT_PENDING_ROLLOUTS, ge=1)
    """Admission: rollouts pending per tenant on one replica (a request counts its rollouts,
    `/get_reward` samples or stagewise rollouts, any other request 1). Work queues up to it;
    past it a request gets 429 with Retry-After. The default holds four steps of 256 x 16
    samples sent one per request (`common.tenant_limits`)."""
    grpc_enabled: bool = True
    """Serve the gRPC API (rubricate.v1) next to HTTP, from the same service objects."""
    grpc_host: str = "127.0.0.1"
    """`rubricate serve gateway --host H` makes it H; open auth mode allows loopback only."""
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    """gRPC port; 0 picks a free one."""
    reward_kind: Literal["stagewise", "nugget", "step"] = "stagewise"
    """Reward kind of `POST /get_reward` when neither the label nor the request names one."""
    reward_group_concurrency: int = Field(default=256, ge=1)
    """Question groups scored at once by one `/get_reward` call (the judges' own adaptive
    limits queue the work behind it; a step sent in one request has 256 groups)."""
    group_size: int | None = Field(default=None, ge=1, le=64)
    """Group assembly (docs/gateway.md): the samples of a stagewise `/get_reward` group when
    its label has no `group_size` (the trainer's samples per prompt). Unset or 1: a
    request's samples of a question are the whole group."""
    group_gather_s: float = Field(default=600.0, gt=0, le=3600)
    """How long a group of known size (`group_size`) waits for its last sample before the
    samples present are scored as a partial group (flagged `rubricate/partial_group`). The
    default fits agent rollouts that finish minutes apart (veRL's streamed loop) and stays
    inside OpenRLHF's own deadline (5 tries of 180 s: a sample posted again after a timeout
    waits on its first slot)."""
    group_lease_s: float = Field(default=30.0, ge=1, le=3600)
    """Lease of the replica that scores a group, renewed while it works: a group whose
    replica died is taken over by a waiting replica after at most this long."""
    drain_hold_s: float = Field(default=240.0, ge=0, le=3600)
    """SIGTERM on the only live replica (no other replica's liveness in the rendezvous's
    Redis, or no Redis): how long it may keep taking connections, joining and scoring before
    it stops listening, waiting to be idle (`drain_quiet_s`). Keep it under the grace
    period (the chart's 300 s, Compose's `stop_grace_period`). 0: stop listening at once
    and hand over, as with other replicas live (docs/gateway.md, "Failure model")."""
    drain_quiet_s: float = Field(default=5.0, ge=0, le=600)
    """How long the only live replica, draining, must have had no request in flight and no
    group to gather, score or wait on before it stops listening (covers a client's retry
    pauses: OpenRLHF's 1 s, the SDK's 0.5, 1 and 2 s)."""
    reward_retention_s: float = Field(default=3600.0, ge=1, le=7 * 24 * 3600)
    """How long a scored `/get_reward` sample's result answers the same sample sent again
    (a blind retry), with no judge call."""
