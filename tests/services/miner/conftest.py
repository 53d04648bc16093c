"""The miner's platform and corpora (`tests/support/miner.py`)."""

from tests.support.miner import python_docs, running, small_corpus

__all__ = ["python_docs", "running", "small_corpus"]
