"""TRL 1.16 `AsyncGRPOTrainer` driver (run in .venvs/trl): `AsyncGRPOTrainer.train()` for 2
steps on a tiny randomly initialised model and a tokenizer built offline, with
`RubricateReward` as its reward function, scored by TRL's own rollout worker
(`AsyncRolloutWorker`: a spawned child process that generates over HTTP and calls the reward
functions once per whole group) against a running gateway. Prints one JSON object.

Real: the trainer, its rollout queue, batcher, collator, loss and optimizer step; TRL's rollout
worker (its child process, its `/v1/completions` calls, its `_score_group`: the reward call,
the NaN handling and the group normalization); Rubricate's reward function and SDK client
(its retries, its Idempotency-Key); the gateway's group assembly and idempotency replay.

Stand-ins (each named FAKE or REFERENCE below), for what a CPU machine without network lacks:

- `FakeVLLMServer`: the vLLM server the worker generates with. It answers `/health`,
  `/v1/models` and `/v1/completions` (token ids in, token ids and log-probabilities out) with
  SCRIPTED Plan/Research/Review/Answer trajectories (a random tiny model writes no stages),
  each token's log-probability computed by its own copy of the tiny model.
- `InProcessWeightTransfer`: TRL's `WeightTransferProtocol` (its default streams weights to
  vLLM over NCCL): pause, copy the trainer's tensors into the fake server's model, resume.
- `reference_varlen_attention`: the tree-attention kernel. TRL's `tree_attention` calls
  FlashAttention-3's `flash_attn_varlen_func`, fetched from the Hugging Face Hub at run time by
  the `kernels` package (CUDA only); this is the same causal variable-length attention in plain
  PyTorch, put in place of `packing._flash_attn`. TRL's packing and `tree_attention` around
  it run unchanged.
- TRL's MFU lookup `get_peak_flops_per_device` asks CUDA for the device's name (on a CPU
  build it raises); it answers None, what TRL answers for a device not in its table (MFU
  metrics off, the rest logged).
- The worker's guard `is_vllm_available()` (it refuses to start without the `vllm` package,
  which it never imports: it talks to the server over HTTP) is answered True.
- `FlakyGateway`: a proxy between the reward function and the gateway that forwards the
  first `/get_reward` and drops its answer (the connection closes without a response, as when
  a network path fails after the gateway has scored), so the SDK retries it with the same
  Idempotency-Key. It records every request's key and size and every answer.

Writes `records.json` in WORKDIR: per optimizer step, the samples the collator packed (group,
advantage, reward, completion tokens) and the advantages TRL's loss received per token.

MODE `sync` (default): `RubricateReward` (TRL's worker runs it in a thread); `async`:
`AsyncRubricateReward` (awaited on the worker's event loop).

usage: python trl_async_driver.py GATEWAY_URL WORKDIR [MODE]
"""

import json
import logging
import os
import pickle
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import torch
import trl.experimental.async_grpo.async_grpo_trainer as async_trainer
import trl.experimental.async_grpo.async_rollout_worker as rollout_worker
import trl.experimental.async_grpo.packing as packing
from datasets import Dataset
from tiny import SCRIPT, model, tokenizer
from transformers import AutoModelForCausalLM
from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

from rubricate_client.trl import AsyncRubricateReward, RubricateComponentRewards, RubricateReward

N = 4
STEPS = 2
QUESTIONS = [
    "why was the orbiter lost",
    "why was the navigation team lost",
    "why was the mars climate orbiter lost",
    "why was the thrust audit lost",
    "why was the metric error lost",
    "why was the imperial units error lost",
    "why was the final plan lost",
    "why was the search team lost",
]
"""Distinct prompts (the worker cycles the dataset; the worker may score a few groups ahead
of the trainer, none of them a repeat)."""
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "fields": {"content": {"close_pattern": r"</s>\s*|$", "content": "text"}},
}
"""TRL's worker parses each completion with the tokenizer's response template (it knows the
templates of a list of model families and asks for one otherwise): the whole text is the
assistant's content."""


# ------------------------------------------------------------------ FAKE vLLM server


