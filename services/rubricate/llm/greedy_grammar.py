"""Greedy decoding under a llama.cpp grammar that asks the grammar about the likeliest tokens
first (the embedded backend's path for temperature 0 with a JSON schema).

llama-cpp-python's sampler chain applies the grammar to every vocabulary entry before it
picks a token (some 150k for Qwen2.5): on two cores that was about 40 ms of a 140 ms token
(issue 35). Greedy decoding picks the highest logit among the tokens the grammar accepts, so
the same token is found by checking candidates in descending logit order: first the
`CANDIDATES` likeliest, then, only if the grammar accepts none of them, the whole vocabulary
(what llama.cpp's own common sampler does with `grammar_first` off). The output is the
token sequence llama-cpp-python's greedy path would produce.

Prompt-lookup drafting (lossless speculation): JSON output repeats itself (keys, closing
brackets, the phrases of similar criteria), and on two cores decoding a token costs about as
much as reading ten prompt tokens in one batch. So after each chosen token the tokens that
followed the latest earlier occurrence of the last `DRAFT_NGRAM` tokens (in the prompt or the
output so far) are proposed, up to `DRAFT_MAX`, and evaluated with it in one batch; each is
kept only while it is the token greedy decoding under the grammar would choose from the
logits before it, and the KV cache is cut back after the first that is not. What is kept is
what one-token-at-a-time decoding chooses (up to the floating-point rounding of batched
against single-token evaluation). On the demo's generation call (304 tokens) a simulation
needed 163 evaluation steps instead of 304 (docs/benchmarks.md).
"""

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from llama_cpp.llama import Llama

CANDIDATES: Final = 64
DRAFT_NGRAM: Final = 2
"""Tokens of context a draft is looked up by."""
DRAFT_MAX: Final = 6
"""Tokens proposed at most after each chosen token."""


@dataclass(frozen=True)
class Decoded:
    text: str
    tokens: list[int]
    finish_reason: str
    """"stop" (end of generation, a stop string, or cut short), "length" (max_tokens)."""
    drafted: int = 0
    """Tokens of `tokens` that came from an accepted draft (no decoding step of their own)."""


def decode_greedy(
    llm: "Llama",
    prompt: Sequence[int],
    *,
    grammar: str,
    root: str,
    max_tokens: int,
    stop: Sequence[str],
    cached: int,
    cut_short: Callable[[], bool],
) -> Decoded:
    """Evaluate `prompt` (its first `cached` tokens are in the KV cache already) and decode
    greedily under `grammar` until an end-of-generation token, a `stop` string (cut off, as
    llama-cpp-python does) or `max_tokens`. Raises ValueError for a grammar llama.cpp rejects
    and RuntimeError for a failed decode."""
    import llama_cpp
    import numpy as np

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), root.encode())
    if not sampler:
        raise ValueError("llama.cpp could not parse the grammar")
    n_vocab = llm.n_vocab()
    out: list[int] = []
    text = ""
    finish = "length"
    if max_tokens <= 0:
        llama_cpp.llama_sampler_free(sampler)
        return Decoded(text="", tokens=[], finish_reason="length")
    history = list(prompt)
    drafts = _Drafts(history) if _can_draft(llm) else None
    drafted = 0
    try:
        llm.n_tokens = min(cached, len(prompt) - 1)
        llm.eval(list(prompt[llm.n_tokens :]))
        rows: list[int] = [-1]  # the logits to choose from, in order
        proposed: list[int] = []  # the draft tokens evaluated after the pending one
        base = 0
        while True:
            pending: int | None = None
            for r, row in enumerate(rows):
                if cut_short():
                    finish = "stop"
                    break
                pointer = llama_cpp.llama_get_logits_ith(llm.ctx, row)
                logits = np.ctypeslib.as_array(pointer, shape=(n_vocab,))
                token = _choose(llama_cpp, sampler, logits)
                llama_cpp.llama_sampler_accept(sampler, token)
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                out.append(token)
                text = llm.detokenize(out).decode("utf-8", errors="ignore")
                cut = [text.index(s) for s in stop if s and s in text]
                if cut:
                    text = text[: min(cut)]
                    finish = "stop"
                    break
                if len(out) >= max_tokens:
                    finish = "length"
                    break
                if drafts is not None:
                    drafts.add(token)
                if r < len(proposed) and token == proposed[r]:
                    drafted += 1
                    continue  # drafted right: it is evaluated, its logits are the next row
                pending = token
                if r < len(proposed):  # the rest of the draft was evaluated on a wrong path
                    llm.n_tokens = base + r + 1
                break
            if pending is None:
                break
            proposed = [] if drafts is None else drafts.draft(max_tokens - len(out) - 1)
            base = llm.n_tokens
            if proposed:
                _eval_all_logits(llm, [pending, *proposed])
                rows = list(range(len(proposed) + 1))
            else:
                llm.eval([pending])
                rows = [-1]
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return Decoded(text=text, tokens=out, finish_reason=finish, drafted=drafted)


