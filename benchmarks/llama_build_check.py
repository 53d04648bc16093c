"""Check and time one llama-cpp-python build on the embedded model, as the embedded backend uses it.

Run it with the interpreter of the venv whose `llama_cpp` is under test; run it once per build
(for example the trimmed wheel of `make setup` and a full build) on the same machine, one after
the other, and compare the lines it prints:

    .venv/bin/python benchmarks/llama_build_check.py \
        --model ~/.cache/rubricate/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf

It loads the model, tokenizes, reads a 558-token prompt, decodes under a JSON grammar built
from a schema (the backend's way), saves the state, decodes again from a fresh start after
`load_state` (must give the same text, at ~0 prompt tokens), and reads the last logits
through `llama_get_logits_ith` as choice scoring does. Prints one JSON line of timings.
"""

import argparse
import json
import os
import platform
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--label", default=sys.prefix)
    args = parser.parse_args()

    import llama_cpp
    from llama_cpp.llama import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: F401 (the backend's import)
    from llama_cpp.llama_grammar import LlamaGrammar

    t = time.perf_counter()
    llm = Llama(model_path=args.model, n_ctx=2048, n_threads=args.threads, verbose=False)
    load_s = time.perf_counter() - t

    rollout = " ".join(
        f"Step {i}: searched the documentation for the function, read its signature, and"
        f" checked the example against the test case number {i}."
        for i in range(18)
    )
    prompt = (
        "<|im_start|>system\nYou grade an agent's work against a rubric."
        " Answer in JSON.<|im_end|>\n"
        f"<|im_start|>user\nRubric: the agent verified its answer.\nTrajectory:\n{rollout}\n"
        "Give a score from 0 to 2 and a one-sentence reason.<|im_end|>\n<|im_start|>assistant\n"
    )
    schema = {
        "type": "object",
        "properties": {"score": {"enum": [0, 1, 2]}, "reason": {"type": "string"}},
        "required": ["score", "reason"],
    }
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)

    t = time.perf_counter()
    llm.eval(tokens)
    prompt_s = time.perf_counter() - t
    state = llm.save_state()

    def decode() -> tuple[str, int, float]:
        start = time.perf_counter()
        out = llm.create_completion(
            tokens, max_tokens=args.max_tokens, temperature=0.0, grammar=grammar
        )
        return (
            out["choices"][0]["text"],
            out["usage"]["completion_tokens"],
            time.perf_counter() - start,
        )

    text, n_out, gen_s = decode()
    try:
        valid_json = isinstance(json.loads(text), dict)
    except ValueError:  # cut by max_tokens
        valid_json = False
    llm.reset()
    t = time.perf_counter()
    llm.load_state(state)
    restore_s = time.perf_counter() - t
    text2, _, gen2_s = decode()
    pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    top = max(range(llm.n_vocab()), key=lambda i: pointer[i])

    print(
        json.dumps(
            {
                "label": args.label,
                "llama_cpp": llama_cpp.__version__,
                "machine": platform.machine(),
                "threads": args.threads,
                "load_s": round(load_s, 2),
                "prompt_tokens": len(tokens),
                "prompt_tok_per_s": round(len(tokens) / prompt_s, 1),
                "completion_tokens": n_out,
                "grammar_decode_tok_per_s": round(n_out / gen_s, 1),
                "after_load_state_s": round(gen2_s, 2),
                "load_state_s": round(restore_s, 3),
                "valid_json": valid_json,
                "same_text_after_restore": text == text2,
                "logits_top_token": top,
                "text": text[:80],
            }
        )
    )
    return 0 if text == text2 else 1


if __name__ == "__main__":
    sys.exit(main())
