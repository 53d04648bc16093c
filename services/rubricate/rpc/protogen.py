"""Draft proto messages from the gateway's Pydantic models (a development aid).

    python -m rubricate.rpc.protogen --prefix Nugget \\
        rubricate_client.schemas.nuggets:NuggetVerifyRequest \\
        --response rubricate_client.schemas.nuggets:NuggetVerifyResponse

prints message definitions that follow the shape rules of `rubricate_client.convert`. The output
is a draft to review and paste into `proto/rubricate/v1/*.proto` (field numbers are frozen
there once released); `tests/rpc/test_proto_coverage.py` checks that every field of every
endpoint model has its proto counterpart.
"""

import argparse
import datetime
import importlib
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel

from rubricate_client.wire import strip_annotations

KNOWN = {
    "UsageOut": "Usage",
    "Judgment": "Judgment",
    "RubricSpec": "RubricSpec",
    "Rubric": "Rubric",
    "Timing": "Timing",
    "RubricOut": "Rubric",
}
"""Models that already have a message in common.proto."""
_SCALARS = {str: "string", bool: "bool", int: "int64", float: "double", bytes: "bytes"}


class Generator:
    def __init__(self, *, prefix: str = "", known: dict[str, str] | None = None) -> None:
        self.prefix = prefix
        self.known = dict(KNOWN if known is None else known)
        self.messages: dict[str, list[str]] = {}
        self.done: dict[type[BaseModel], str] = {}

    def model(self, model: type[BaseModel], *, request: bool) -> str:
        if model.__name__ in self.known:
            return self.known[model.__name__]
        if model in self.done:
            return self.done[model]
        name = model.__name__
        if not name.startswith(self.prefix):
            name = self.prefix + name
        self.done[model] = name
        self.messages[name] = []
        lines: list[str] = []
        for number, (field_name, info) in enumerate(model.model_fields.items(), start=1):
            wire = (info.serialization_alias if not request else None) or info.alias or field_name
            has_default = not info.is_required()
            label, type_name = self.field_type(
                info.annotation, context=f"{name}{_camel(field_name)}", request=request
            )
            optional = (
                label == ""
                and not type_name.startswith("map<")
                and (_allows_none(info.annotation) or (request and has_default))
            )
            if label == "" and optional:
                label = "optional "
            lines.append(f"  {label}{type_name} {wire} = {number};")
        self.messages[name] = lines
        return name

    def field_type(self, tp: Any, *, context: str, request: bool) -> tuple[str, str]:
        """(label, type) of a field: label is '', 'repeated ' or 'map'."""
        tp = strip_annotations(tp)
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if _is_union(tp):
            return "", "google.protobuf.Value"
        if tp is Any or tp is object:
            return "", "google.protobuf.Value"
        if origin is Literal:
            return "", "int64" if all(isinstance(a, int) for a in args) else "string"
        if tp in _SCALARS:
            return "", _SCALARS[tp]
        if tp in (datetime.datetime, datetime.date):
            return "", "string"
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return "", self.model(tp, request=request)
        if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
            if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
                if args == (int, int):
                    return "", "Span"
                name = self._name(context)
                items = [
                    self.item_type(a, context=f"{context}V{i}", request=request)
                    for i, a in enumerate(args)
                ]
                self.messages[name] = [f"  {t} v{i} = {i + 1};" for i, t in enumerate(items)]
                return "", name
            item = args[0] if args else Any
            return "repeated ", self.item_type(item, context=f"{context}Item", request=request)
        if origin in (dict, typing.Mapping) or tp is dict:
            key, value = args if len(args) == 2 else (str, Any)
            if typing.get_origin(strip_annotations(key)) is Literal:
                name = self._name(context)
                _, value_type = self.field_type(value, context=f"{context}Value", request=request)
                label = "repeated " if _is_list(value) else ""
                opt = "optional " if _allows_none(value) and not label else ""
                self.messages[name] = [
                    f"  {label or opt}{value_type} {k} = {i + 1};"
                    for i, k in enumerate(typing.get_args(strip_annotations(key)))
                ]
                return "", name
            if strip_annotations(value) is Any:
                return "", "google.protobuf.Struct"
            value_type = self.item_type(value, context=f"{context}Value", request=request)
            return "", f"map<string, {value_type}>"
        return "", "google.protobuf.Value"

    def item_type(self, tp: Any, *, context: str, request: bool) -> str:
        """A type usable as a repeated item or map value (no nested repeated, no null)."""
        if _allows_none(tp) and strip_annotations(tp) is not Any:
            return "google.protobuf.Value"
        stripped = strip_annotations(tp)
        if _is_list(stripped):
            inner = typing.get_args(stripped)
            item = self.item_type(
                inner[0] if inner else Any, context=f"{context}Item", request=request
            )
            if item == "double":
                return "Values"
            name = self._name(context)
            self.messages[name] = [f"  repeated {item} items = 1;"]
            return name
        label, name = self.field_type(tp, context=context, request=request)
        if label:
            return "google.protobuf.Value"
        return name

    def _name(self, context: str) -> str:
        return context if context.startswith(self.prefix) else self.prefix + context

    def render(self) -> str:
        out = []
        for name, lines in self.messages.items():
            out.append(f"message {name} {{\n" + "\n".join(lines) + "\n}\n")
        return "\n".join(out)


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _is_list(tp: Any) -> bool:
    tp = strip_annotations(tp)
    return (
        typing.get_origin(tp) in (list, typing.Sequence)
        or tp is list
        or (typing.get_origin(tp) is tuple and typing.get_args(tp)[1:] == (Ellipsis,))
    )


def _allows_none(tp: Any) -> bool:
    if tp is None or tp is type(None):
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _allows_none(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return any(_allows_none(a) for a in typing.get_args(tp))
    return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--response", action="append", default=[], help="module:Model")
    parser.add_argument("requests", nargs="*", help="module:Model")
    args = parser.parse_args(argv)
    gen = Generator(prefix=args.prefix)
    for spec, request in [(s, True) for s in args.requests] + [(s, False) for s in args.response]:
        module, _, name = spec.partition(":")
        gen.model(getattr(importlib.import_module(module), name), request=request)
    print(gen.render())


if __name__ == "__main__":
    main()
