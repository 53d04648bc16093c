"""`rubricate corpus …`, `rubricate nuggets mine …` and `rubricate worker`.

The corpus and nuggets commands talk HTTP to the gateway (or the miner itself):
`--url`, default RUBRICATE_URL or http://127.0.0.1:8000, at the public routes of
`rubricate_client.endpoints` (CORPORA_INGEST, NUGGETS_MINE, GET_JOB, CANCEL_JOB).
"""

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubricate_client.endpoints import Endpoint

DEFAULT_URL = "http://127.0.0.1:8000"
UPLOAD_BYTES = 4 * 1024 * 1024
"""Documents per ingestion request are packed up to about this many bytes."""
TERMINAL = ("succeeded", "failed", "cancelled")


def _url(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("RUBRICATE_URL") or DEFAULT_URL).rstrip("/")


def _check(response: Any) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
            message = f"{error.get('type')}: {error.get('message')}"
        except (ValueError, KeyError, TypeError):
            message = response.text[:500]
        raise SystemExit(f"rubricate: HTTP {response.status_code}: {message}")
    body: dict[str, Any] = response.json()
    return body


def _batches(path: Path) -> list[list[dict[str, str]]]:
    from rubricate.mining.miner.loaders import format_of

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    root = path.parent if path.is_file() else path
    batches: list[list[dict[str, str]]] = [[]]
    size = 0
    for file in files:
        fmt = format_of(file)
        if fmt is None:
            continue
        content = file.read_text(encoding="utf-8", errors="replace")
        if not content.strip():
            continue
        if size and size + len(content) > UPLOAD_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(
            {"id": file.relative_to(root).as_posix(), "content": content, "format": fmt}
        )
        size += len(content)
    return [b for b in batches if b]


def _job_path(endpoint: "Endpoint[Any, Any]", job: dict[str, Any]) -> str:
    """The route of `endpoint` for the job `job` (its id escaped as a path segment)."""
    return endpoint.url_path({"job_id": str(job["id"])})


def _ingest(args: argparse.Namespace) -> int:
    import httpx
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from rubricate_client.endpoints import CORPORA_INGEST, GET_JOB

    console = Console()
    path = Path(args.path)
    if not path.exists():
        raise SystemExit(f"rubricate: {path} does not exist")
    with httpx.Client(base_url=_url(args), timeout=120) as client:
        if args.server_path:
            body = {"name": args.corpus, "path": str(path)}
            jobs = [_check(client.post(CORPORA_INGEST.path, json=body))]
        else:
            batches = _batches(path)
            if not batches:
                raise SystemExit(f"rubricate: no text/Markdown/reST/HTML/JSONL files in {path}")
            jobs = [
                _check(client.post(CORPORA_INGEST.path, json={"name": args.corpus, "documents": b}))
                for b in batches
            ]
        columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn())
        with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
            bar = progress.add_task(f"ingesting into {args.corpus}", total=None)
            while True:
                views = [_check(client.get(_job_path(GET_JOB, job))) for job in jobs]
                total = sum(int(v["progress"].get("documents_total") or 0) for v in views)
                done = sum(int(v["progress"].get("documents_done") or 0) for v in views)
                passages = sum(int(v["progress"].get("passages") or 0) for v in views)
                progress.update(
                    bar,
                    total=total or None,
                    completed=done,
                    description=f"ingesting into {args.corpus}: {passages} passages",
                )
                if all(v["state"] in TERMINAL for v in views):
                    break
                time.sleep(args.poll_s)
    failed = [v for v in views if v["state"] != "succeeded"]
    for v in failed:
        console.print(f"[red]job {v['id']} {v['state']}: {v.get('error')}")
    console.print(f"corpus {args.corpus}: {done} documents, {passages} passages indexed")
    return 1 if failed else 0


