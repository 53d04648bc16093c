"""Rows read into the values the services hand on: a record or view whose fields are, by
name, the row's columns, with the datetimes read as UTC (`as_utc`: SQLite hands them back
naive) and the fields that are not a plain copy given by the caller."""

import dataclasses
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from rubricate.db.base import as_utc

T = TypeVar("T")


def utc_or_none(value: datetime | None) -> datetime | None:
    """`as_utc` of a nullable column."""
    return None if value is None else as_utc(value)


def _field_names(cls: type[Any]) -> list[str]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return list(cls.model_fields)
    return [field.name for field in dataclasses.fields(cls)]


def from_row(cls: type[T], row: object, **given: Any) -> T:
    """`cls` (a dataclass or a pydantic model) built from `row`: each field that `given`
    does not name is the row's attribute of the same name, a datetime in UTC."""
    values = dict(given)
    for name in _field_names(cls):
        if name not in values:
            value = getattr(row, name)
            values[name] = as_utc(value) if isinstance(value, datetime) else value
    return cls(**values)
