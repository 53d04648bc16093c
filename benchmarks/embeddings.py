"""Sentence-embedding benchmark: the NumPy MiniLM against sentence-transformers. Prints figures;
asserts nothing.

Both embed the same sentences (default 500, batch 64) with the bundled all-MiniLM-L6-v2, each
in its own subprocess so that the peak RSS delta (peak RSS at the end minus the RSS before
anything heavy is imported: libraries, weights, activations) belongs to one backend. Per
backend: load time, sentences/second (best of --repeats timed passes after one warm-up batch;
with --rounds, the backends' subprocesses alternate and the best round counts), peak RSS delta,
whether torch was imported; then the throughput ratio and the largest difference between the
two backends' vectors.

The sentences are synthetic, from a fixed seed: about 60% question-like (8-25 words), 30%
passage-like (40-100 words) and 10% long (150-300 words, truncated at 256 tokens).

    python benchmarks/embeddings.py [--sentences 500] [--batch-size 64] [--repeats 3]
                                    [--rounds 1] [--threads N]
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BACKENDS = ("numpy", "sentence-transformers")

_VOCABULARY = (
    "the of and to in a is that for it as was with be by on not he this are or his from at"
    " which but have an they you were her she there been one all we their has would when if"
    " mission orbiter lander failure metric units navigation thrusters software engineers"
    " sourdough starter yeast flour bread dough fermentation bacteria acidity oven crust"
    " capital gains shares dividends tax allowance income return deadline Germany France"
    " vaccine trial immune response dose efficacy placebo cohort antibodies protein gene"
    " river flood storm rainfall delta sediment climate ocean temperature pressure wind"
    " court ruling statute appeal evidence contract liability plaintiff defendant judge"
    " chip transistor silicon wafer lithography memory cache latency bandwidth compiler"
    " 1999 2024 42 3.5% naïve café über résumé façade"
)
_QUESTION_STARTS = ("Why", "How", "What", "Which", "When", "Who", "Where", "Is it true that")


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocabulary = _VOCABULARY.split()
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.6:
            words = [rng.choice(vocabulary) for _ in range(rng.randint(8, 25))]
            out.append(f"{rng.choice(_QUESTION_STARTS)} {' '.join(words)}?")
        else:
            count = rng.randint(40, 100) if roll < 0.9 else rng.randint(150, 300)
            words = [rng.choice(vocabulary) for _ in range(count)]
            text = " ".join(words)
            out.append(text[0].upper() + text[1:] + ".")
    return out


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def worker(backend: str, n: int, batch_size: int, repeats: int, vectors_path: Path) -> None:
    """One backend in this process; prints one JSON line."""
    rss_before = _rss_kib()
    texts = sentences(n)
    started = time.perf_counter()
    import numpy as np

    from rubricate.common.embeddings import (
        EmbeddingSettings,
        NumpyMiniLMEmbedder,
        SentenceTransformerEmbedder,
    )

    settings = EmbeddingSettings(batch_size=batch_size)
    embedder = (
        NumpyMiniLMEmbedder(settings)
        if backend == "numpy"
        else SentenceTransformerEmbedder(settings)
    )
    load_s = time.perf_counter() - started
    embedder.embed(texts[:batch_size])  # warm-up
    best = float("inf")
    vectors: list[list[float]] = []
    for _ in range(repeats):
        started = time.perf_counter()
        vectors = embedder.embed(texts)
        best = min(best, time.perf_counter() - started)
    np.save(vectors_path, np.asarray(vectors, dtype=np.float32))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "backend": backend,
        "load_s": load_s,
        "sentences_per_s": n / best,
        "peak_rss_delta_mib": (peak_kib - rss_before) / 1024,
        "torch_imported": "torch" in sys.modules,
        "dim": embedder.dim,
    }
    print(json.dumps(result))


def run_backend(args: argparse.Namespace, backend: str, vectors_path: Path) -> dict[str, Any]:
    env = dict(os.environ)
    if args.threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.threads)
    command = [
        sys.executable,
        __file__,
        "--worker",
        backend,
        "--sentences",
        str(args.sentences),
        "--batch-size",
        str(args.batch_size),
        "--repeats",
        str(args.repeats),
        "--vectors",
        str(vectors_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{backend} worker failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="alternated runs; the best")
    parser.add_argument("--threads", type=int, default=0, help="BLAS/torch threads (0: all)")
    parser.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.sentences, args.batch_size, args.repeats, args.vectors)
        return

    import numpy as np

    print(
        f"{args.sentences} sentences, batch {args.batch_size}, "
        f"best of {args.repeats} passes x {args.rounds} rounds, "
        f"threads: {args.threads or 'all'} ({os.cpu_count()} CPUs)"
    )
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):  # alternated: load on a shared machine hits both alike
            for backend in BACKENDS:
                result = run_backend(args, backend, Path(tmp) / f"{backend}.npy")
                best = results.get(backend)
                if best is None or result["sentences_per_s"] > best["sentences_per_s"]:
                    results[backend] = result
        a = np.load(Path(tmp) / "numpy.npy")
        b = np.load(Path(tmp) / "sentence-transformers.npy")
    print(f"{'backend':<24}{'load s':>8}{'sent/s':>10}{'peak RSS Δ MiB':>16}{'torch':>7}")
    for backend, r in results.items():
        print(
            f"{backend:<24}{r['load_s']:>8.2f}{r['sentences_per_s']:>10.1f}"
            f"{r['peak_rss_delta_mib']:>16.0f}{'yes' if r['torch_imported'] else 'no':>7}"
        )
    ratio = (
        results["numpy"]["sentences_per_s"] / results["sentence-transformers"]["sentences_per_s"]
    )
    cosine = float((a * b).sum(axis=1).min())
    print(f"throughput numpy / sentence-transformers: {ratio:.2f}x")
    print(f"max |Δ| per component: {float(np.abs(a - b).max()):.2e}, min cosine: {cosine:.8f}")


if __name__ == "__main__":
    main()
