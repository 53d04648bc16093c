"""`make demo`: start the embedded platform, score a bundled group, print R, G, A and rubrics."""

import asyncio
import json
import logging
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from rubricate.embedded import EmbeddedPlatform
from rubricate_client.constants import STAGES
from rubricate_client.endpoints import STAGEWISE_SCORE

console = Console()


def load_example() -> dict[str, Any]:
    text = resources.files("rubricate.examples").joinpath("stagewise_group.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


class _EventFeed(logging.Handler):
    """Collects the services' log events so the progress line can show the latest."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.events: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("rubricate."):
            self.events.append(record.getMessage())


async def _run(data_dir: Path) -> int:
    feed = _EventFeed()
    root = logging.getLogger("rubricate")
    root.addHandler(feed)
    root.setLevel(logging.INFO)
    root.propagate = False
    group = load_example()
    started = time.perf_counter()
    with console.status("Loading the embedded model and starting the services…"):
        platform = EmbeddedPlatform(
            data_dir=data_dir,
            ports=dict.fromkeys(("gateway", "rubric-generator", "verifier", "store"), 0),
        )
        await platform.start()
    console.print(
        f"[green]✓[/] platform up in {time.perf_counter() - started:.1f}s "
        f"(gateway {platform.urls['gateway']}, model {_model_name(platform)})"
    )
    n = len(group["rollouts"])
    console.print(
        f"Scoring {n} rollouts of: [bold]{group['question']}[/]\n"
        f"One rubric-generation call for the group, then one scoring call per rollout."
    )
    try:
        async with httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=1800) as client:
            request = asyncio.create_task(client.post(STAGEWISE_SCORE.path, json=group))
            t0 = time.perf_counter()
            shown = 0
            with Live(console=console, refresh_per_second=4, transient=True) as live:
                while not request.done():
                    for event in feed.events[shown:]:
                        live.console.print(f"  [dim]{time.perf_counter() - t0:5.0f}s[/] {event}")
                    shown = len(feed.events)
                    latest = feed.events[-1] if feed.events else "waiting for the model"
                    scored = sum(1 for e in feed.events if e.startswith("stages.scored"))
                    generated = any(e.startswith("rubrics.generated") for e in feed.events)
                    step = "scoring" if generated else "generating rubrics"
                    line = Text(
                        f" {step} · {scored} scoring calls done · "
                        f"{time.perf_counter() - t0:5.0f}s · {latest}"
                    )
                    live.update(Spinner("dots", text=line))
                    await asyncio.sleep(0.25)
            response = request.result()
        # the rewards first: stopping waits for background work (the audit's reference
        # judge may be re-scoring this group; its call in flight is cut short)
        if response.status_code != 200:
            console.print(f"[red]request failed: HTTP {response.status_code}[/]\n{response.text}")
            return 1
        _print_result(response.json())
        console.print(f"[green]rewards in {time.perf_counter() - started:.0f}s[/]")
    finally:
        with console.status("Stopping the services…"):
            await platform.stop()
        root.removeHandler(feed)
    console.print(f"[green]done in {time.perf_counter() - started:.0f}s[/]")
    return 0


def _model_name(platform: EmbeddedPlatform) -> str:
    return platform.backend.model if platform.backend is not None else "?"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}" if value < 0 else f"{value:.2f}"


def _print_result(body: dict[str, Any]) -> None:
    table = Table(title="Stage scores R, SS-GRPO returns G and advantages A")
    table.add_column("rollout")
    table.add_column("")
    for stage in STAGES:
        table.add_column(stage, justify="right")
    table.add_column("notes")
    for r in body["rollouts"]:
        notes = []
        if r["missing_stages"]:
            notes.append("missing: " + ", ".join(r["missing_stages"]))
        if r["fallback"]:
            notes.append(f"fallback: {r['fallback']['kind']}")
        for n, (key, label) in enumerate((("scores", "R"), ("returns", "G"), ("advantages", "A"))):
            values = r[key] or {}
            table.add_row(
                r["id"] if n == 0 else "",
                label,
                *(_fmt(values.get(stage)) for stage in STAGES),
                "; ".join(notes) if n == 0 else "",
                end_section=n == 2,
            )
    console.print(table)

    rubrics = Table(title="Judge rubrics used (buffer after generation)")
    for col in ("stage", "origin", "±", "w", "title"):
        rubrics.add_column(col)
    for stage in STAGES:
        for rb in body["rubrics"][stage]:
            pruned = " [dim](pruned)[/]" if rb["id"] in body["pruned"] else ""
            sign = "+" if rb["polarity"] == "positive" else "−"
            rubrics.add_row(stage, rb["origin"], sign, str(rb["weight"]), rb["title"] + pruned)
    console.print(rubrics)
    gen = body["generation"]
    if gen["status"] == "failed":
        console.print(f"[yellow]rubric generation failed (no new rubrics): {gen['error']}[/]")
    usage, timing = body["usage"], body["timing"]
    console.print(
        f"LLM calls {usage['calls']}, prompt tokens {usage['prompt_tokens']}, completion tokens "
        f"{usage['completion_tokens']}, model time {usage['latency_s']:.1f}s; "
        f"request {timing['total_s']:.1f}s, gateway overhead {timing['overhead_s'] * 1000:.1f} ms"
    )


def run_demo(*, data_dir: Path | None = None) -> int:
    if data_dir is not None:
        return asyncio.run(_run(data_dir))
    with tempfile.TemporaryDirectory(prefix="rubricate-demo-") as tmp:
        return asyncio.run(_run(Path(tmp)))
