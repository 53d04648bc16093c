"""The `rubricate` command: serve services, run the demo, migrate, prepare the model."""

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rubricate.extras import configured_backend, require_role_extras

SERVICES = ("gateway", "rubric-generator", "verifier", "store", "miner", "all")
SERVICE_PORTS = {
    "gateway": 8000,
    "rubric-generator": 8001,
    "verifier": 8002,
    "store": 8003,
    "miner": 8004,
}
"""Each service's default port: rubricate.embedded.DEFAULT_PORTS, which is not imported for one
service because rubricate.embedded imports every service (and so every role's extra)."""


def _serve(args: argparse.Namespace) -> int:
    # before anything imports the role's dependencies: one line naming the missing extra
    require_role_extras(args.service, backend=configured_backend())

    import uvicorn

    from rubricate.common.logging import configure_logging

    if args.service == "all":
        from rubricate.console.settings import ConsoleSettings
        from rubricate.embedded import DEFAULT_PORTS, EmbeddedPlatform

        # embedded mode is for people at a terminal: text lines unless RUBRICATE_LOG_FORMAT says
        configure_logging(
            service="embedded", fmt=None if os.environ.get("RUBRICATE_LOG_FORMAT") else "text"
        )

        async def run_all() -> None:
            ports = dict(DEFAULT_PORTS)
            if args.port:
                ports = {
                    name: args.port + offset
                    for name, offset in (
                        ("gateway", 0),
                        ("rubric-generator", 1),
                        ("verifier", 2),
                        ("store", 3),
                        ("miner", 4),
                    )
                }
            async with EmbeddedPlatform(
                data_dir=Path(args.data_dir), host=args.host, ports=ports
            ) as platform:
                grpc_at = platform.urls.get("gateway-grpc", "off")
                gateway_url = f"http://{args.host}:{ports['gateway']}"
                print(
                    f"rubricate: embedded platform on {gateway_url}"
                    f" (gateway; gRPC {grpc_at}). Ctrl-C to stop.",
                    flush=True,
                )
                if ConsoleSettings().enabled:
                    print(f"rubricate: rubric console on {gateway_url}/console", flush=True)
                await asyncio.Event().wait()

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_all())
        return 0

    factory = {
        "gateway": "rubricate.gateway.app:create_app",
        "rubric-generator": "rubricate.rubric_generator.app:create_app",
        "verifier": "rubricate.verifier.app:create_app",
        "store": "rubricate.store.app:create_app",
        "miner": "rubricate.miner.app:create_app",
    }[args.service]
    port = args.port or SERVICE_PORTS[args.service]
    from rubricate.common.auth import AuthSettings, assert_safe_bind

    configure_logging(service=args.service)  # JSON lines with request ids, from the first line
    assert_safe_bind(AuthSettings(), host=args.host, service=args.service)
    if args.service == "gateway":  # gRPC listens where HTTP does unless configured
        os.environ.setdefault("RUBRICATE_GATEWAY_GRPC_HOST", args.host)
    uvicorn.run(
        factory,
        factory=True,
        host=args.host,
        port=port,
        log_level="info",
        log_config=None,  # uvicorn's loggers propagate to the JSON handler
        access_log=False,  # RequestContextMiddleware logs http.request with the request id
        # a trainer may open one connection per sample of a step (OpenRLHF: 4,096 at once)
        backlog=8192,
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    require_role_extras("demo", backend=configured_backend())
    from rubricate.demo import run_demo

    return run_demo(data_dir=Path(args.data_dir) if args.data_dir else None)


def _migrate(_: argparse.Namespace) -> int:
    from rubricate.common.logging import configure_logging
    from rubricate.db.migrate import upgrade_to_head
    from rubricate.store.settings import StoreSettings

    configure_logging(service="migrate")
    settings = StoreSettings()
    upgrade_to_head(settings.database_url)
    print("rubricate: database migrated to head")
    return 0


def _model(_: argparse.Namespace) -> int:
    from rubricate.llm.model_files import resolve_model_path
    from rubricate.llm.settings import LLMSettings

    print(resolve_model_path(LLMSettings()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rubricate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run one service, or all of them embedded")
    serve.add_argument("service", choices=SERVICES)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="default: the service's own port")
    serve.add_argument("--data-dir", default="var", help="embedded mode's SQLite and caches")
    serve.set_defaults(func=_serve)

    demo = sub.add_parser("demo", help="score a bundled rollout group on the embedded model")
    demo.add_argument("--data-dir", default=None, help="default: a fresh temporary directory")
    demo.set_defaults(func=_demo)

    store = sub.add_parser("store", help="store maintenance")
    store_sub = store.add_subparsers(dest="store_command", required=True)
    store_sub.add_parser("migrate", help="run database migrations to head").set_defaults(
        func=_migrate
    )

    model = sub.add_parser("model", help="embedded model files")
    model_sub = model.add_subparsers(dest="model_command", required=True)
    model_sub.add_parser("ensure", help="join and verify the embedded model").set_defaults(
        func=_model
    )

    from rubricate.admin_cli import register as register_admin

    register_admin(sub)
    from rubricate.evaluation.cli import register as register_eval

    register_eval(sub)
    from rubricate.miner.cli import register as register_miner

    register_miner(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("rubricate").setLevel(logging.INFO)
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
