"""A tokenizer and a tiny randomly initialised causal LM, built offline (no downloads), for
the trainer drivers. Run inside a trainer virtualenv."""

from pathlib import Path
from typing import Any

WORDS = [
    "<think>",
    "</think>",
    "<structured_plan>",
    "</structured_plan>",
    "<call_tool>",
    "</call_tool>",
    "<tool_output>",
    "</tool_output>",
    "<review>",
    "</review>",
    "<answer>",
    "</answer>",
    "why",
    "was",
    "the",
    "orbiter",
    "lost",
    "plan",
    "search",
    "units",
    "metric",
    "imperial",
    "audit",
    "gaps",
    "final",
    "thrust",
    "navigation",
    "team",
    "error",
    "mars",
    "climate",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "[[excellent]]",
    "[[poor]]",
    "[[fail-stagewise]]",
    "[[fail-all]]",
]


def trajectory(marker: str, quality: str = "", *, review: bool = True) -> str:
    """A Plan/Research/Review/Answer trajectory in the tokenizer's words, one space between
    words (so decoding its token ids gives it back). `quality` is a fake-judge marker
    (`[[excellent]]`: every stage 2, `[[poor]]`: 0, none: 1, `[[fail-stagewise]]`: answer-only
    fallback, `[[fail-all]]`: unscored)."""
    q = quality
    parts = [
        f"<think> plan </think> <structured_plan> plan {q} {marker} </structured_plan>",
        f"<call_tool> search {q} {marker} </call_tool> <tool_output> units </tool_output>",
    ]
    if review:
        parts.append(f"<think> audit </think> <review> gaps {q} {marker} </review>")
    parts.append(f"<answer> final {marker} {q} </answer>")
    return " ".join(" ".join(parts).split())


SCRIPT = [
    # the first group: three full trajectories, one the judge scores on its answer only
    [
        trajectory("a", "[[excellent]]"),
        trajectory("b", "[[poor]]"),
        trajectory("c"),
        trajectory("d", "[[fail-stagewise]]"),
    ],
    # the second: one without a review stage, one the platform cannot score at all
    [
        trajectory("e", review=False),
        trajectory("f", "[[excellent]]"),
        trajectory("g", "[[fail-all]]"),
        trajectory("h", "[[poor]]"),
    ],
]
"""Two groups of four scripted Plan/Research/Review/Answer trajectories the TRL drivers'
completions come from (a random tiny model writes no stages); the markers drive the fake judge."""


def tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {w: i for i, w in enumerate([*specials, *dict.fromkeys(WORDS)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    fast.save_pretrained(str(folder))
    return fast


def model(folder: Path, vocab_size: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    net = LlamaForCausalLM(config)
    net.save_pretrained(str(folder))
    return net
