"""Every field of every endpoint's request and response models has its proto field, at every
depth: a field added to a Pydantic schema without its proto counterpart fails here (and the
gRPC call would answer `proto_mismatch`)."""

import typing
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from rubricate_client.endpoints import ENDPOINTS, Endpoint
from rubricate_client.endpoints import HTTP_ONLY as HTTP_ONLY_ENDPOINTS
from rubricate_client.protos import endpoint_types
from rubricate_client.wire import strip_annotations

JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def missing(model: type[BaseModel], desc: Any, *, response: bool, path: str) -> list[str]:
    found: list[str] = []
    for name, info in model.model_fields.items():
        wire = (info.serialization_alias if response else None) or info.alias or name
        field = desc.fields_by_name.get(wire)
        if field is None:
            found.append(f"{path}.{wire}")
            continue
        found += _value(info.annotation, field, response=response, path=f"{path}.{wire}")
    return found


def _value(tp: Any, field: Any, *, response: bool, path: str) -> list[str]:
    tp = strip_annotations(tp)
    msg = field.message_type
    if msg is None or msg.full_name in JSON_TYPES:
        return []
    if msg.GetOptions().map_entry:
        value_field = msg.fields_by_name["value"]
        args = typing.get_args(tp)
        return _value(args[1] if len(args) == 2 else Any, value_field, response=response, path=path)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if field.is_repeated and origin in (list, tuple) and args:
        return _inner(args[0], msg, response=response, path=f"{path}[]")
    return _inner(tp, msg, response=response, path=path)


def _inner(tp: Any, msg: Any, *, response: bool, path: str) -> list[str]:
    tp = strip_annotations(tp)
    if msg.full_name in JSON_TYPES:
        return []
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return missing(tp, msg, response=response, path=path)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is dict and args and typing.get_origin(strip_annotations(args[0])) is Literal:
        out: list[str] = []
        for key in typing.get_args(strip_annotations(args[0])):
            field = msg.fields_by_name.get(key)
            if field is None:
                out.append(f"{path}.{key}")
            else:
                out += _value(args[1], field, response=response, path=f"{path}.{key}")
        return out
    if origin in (list, tuple) and len(msg.fields) == 1 and msg.fields[0].is_repeated:
        return _value(tp, msg.fields[0], response=response, path=path)
    return []


RPC_ENDPOINTS = [e for e in ENDPOINTS if e.rpc is not None]


@pytest.mark.parametrize("endpoint", RPC_ENDPOINTS, ids=[e.name for e in RPC_ENDPOINTS])
def test_every_schema_field_has_a_proto_field(endpoint: Endpoint[Any, Any]) -> None:
    request_cls, response_cls = endpoint_types(endpoint)
    gaps = missing(endpoint.response, response_cls.DESCRIPTOR, response=True, path="response")
    if endpoint.has_body:
        gaps += missing(endpoint.request, request_cls.DESCRIPTOR, response=False, path="request")
    for name in endpoint.path_params:
        if name not in request_cls.DESCRIPTOR.fields_by_name:
            gaps.append(f"request.{name} (path parameter)")
    for name in endpoint.query_params:
        field = request_cls.DESCRIPTOR.fields_by_name.get(name)
        if field is None or not field.has_presence:
            gaps.append(f"request.{name} (query parameter: an optional field)")
    assert gaps == [], f"{endpoint.name}: fields without a proto field: {gaps}"


def test_every_endpoint_in_the_table_is_served_over_grpc() -> None:
    assert [e.name for e in ENDPOINTS if e.rpc is None] == []


def test_the_check_finds_a_nested_field_without_proto_field() -> None:
    from rubricate_client.endpoints import STAGEWISE_SCORE
    from rubricate_client.schemas.stagewise import Fallback, RolloutResult, StagewiseScoreResponse

    class NewFallback(Fallback):
        retry_after_s: float = 0.0

    class NewRollout(RolloutResult):
        fallback: NewFallback | None = None

    class NewResponse(StagewiseScoreResponse):
        rollouts: list[NewRollout]  # type: ignore[assignment]

    _, response_cls = endpoint_types(STAGEWISE_SCORE)
    gaps = missing(NewResponse, response_cls.DESCRIPTOR, response=True, path="response")
    assert gaps == ["response.rollouts[].fallback.retry_after_s"]


OPERATIONAL = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}
HTTP_ONLY = OPERATIONAL | {(e.method, e.path) for e in HTTP_ONLY_ENDPOINTS}
"""Gateway routes deliberately left out of the gRPC table: operational ones, and the client's
`HTTP_ONLY` (query parameters, file downloads and uploads, bank administration)."""


def test_every_gateway_route_is_in_the_endpoint_table_or_declared_http_only() -> None:
    from rubricate.common.dispatch import api_routes
    from rubricate.console.routes import PREFIX as CONSOLE
    from rubricate.gateway.app import create_app

    table = {(e.method, e.path) for e in ENDPOINTS}
    served = {
        (method, path)
        for path, route in api_routes(create_app().routes)
        for method in (route.methods or ())
        if method != "HEAD"
    }
    # the console's pages are HTML for browsers, not API routes (docs/console.md)
    console = {(m, p) for m, p in served if p == CONSOLE or p.startswith(CONSOLE + "/")}
    assert ("GET", f"{CONSOLE}/questions") in console
    routes = served - console
    assert routes - table - HTTP_ONLY == set(), (
        "new gateway routes: add an Endpoint in rubricate_client/endpoints.py (and its proto "
        "messages) or list it in HTTP_ONLY there"
    )
    assert table - routes == set(), "endpoints in the table without a gateway route"


def test_route_names_paths_and_grpc_methods_are_unique() -> None:
    from rubricate_client.endpoints import PUBLIC_ROUTES

    keys = [(e.method, e.path) for e in PUBLIC_ROUTES]
    assert len(keys) == len(set(keys))
    assert len({e.name for e in PUBLIC_ROUTES}) == len(PUBLIC_ROUTES)
    rpcs = [e.rpc for e in ENDPOINTS if e.rpc is not None]
    assert len(rpcs) == len(set(rpcs)) == len(ENDPOINTS)
    assert all(e.rpc is None for e in HTTP_ONLY_ENDPOINTS)


def test_query_parameters_in_the_table_are_those_of_the_gateway_routes() -> None:
    from rubricate.common.dispatch import api_routes
    from rubricate.gateway.app import create_app
    from rubricate_client.endpoints import PUBLIC_ROUTES

    routes = {
        (method, path): route
        for path, route in api_routes(create_app().routes)
        for method in (route.methods or ())
    }
    for endpoint in PUBLIC_ROUTES:
        declared = {
            p.alias for p in routes[(endpoint.method, endpoint.path)].dependant.query_params
        }
        assert set(endpoint.query_params) <= declared, endpoint.name
    listed = {e.name: e.query_params for e in PUBLIC_ROUTES if e.query_params}
    assert listed["audit_list"] == ("question_id", "limit")
