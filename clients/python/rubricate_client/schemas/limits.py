"""Sizes of the store's keys, shared by the tables, the wire models and the routes."""

from typing import Final

QUESTION_ID_LEN: Final = 128
RUBRIC_ID_LEN: Final = 128
SCORING_ID_LEN: Final = 64
MAX_LIST_OFFSET: Final = 10_000_000
"""The deepest row a paged list (`offset`) may start at: fits every database's integers."""