def _choose(llama_cpp: Any, sampler: Any, logits: Any) -> int:
    """The greedy token under the grammar: the likeliest the grammar accepts."""
    import numpy as np

    top = np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]
    top = top[np.argsort(-logits[top], kind="stable")]
    token = _first_accepted(llama_cpp, sampler, top, logits)
    if token is None:
        token = _first_accepted(llama_cpp, sampler, np.argsort(-logits, kind="stable"), logits)
    if token is None:  # the grammar accepts nothing: cannot happen for a valid one
        raise RuntimeError("no token satisfies the grammar")
    return token


class _Drafts:
    """Prompt-lookup drafts over a growing token history: for each `DRAFT_NGRAM`-gram, where
    its latest occurrence ended."""

    def __init__(self, history: list[int]) -> None:
        self.history = history
        self.after: dict[tuple[int, ...], int] = {}
        for end in range(DRAFT_NGRAM, len(history)):
            self.after[tuple(history[end - DRAFT_NGRAM : end])] = end

    def add(self, token: int) -> None:
        history = self.history
        if len(history) >= DRAFT_NGRAM:
            self.after[tuple(history[-DRAFT_NGRAM:])] = len(history)
        history.append(token)

    def draft(self, room: int) -> list[int]:
        """What followed the latest earlier occurrence of the last tokens (at most `room`)."""
        key = tuple(self.history[-DRAFT_NGRAM:])
        at = self.after.get(key)
        if at is None or room <= 0:
            return []
        return self.history[at : at + min(DRAFT_MAX, room)]


def _can_draft(llm: "Llama") -> bool:
    """Whether this llama-cpp-python exposes what a batch with logits for every token needs
    (its context and batch objects; else decoding goes one token at a time)."""
    return all(hasattr(llm, name) for name in ("_ctx", "_batch", "input_ids"))


def _eval_all_logits(llm: "Llama", tokens: list[int]) -> None:
    """`Llama.eval` for a short batch with the logits of every token kept (row i of the
    batch: `llama_get_logits_ith(ctx, i)`); the KV cache past `llm.n_tokens` is dropped
    first, as `eval` does."""
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
    n_past = llm.n_tokens
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past : n_past + len(tokens)] = tokens
    llm.n_tokens += len(tokens)


TOKEN_DATA: Final = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]
"""llama.cpp's `llama_token_data` as a NumPy record."""


def _first_accepted(llama_cpp: Any, sampler: Any, order: Any, logits: Any) -> int | None:
    """The first token of `order` (descending logits) that the grammar accepts, all checked
    in one `llama_sampler_apply`; None if it accepts none."""
    import numpy as np

    candidates = np.empty(len(order), dtype=TOKEN_DATA)
    candidates["id"] = order
    candidates["logit"] = logits[order]
    candidates["p"] = 0.0
    array = llama_cpp.llama_token_data_array(
        data=candidates.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
        size=len(order),
        selected=-1,
        sorted=False,
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
    allowed = np.flatnonzero(np.isfinite(candidates["logit"]))
    return int(candidates["id"][allowed[0]]) if len(allowed) else None
