"""The gateway's mining routes with no miner configured: the job list answers as every
mining route does, a 503 in the one error shape."""

import httpx
from fastapi import FastAPI

from rubricate.common.app import create_service_app
from rubricate.common.upstream import ServiceClient, Upstreams
from rubricate.mining.gateway import routes
from rubricate_client.endpoints import CORPORA_LIST, JOBS_LIST


def gateway_without_miner() -> FastAPI:
    app = create_service_app(service="gateway", title="gateway", routers=[routes.router])
    unused = ServiceClient(service="store", base_url="http://127.0.0.1:9", timeout_s=1, retries=0)
    app.state.upstreams = Upstreams(generator=unused, verifier=unused, store=unused, miner=None)
    return app


async def test_without_a_miner_the_job_list_is_503_as_the_other_mining_routes() -> None:
    transport = httpx.ASGITransport(app=gateway_without_miner())
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        answers = [
            await client.get(JOBS_LIST.path),
            await client.get(JOBS_LIST.path, params={"state": "running"}),
            await client.get(CORPORA_LIST.path),
        ]
    for response in answers:
        assert response.status_code == 503, response.text
        assert response.json()["error"]["type"] == "upstream_unreachable"
