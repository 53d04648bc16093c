"""Sizes of the store's keys, shared by the tables, the wire models and the routes."""

from typing import Final

TENANT_LEN: Final = 64
TENANT_PATTERN: Final = r"^[A-Za-z0-9_.\-]+$"
QUESTION_ID_LEN: Final = 128
RUBRIC_ID_LEN: Final = 128
