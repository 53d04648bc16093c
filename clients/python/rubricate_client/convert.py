"""Pydantic wire models <-> protobuf messages, by field name, for every endpoint alike.

The proto messages mirror the JSON shapes of the HTTP API, field for field (a JSON key is a
proto field of the same name). Where JSON has shapes protobuf lacks, one rule each:
- a list inside a list (`lambda`, `scores`) is a message with one repeated field (`Matrix`
  of `Row`s); any JSON list may be sent as such a single-repeated-field message;
- a fixed-length JSON array (`[start, end]`) is a message whose fields are taken in
  field-number order (`Span`);
- an object with fixed keys (stage -> value) is a message with those fields; with free keys
  it is a `map<string, ...>` (a map of lists uses the single-repeated-field wrapper);
- free-form JSON is `google.protobuf.Struct` / `Value`.
Presence: `optional` scalars and message fields that are unset decode to null where the
Pydantic field allows it and are left out otherwise (so request defaults apply); decoding is
driven by the Pydantic type, so it knows whether a message stands for an object or a list.
"""

import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel

from rubricate_client.wire import allows_none, dict_value_type, list_item_type, strip_annotations

M = TypeVar("M", bound=BaseModel)
_JSON_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


class ProtoMismatch(ValueError):
    """A JSON value has no counterpart in the proto message (the proto is out of date)."""


# ---------------------------------------------------------------- encode: JSON -> message


def model_to_message(model: BaseModel, cls: type[Message], **extra: Any) -> Message:
    data = model.model_dump(mode="json", by_alias=True, exclude_unset=False)
    return json_to_message({**data, **extra}, cls)


def json_to_message(data: Mapping[str, Any], cls: type[Message]) -> Message:
    message = cls()
    _fill(message, data, str(message.DESCRIPTOR.full_name))
    return message


def _fill(message: Message, value: Any, where: str) -> None:
    desc: Any = message.DESCRIPTOR
    if desc.full_name in _JSON_TYPES:
        json_format.ParseDict(value, message)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            field = desc.fields_by_name.get(key)
            if field is None:
                raise ProtoMismatch(f"{where}.{key}: no such field in {desc.full_name}")
            if item is not None:
                _set(message, field, item, f"{where}.{key}")
        return
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        fields = desc.fields
        if len(fields) == 1 and _repeated(fields[0]):
            _set(message, fields[0], value, where)
            return
        ordered = sorted(fields, key=lambda f: f.number)
        if len(ordered) == len(value) and not any(_repeated(f) for f in ordered):
            for field, item in zip(ordered, value, strict=True):
                if item is not None:
                    _set(message, field, item, f"{where}.{field.name}")
            return
    raise ProtoMismatch(f"{where}: a {type(value).__name__} does not fit {desc.full_name}")


def _set(message: Message, field: Any, value: Any, where: str) -> None:
    if _is_map(field):
        if not isinstance(value, Mapping):
            raise ProtoMismatch(f"{where}: expected an object for map field {field.name}")
        container: Any = getattr(message, field.name)
        value_field = field.message_type.fields_by_name["value"]
        for key, item in value.items():
            if item is None:
                continue
            if value_field.message_type is not None:
                _fill(container[key], item, f"{where}.{key}")
            else:
                container[key] = _scalar(value_field, item, f"{where}.{key}")
        return
    if _repeated(field):
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise ProtoMismatch(f"{where}: expected a list for repeated field {field.name}")
        items: Any = getattr(message, field.name)
        for i, item in enumerate(value):
            if field.message_type is not None:
                _fill(items.add(), item, f"{where}[{i}]")
            else:
                items.append(_scalar(field, item, f"{where}[{i}]"))
        return
    if field.message_type is not None:
        sub: Message = getattr(message, field.name)
        sub.SetInParent()
        _fill(sub, value, where)
        return
    setattr(message, field.name, _scalar(field, value, where))


