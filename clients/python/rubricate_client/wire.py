"""Reading JSON into the wire models: typing helpers shared by the HTTP client and the gRPC
conversion (`convert`, which needs the `[grpc]` extra)."""

import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def json_to_model(data: Any, model: type[M]) -> M:
    """Validate a response's JSON as `model`, also where a field is written under a
    serialization alias the model does not accept on input (`"pass"` for `passed`)."""
    return model.model_validate(unalias(data, model))


def unalias(value: Any, tp: Any) -> Any:
    tp = strip_annotations(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(value, dict):
        out = dict(value)
        for name, info in tp.model_fields.items():
            wire = info.serialization_alias
            accepted = info.alias or name
            if wire and wire != accepted and info.validation_alias is None and wire in out:
                out[accepted] = out.pop(wire)
            key = accepted if accepted in out else wire
            if key in out:
                out[key] = unalias(out[key], info.annotation)
        return out
    if isinstance(value, list):
        return [unalias(v, list_item_type(tp, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        item_tp = dict_value_type(tp)
        return {k: unalias(v, item_tp) for k, v in value.items()}
    return value


def strip_annotations(tp: Any) -> Any:
    """Annotated[...] and Optional[...] removed; a union of several types stays as is."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def allows_none(tp: Any) -> bool:
    if tp is None or tp is type(None) or tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return allows_none(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return any(allows_none(a) for a in typing.get_args(tp))
    return False


def list_item_type(tp: Any, index: int) -> Any:
    tp = strip_annotations(tp)
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
        return args[index] if index < len(args) else Any
    return args[0] if args else Any


def dict_value_type(tp: Any) -> Any:
    tp = strip_annotations(tp)
    args = typing.get_args(tp)
    return args[1] if typing.get_origin(tp) in (dict, Mapping) and len(args) == 2 else Any
