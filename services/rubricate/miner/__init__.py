"""The miner service: corpora (Qdrant), nugget-mining jobs on Celery workers, mined nuggets."""