class FakeVLLMServer:
    """FAKE vLLM server: the endpoints TRL's async worker and trainer call, answering scripted
    completions with log-probabilities from its own copy of the tiny model."""

    def __init__(self, model_dir: Path, tok: Any, max_model_len: int = 256) -> None:
        self.model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), attn_implementation="eager"
        )
        self.model.eval()
        self.tok = tok
        self.max_model_len = max_model_len
        self.lock = threading.Lock()
        """Held while weights are swapped in (pause … resume) and while a completion is scored."""
        self.counts: dict[tuple[int, ...], int] = {}
        self.order: list[tuple[int, ...]] = []
        self.requests = 0
        self.weight_syncs = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self.reply({})
                elif self.path == "/v1/models":
                    self.reply({"data": [{"id": "tiny", "max_model_len": fake.max_model_len}]})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                ids, logprobs = fake.complete(list(body["prompt"]), int(body["max_tokens"]))
                self.reply(
                    {"choices": [{"token_ids": ids, "logprobs": {"token_logprobs": logprobs}}]}
                )

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def complete(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float]]:
        """The k-th request for a prompt gets the k-th trajectory (mod N) of the prompt's
        script: the first prompt seen gets SCRIPT[0], the next SCRIPT[1], and so on."""
        key = tuple(prompt_ids)
        with self.lock:
            if key not in self.counts:
                self.counts[key] = 0
                self.order.append(key)
            k = self.counts[key]
            self.counts[key] += 1
            self.requests += 1
            text = SCRIPT[self.order.index(key) % len(SCRIPT)][k % N]
            ids = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
            ids = ids[:max_tokens]
            with torch.no_grad():
                logits = self.model(torch.tensor([prompt_ids + ids])).logits[0].float()
            logps = torch.log_softmax(logits, dim=-1)
            start = len(prompt_ids)
            values = [float(logps[start - 1 + i, t]) for i, t in enumerate(ids)]
        return ids, values

    def close(self) -> None:
        self.http.shutdown()


class InProcessWeightTransfer:
    """TRL's `WeightTransferProtocol` for the FAKE server: the trainer's tensors are copied
    into the server's model between pause and resume."""

    def __init__(self, server: FakeVLLMServer) -> None:
        self.server = server
        self.syncs = 0
        self.tensors = 0

    def init_weight_transfer(self) -> None:
        pass

    def pause(self) -> None:
        self.server.lock.acquire()

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.server.model.named_parameters())
        with torch.no_grad():
            for name, tensor in iterator:
                params[name].copy_(tensor)
                self.tensors += 1
        self.syncs += 1

    def resume(self) -> None:
        self.server.lock.release()

    def destroy(self) -> None:
        pass


# ------------------------------------------------------------------ REFERENCE attention


class ReferenceVarlenAttention:
    """REFERENCE for FlashAttention-3's `flash_attn_varlen_func` (CUDA only, fetched from the
    Hub): per segment s, the queries `q[cu_q[s]:cu_q[s+1]]` attend to the keys
    `k[cu_k[s]:cu_k[s+1]]`, causal aligned to the bottom right (a segment's queries are the
    last tokens of its key path), grouped-query heads repeated."""

    @staticmethod
    def flash_attn_varlen_func(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        softmax_scale: float | None = None,
        causal: bool = True,
        window_size: tuple[int, int] = (-1, -1),
        **kwargs: Any,
    ) -> torch.Tensor:
        assert causal and window_size == (-1, -1) and not kwargs, (causal, window_size, kwargs)
        heads, kv_heads = q.shape[1], k.shape[1]
        if kv_heads != heads:
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
        scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
        out = torch.zeros_like(q)
        bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        for s in range(len(bounds_q) - 1):
            q0, q1, k0, k1 = bounds_q[s], bounds_q[s + 1], bounds_k[s], bounds_k[s + 1]
            qs, ks, vs = (x.transpose(0, 1) for x in (q[q0:q1], k[k0:k1], v[k0:k1]))
            lq, lk = q1 - q0, k1 - k0
            allowed = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)
            scores = (qs @ ks.transpose(-1, -2)) * scale
            scores = scores.masked_fill(~allowed, float("-inf"))
            out[q0:q1] = (torch.softmax(scores.float(), dim=-1).to(vs.dtype) @ vs).transpose(0, 1)
        return out


def reference_kernel() -> ReferenceVarlenAttention:
    return ReferenceVarlenAttention()


# ------------------------------------------------------------------ a lossy path to the gateway


