"""Sizes of the store's keys, shared by the tables, the wire models and the routes."""

from typing import Final

from rubricate.common.tenancy import TENANT_LEN as TENANT_LEN
from rubricate.common.tenancy import TENANT_PATTERN as TENANT_PATTERN

QUESTION_ID_LEN: Final = 128
RUBRIC_ID_LEN: Final = 128