def _mine(args: argparse.Namespace) -> int:
    import httpx
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from rich.table import Table

    from rubricate_client.endpoints import CANCEL_JOB, GET_JOB, NUGGETS_MINE

    console = Console()
    body: dict[str, Any] = {"question": args.question, "corpus": args.corpus}
    for name in ("max_depth", "max_nodes", "rewrites_per_passage", "similarity_threshold"):
        value = getattr(args, name)
        if value is not None:
            body[name] = value
    with httpx.Client(base_url=_url(args), timeout=60) as client:
        job = _check(client.post(NUGGETS_MINE.path, json=body))
        max_nodes = int(job["params"].get("max_nodes") or 1)
        columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn())
        try:
            with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
                bar = progress.add_task("searching", total=max_nodes)
                while job["state"] not in TERMINAL:
                    time.sleep(args.poll_s)
                    job = _check(client.get(_job_path(GET_JOB, job)))
                    p = job["progress"]
                    stats = (
                        f"expanded {p.get('nodes_expanded', 0)} · kept {p.get('passages_kept', 0)}"
                        f" · nuggets {p.get('nuggets_so_far', 0)}"
                    )
                    if p.get("phase") == "search":
                        nodes = int(p.get("queries", 0)) + int(p.get("passages_kept", 0))
                        progress.update(
                            bar, total=max_nodes, completed=nodes, description=f"search: {stats}"
                        )
                    elif p.get("phase") == "extract":
                        progress.update(
                            bar,
                            total=max(1, int(p.get("passages_kept", 0))),
                            completed=int(p.get("passages_extracted", 0)),
                            description=f"extract: {stats}",
                        )
                    else:
                        progress.update(
                            bar, total=1, completed=0, description=f"{p.get('phase')}: {stats}"
                        )
                progress.update(bar, completed=progress.tasks[0].total)
        except KeyboardInterrupt:
            client.post(_job_path(CANCEL_JOB, job))
            console.print(f"cancelled job {job['id']}")
            return 130
    if job["state"] != "succeeded":
        console.print(f"[red]job {job['id']} {job['state']}: {job.get('error')}")
        return 1
    nuggets = job["result"]["nuggets"]
    table = Table(title=f"{len(nuggets)} nuggets · job {job['id']}")
    table.add_column("importance")
    table.add_column("nugget")
    table.add_column("passages")
    for n in nuggets:
        table.add_row(
            n["importance"], n["text"], ", ".join(p["passage_id"] for p in n["provenance"])
        )
    console.print(table)
    usage = job["result"].get("usage") or {}
    console.print(
        f"stop: {job['result'].get('stop_reason')} · queries {len(job['result']['queries'])}"
        f" · passages {len(job['result']['passages'])} · LLM calls {usage.get('calls', 0)}"
    )
    return 0


def _worker(args: argparse.Namespace) -> int:
    from rubricate.extras import require_role_extras

    require_role_extras("worker", backend=None)
    from rubricate.miner.celery_app import app

    argv = ["worker", f"--loglevel={args.loglevel}", f"--concurrency={args.concurrency}"]
    if args.pool:
        argv.append(f"--pool={args.pool}")
    app.worker_main(argv)
    return 0


def _demo_corpus(args: argparse.Namespace) -> int:
    from rubricate.miner.demo_corpus import subset

    print(subset(args.subset))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    corpus = sub.add_parser("corpus", help="corpora for nugget mining")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True)
    ingest = corpus_sub.add_parser(
        "ingest", help="ingest text/Markdown/reST/HTML/JSONL files (a file or a folder)"
    )
    ingest.add_argument("path")
    ingest.add_argument("--corpus", default="default", help="corpus name (default: default)")
    ingest.add_argument("--url", default=None, help=f"gateway or miner (default {DEFAULT_URL})")
    ingest.add_argument(
        "--server-path", action="store_true", help="PATH is on the miner (ingest roots only)"
    )
    ingest.add_argument("--poll-s", type=float, default=1.0)
    ingest.set_defaults(func=_ingest)
    demo = corpus_sub.add_parser(
        "demo", help="fetch the demo corpus (Debian python3.11-doc) and print its folder"
    )
    demo.add_argument("--subset", default="small", help="small | tutorial | howto | library | all")
    demo.set_defaults(func=_demo_corpus)

    nuggets = sub.add_parser("nuggets", help="nugget mining")
    nuggets_sub = nuggets.add_subparsers(dest="nuggets_command", required=True)
    mine = nuggets_sub.add_parser("mine", help="mine a question's nuggets from a corpus")
    mine.add_argument("--question", required=True)
    mine.add_argument("--corpus", required=True)
    mine.add_argument("--max-depth", type=int, default=None)
    mine.add_argument("--max-nodes", type=int, default=None)
    mine.add_argument("--rewrites-per-passage", type=int, default=None)
    mine.add_argument("--similarity-threshold", type=float, default=None)
    mine.add_argument("--url", default=None, help=f"gateway or miner (default {DEFAULT_URL})")
    mine.add_argument("--poll-s", type=float, default=1.0)
    mine.set_defaults(func=_mine)

    worker = sub.add_parser("worker", help="a Celery worker for mining and ingestion jobs")
    worker.add_argument("--concurrency", type=int, default=1)
    worker.add_argument("--pool", default=None, help="prefork (default) | solo | threads")
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(func=_worker)
