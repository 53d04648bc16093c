"""`rubricate corpus ingest` and `rubricate nuggets mine` against a running platform."""

import asyncio
import uuid
from pathlib import Path

import pytest

from rubricate.cli import main
from tests.support.miner import Platform


async def test_ingest_then_mine_from_the_command_line(
    running: Platform, small_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = running.platform.urls["gateway"]
    corpus = f"cli-{uuid.uuid4().hex[:8]}"  # the CLI uses the default tenant
    code = await asyncio.to_thread(
        main, ["corpus", "ingest", str(small_corpus), "--corpus", corpus, "--url", url]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"corpus {corpus}: 3 documents" in out

    question = "How do I encode Python objects as JSON strings?"
    code = await asyncio.to_thread(
        main,
        [
            "nuggets",
            "mine",
            "--question",
            question,
            "--corpus",
            corpus,
            "--max-nodes",
            "12",
            "--similarity-threshold",
            "0.6",
            "--url",
            url,
            "--poll-s",
            "0.2",
        ],
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "nuggets · job" in out and "library/json.html#" in out
    assert "stop: " in out

    with pytest.raises(SystemExit) as failed:
        await asyncio.to_thread(
            main, ["nuggets", "mine", "--question", "q", "--corpus", "missing-corpus", "--url", url]
        )
    assert "HTTP 404" in str(failed.value) and "missing-corpus" in str(failed.value)
