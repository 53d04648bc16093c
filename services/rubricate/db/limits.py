"""Sizes of the store's keys: the client's wire limits, plus the tenant's."""

from rubricate_client.headers import TENANT_LEN as TENANT_LEN
from rubricate_client.headers import TENANT_PATTERN as TENANT_PATTERN
from rubricate_client.schemas.limits import QUESTION_ID_LEN as QUESTION_ID_LEN
from rubricate_client.schemas.limits import RUBRIC_ID_LEN as RUBRIC_ID_LEN
from rubricate_client.schemas.limits import SCORING_ID_LEN as SCORING_ID_LEN
