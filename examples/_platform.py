"""Where the examples find a gateway: `--url` (default $RUBRICATE_URL or 127.0.0.1:8000, e.g.
`make serve`), or `--fake-judge`, which starts the whole platform in this process with a
FAKE judge that scores by markers in the text ([[excellent]] / [[poor]]): it judges nothing
and only shows the wiring, in seconds and without the model."""

import argparse
import asyncio
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", default=os.environ.get("RUBRICATE_URL", "http://127.0.0.1:8000"))
    p.add_argument(
        "--fake-judge",
        action="store_true",
        help="start an in-process platform with a FAKE judge (wiring demo, judges nothing)",
    )
    return p


@contextmanager
def gateway(args: argparse.Namespace) -> Iterator[dict[str, str]]:
    """{"http": url, "grpc": target}: the running gateway the example talks to."""
    if not args.fake_judge:
        yield {"http": args.url, "grpc": os.environ.get("RUBRICATE_GRPC", "127.0.0.1:50051")}
        return
    from rubricate.embedded import SERVICES, EmbeddedPlatform
    from rubricate.llm.settings import LLMSettings
    from rubricate.testing.fake_judge import FakeJudgeBackend

    ready = threading.Event()
    stop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    urls: dict[str, str] = {}
    failure: list[BaseException] = []

    async def serve(data_dir: Path) -> None:
        platform = EmbeddedPlatform(
            data_dir=data_dir,
            ports=dict.fromkeys(SERVICES, 0),
            backend=FakeJudgeBackend(),
            llm=LLMSettings(max_retries=1, backoff_base_s=0.01, backoff_max_s=0.02),
        )
        async with platform:
            urls.update(http=platform.urls["gateway"], grpc=platform.urls["gateway-grpc"])
            stop.append((asyncio.get_running_loop(), asyncio.Event()))
            ready.set()
            await stop[0][1].wait()

    def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                asyncio.run(serve(Path(tmp)))
            except BaseException as exc:
                failure.append(exc)
                ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(120)
    if failure or not urls:
        raise RuntimeError(f"the in-process platform did not start: {failure}")
    print(f"[fake judge] platform on {urls['http']} (gRPC {urls['grpc']})", flush=True)
    try:
        yield urls
    finally:
        loop, event = stop[0]
        loop.call_soon_threadsafe(event.set)
        thread.join(30)