def _scalar(field: Any, value: Any, where: str) -> Any:
    if field.enum_type is not None and isinstance(value, str):
        number = field.enum_type.values_by_name.get(value)
        if number is None:
            raise ProtoMismatch(f"{where}: {value!r} is not in enum {field.enum_type.full_name}")
        return number.number
    if isinstance(value, Mapping | list | tuple):
        raise ProtoMismatch(f"{where}: a {type(value).__name__} for scalar field {field.name}")
    if field.cpp_type == FieldDescriptor.CPPTYPE_DOUBLE or field.cpp_type == (
        FieldDescriptor.CPPTYPE_FLOAT
    ):
        return float(value)
    if field.cpp_type in _INTEGERS and isinstance(value, str):
        try:  # a query parameter (given as text); proto3's JSON mapping reads these too
            return int(value)
        except ValueError:
            raise ProtoMismatch(f"{where}: {value!r} is not an integer") from None
    return value


_INTEGERS = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    }
)


# ---------------------------------------------------------------- decode: message -> model


def message_to_model(message: Message, model: type[M]) -> M:
    """Validate the message as `model` (pydantic ValidationError on bad input)."""
    return model.model_validate(message_to_json(message, model))


def message_to_json(message: Message, model: type[BaseModel]) -> dict[str, Any]:
    return _decode_model(message, model)


def _decode_model(message: Message, model: type[BaseModel]) -> dict[str, Any]:
    desc: Any = message.DESCRIPTOR
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        proto_name = info.serialization_alias or info.alias or name
        key = info.alias or name
        if isinstance(info.validation_alias, str):
            key = info.validation_alias
        field = desc.fields_by_name.get(proto_name)
        if field is None:
            continue
        present, value = _field_value(message, field, info.annotation)
        if present:
            out[key] = value
    return out


def _field_value(message: Message, field: Any, tp: Any) -> tuple[bool, Any]:
    """(present, JSON value) of one field, decoded towards the Pydantic type `tp`."""
    container: Any = getattr(message, field.name)
    if _repeated(field) and not len(container) and allows_none(tp):
        return True, None  # proto cannot tell an empty list from none: none where allowed
    if _is_map(field):
        value_tp = dict_value_type(tp)
        value_field = field.message_type.fields_by_name["value"]
        return True, {
            k: _decode(v, value_tp)
            if value_field.message_type is not None
            else _plain(value_field, v)
            for k, v in container.items()
        }
    if _repeated(field):
        item_tp = list_item_type(tp, 0)
        if field.message_type is not None:
            return True, [_decode(item, item_tp) for item in container]
        return True, [_plain(field, item) for item in container]
    if field.has_presence and not message.HasField(field.name):
        return (True, None) if allows_none(tp) else (False, None)
    if field.message_type is not None:
        return True, _decode(container, tp)
    return True, _plain(field, container)


def _decode(message: Message, tp: Any) -> Any:
    desc: Any = message.DESCRIPTOR
    if desc.full_name in _JSON_TYPES:
        return json_format.MessageToDict(message, preserving_proto_field_name=True)
    tp = strip_annotations(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _decode_model(message, tp)
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        fields = desc.fields
        if len(fields) == 1 and _repeated(fields[0]):
            return _field_value(message, fields[0], tp)[1]
        ordered = sorted(fields, key=lambda f: f.number)
        return [_field_value(message, f, list_item_type(tp, i))[1] for i, f in enumerate(ordered)]
    value_tp = dict_value_type(tp)
    out: dict[str, Any] = {}
    for field in desc.fields:
        present, value = _field_value(message, field, value_tp)
        if present:
            out[field.name] = value
    return out


def _plain(field: Any, value: Any) -> Any:
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


# ---------------------------------------------------------------- JSON -> model


# ---------------------------------------------------------------- typing helpers


def _repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _is_map(field: Any) -> bool:
    return (
        _repeated(field)
        and field.message_type is not None
        and field.message_type.GetOptions().map_entry
    )