class FlakyGateway:
    """A proxy to the gateway that forwards the first `/get_reward` and drops its answer;
    records each request's Idempotency-Key and sample count, and each answer."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "connection")
                }
                with httpx.Client(timeout=600) as client:
                    answer = client.post(proxy.target + self.path, content=body, headers=headers)
                with proxy.lock:
                    first = not any(e["path"] == "/get_reward" for e in proxy.log)
                    dropped = first and self.path == "/get_reward"
                    request = json.loads(body)
                    proxy.log.append(
                        {
                            "path": self.path,
                            "key": self.headers.get("idempotency-key"),
                            "samples": len(request.get("query", [])),
                            "prompts": request.get("prompts"),
                            "query": request.get("query"),
                            "status": answer.status_code,
                            "answer": answer.json() if answer.status_code == 200 else None,
                            "dropped": dropped,
                            "replayed": answer.headers.get("idempotent-replayed") == "true",
                        }
                    )
                if dropped:  # the gateway scored it; the answer is lost on the way back
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


# ------------------------------------------------------------------ recording (changes nothing)

RECORDS: list[dict[str, Any]] = []
LOSSES: list[dict[str, Any]] = []
"""The collator runs one micro-batch ahead of the loss (the dataloader prefetches), so the
n-th loss record belongs to the n-th collated micro-batch."""
_collate = async_trainer.DataCollatorForRollout.torch_call


def recording_collate(
    self: async_trainer.DataCollatorForRollout, examples: list[Any]
) -> dict[str, Any]:
    """TRL's collator, recording the samples of the micro-batch (rank 0 holds it whole)."""
    (rows,) = examples
    RECORDS.append(
        {
            "samples": [
                {
                    "group_id": int(s["group_id"]),
                    "advantage": float(s["advantage"]),
                    "reward": s["metrics"]["reward"],
                    "completion": [
                        int(t)
                        for t, m in zip(s["input_ids"], s["completion_mask"], strict=True)
                        if m
                    ],
                }
                for row in rows
                for s in row.samples
            ]
        }
    )
    return _collate(self, examples)


class Recording(AsyncGRPOTrainer):  # type: ignore[misc]
    """TRL's AsyncGRPOTrainer, recording the advantage its loss gets on each trained token."""

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        selected = inputs["token_index"] >= 0
        mask = inputs["attention_mask"].bool()
        labels = inputs["shift_labels"][mask]
        targets = labels[inputs["token_index"][selected]].tolist()
        per_segment: dict[int, dict[str, list[Any]]] = {}
        for seg, target, adv in zip(
            inputs["segment_id"][selected].tolist(),
            targets,
            inputs["advantages"][selected].tolist(),
            strict=True,
        ):
            entry = per_segment.setdefault(seg, {"targets": [], "advantages": []})
            entry["targets"].append(target)
            entry["advantages"].append(adv)
        LOSSES.append(
            {
                "step": self.state.global_step,
                "segments": [per_segment[s] for s in sorted(per_segment)],
            }
        )
        return super().compute_loss(model, inputs, *args, **kwargs)


def main() -> None:
    url, workdir = sys.argv[1], Path(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "sync"
    captured: list[str] = []

    class Captured(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage())

    logging.getLogger("rubricate_client").addHandler(Captured())
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    tok = tokenizer(workdir / "tokenizer")
    tok.chat_template = CHAT_TEMPLATE
    tok.response_template = RESPONSE_TEMPLATE
    tok.padding_side = "left"
    model(workdir / "model", vocab_size=len(tok))

    # the stand-ins (see the module docstring)
    packing._flash_attn = reference_kernel
    rollout_worker.is_vllm_available = lambda *args, **kwargs: True
    async_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    async_trainer.DataCollatorForRollout.torch_call = recording_collate
    server = FakeVLLMServer(workdir / "model", tok)
    transfer = InProcessWeightTransfer(server)
    proxy = FlakyGateway(url)

    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": q}] for q in QUESTIONS],
            "label": [json.dumps({"question_id": f"async-q{i}"}) for i in range(len(QUESTIONS))],
        }
    )
    args = AsyncGRPOConfig(
        output_dir=str(workdir / "out"),
        per_device_train_batch_size=N,
        gradient_accumulation_steps=1,
        num_generations=N,
        max_completion_length=64,
        max_steps=STEPS,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=0,
        disable_tqdm=True,
        vllm_server_base_url=server.url,
        token_budget=0,  # TRL's fixed-count batcher: N samples per micro-batch
        max_inflight_tasks=N,
        queue_maxsize=N,
    )
    kind = AsyncRubricateReward if mode == "async" else RubricateReward
    reward = kind(proxy.url, kind="stagewise", group_size=N)
    try:  # the component functions cannot go to AsyncGRPO's worker (it would sum them raw)
        pickle.dumps(RubricateComponentRewards(url, group_size=N).reward_funcs)
        components_refused = ""
    except TypeError as exc:
        components_refused = str(exc)
    trainer = Recording(
        model=str(workdir / "model"),
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        weight_transfer=transfer,
    )
    trainer.train()
    server.close()
    trained = [{**batch, **loss} for batch, loss in zip(RECORDS, LOSSES, strict=False)]
    (workdir / "records.json").write_text(json.dumps({"records": trained}))
    with proxy.lock:
        calls = list(proxy.log)
    print(
        json.dumps(
            {
                "global_step": trainer.state.global_step,
                "log_history": trainer.state.log_history,
                "questions": QUESTIONS,
                "components_refused": components_refused,
                "weight_syncs": transfer.syncs,
                "weight_tensors": transfer.tensors,
                "completion_requests": server.requests,
                "gateway_calls": calls,
                "log_lines": captured,
                "vocab": tok.convert_ids_to_tokens(list(range(len(tok)))),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
