"""The generated proto modules (`rubricate_client.v1.*_pb2`, built by `make proto`) and the
request/response message classes of each gRPC method."""

import functools
import importlib
import pkgutil
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message

from rubricate_client.endpoints import PROTO_PACKAGE, Endpoint

GENERATED_PACKAGE = "rubricate_client.v1"


class ProtoNotGenerated(RuntimeError):
    pass


@functools.cache
def load_generated() -> tuple[str, ...]:
    """Import every generated module once; their descriptors join the default pool."""
    try:
        package = importlib.import_module(GENERATED_PACKAGE)
    except ImportError as exc:
        raise ProtoNotGenerated(
            "the gRPC code is not generated: run `make proto` (or `make setup`)"
        ) from exc
    names = sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if m.name.endswith("_pb2")
    )
    for name in names:
        importlib.import_module(f"{GENERATED_PACKAGE}.{name}")
    if not names:
        raise ProtoNotGenerated(f"{GENERATED_PACKAGE} has no *_pb2 modules: run `make proto`")
    return tuple(names)


@functools.cache
def method_types(service: str, method: str) -> tuple[type[Message], type[Message]]:
    load_generated()
    pool = descriptor_pool.Default()
    try:
        desc = pool.FindServiceByName(f"{PROTO_PACKAGE}.{service}").methods_by_name[method]
    except KeyError as exc:
        raise ProtoNotGenerated(
            f"no rpc {PROTO_PACKAGE}.{service}/{method} in the generated code: "
            "add it to proto/rubricate/v1/ and run `make proto`"
        ) from exc
    return (
        message_factory.GetMessageClass(desc.input_type),
        message_factory.GetMessageClass(desc.output_type),
    )


def endpoint_types(endpoint: Endpoint[Any, Any]) -> tuple[type[Message], type[Message]]:
    if endpoint.rpc is None:
        raise ValueError(f"{endpoint.name} has no gRPC method")
    return method_types(*endpoint.rpc)
