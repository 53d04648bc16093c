"""Rubric curation and the question list through the public HTTP API (every service running,
SQLite store): the author comes from the caller's credential, errors are clear 4xx, and a
tenant sees and curates only its own questions."""

from typing import Any

import httpx

from tests.support.gateway import Running
from tests.support.rubrics import rubric

A = rubric("plans the search")
B = rubric("cites sources", stage="answer", weight=3)
EDIT = {"title": "cites primary sources", "description": "Names each claim's primary source."}


async def seed(running: Running, qid: str, *, tenant: str = "default") -> None:
    async with httpx.AsyncClient(base_url=running.platform.urls["store"]) as store:
        response = await store.post(
            f"/v1/buffers/{qid}/rubrics",
            json={
                "question": f"What about {qid}?",
                "rubrics": [A.model_dump(mode="json"), B.model_dump(mode="json")],
            },
            headers={"X-Rubricate-Tenant": tenant},
        )
    assert response.status_code == 200, response.text


async def curate(
    running: Running, qid: str, rid: str, body: dict[str, Any], **headers: str
) -> httpx.Response:
    return await running.client.post(
        f"/v1/buffers/{qid}/rubrics/{rid}/curate", json=body, headers=headers
    )


async def test_pin_retire_edit_with_the_author_recorded(running: Running) -> None:
    await seed(running, "units")
    actor = {"X-Rubricate-Actor": "Ada Lovelace"}
    pinned = await curate(running, "units", A.id, {"action": "pin", "reason": " key "}, **actor)
    assert pinned.status_code == 200, pinned.text
    out = pinned.json()
    assert out["rubric"]["pinned"] is True and out["buffer_version"] == 2
    assert out["event"]["author"] == "Ada Lovelace" and out["event"]["reason"] == "key"
    buffer = (await running.client.get("/v1/buffers/units")).json()
    assert buffer["rubrics"]["plan"][0]["pinned"] is True
    assert buffer["rubrics"]["answer"][0]["pinned"] is False

    edited = await curate(running, "units", B.id, {"action": "edit", "edit": EDIT})
    assert edited.status_code == 200, edited.text
    new = edited.json()["rubric"]
    assert new["title"] == EDIT["title"] and new["stage"] == "answer" and new["weight"] == 2
    assert edited.json()["event"]["author"] == "anonymous"  # open mode, no named actor
    buffer = (await running.client.get("/v1/buffers/units")).json()
    assert [r["id"] for r in buffer["rubrics"]["answer"]] == [new["id"]]

    history = (await running.client.get("/v1/buffers/units/history")).json()["rubrics"]
    by_id = {e["id"]: e for e in history}
    assert by_id[B.id]["replaced_by"] == new["id"] and by_id[B.id]["retired_by"] == "anonymous"
    assert by_id[new["id"]]["created_by"] == "anonymous"
    assert by_id[A.id]["pinned"] is True and by_id[A.id]["created_by"] is None

    events = (await running.client.get("/v1/buffers/units/curations")).json()["events"]
    assert [(e["action"], e["author"], e["subject"]) for e in events] == [
        ("edit", "anonymous", B.id),
        ("pin", "Ada Lovelace", A.id),
    ]
    assert events[0]["detail"] == {"replaced_by": new["id"]}


async def test_clear_errors(running: Running) -> None:
    await seed(running, "errs")
    missing = await curate(running, "nope", A.id, {"action": "pin"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    unknown = await curate(running, "errs", "r_unknown", {"action": "pin"})
    assert unknown.status_code == 404 and "r_unknown" in unknown.json()["error"]["message"]
    assert (await running.client.get("/v1/buffers/nope/curations")).status_code == 404

    assert (await curate(running, "errs", A.id, {"action": "retire"})).status_code == 200
    again = await curate(running, "errs", A.id, {"action": "retire"})
    assert again.status_code == 409, again.text
    assert again.json()["error"]["type"] == "conflict"
    assert "retired" in again.json()["error"]["message"]
    pin = await curate(running, "errs", A.id, {"action": "pin"})
    assert pin.status_code == 409
    into = {"title": B.title, "description": B.description}
    weight_only = await curate(
        running, "errs", B.id, {"action": "edit", "edit": {**into, "weight": 1}}
    )
    assert weight_only.status_code == 409 and "weight" in weight_only.json()["error"]["message"]

    for body in (
        {"action": "edit"},  # an edit needs `edit`
        {"action": "pin", "edit": EDIT},  # only an edit takes one
        {"action": "delete"},
        {"action": "pin", "author": "someone else"},  # the caller cannot name the author
        {"action": "pin", "reason": "x" * 1001},
    ):
        bad = await curate(running, "errs", B.id, body)
        assert bad.status_code == 422, (body, bad.text)
    events = (await running.client.get("/v1/buffers/errs/curations")).json()["events"]
    assert [e["action"] for e in events] == ["retire"]  # refused changes left no trace


async def test_another_tenant_cannot_see_or_curate(running: Running) -> None:
    await seed(running, "mine", tenant="acme")
    theirs = {"X-Rubricate-Tenant": "globex"}
    assert (await curate(running, "mine", A.id, {"action": "retire"}, **theirs)).status_code == 404
    listed = await running.client.get("/v1/buffers/mine/curations", headers=theirs)
    assert listed.status_code == 404
    questions = await running.client.get("/v1/questions", headers=theirs)
    assert questions.status_code == 200 and questions.json()["total"] == 0
    ours = await running.client.get("/v1/questions", headers={"X-Rubricate-Tenant": "acme"})
    assert [q["question_id"] for q in ours.json()["questions"]] == ["mine"]


async def test_the_question_list(running: Running) -> None:
    for qid in ("q-b", "q-a", "q-c"):
        await seed(running, qid)
    await curate(running, "q-a", A.id, {"action": "pin"})
    await curate(running, "q-c", B.id, {"action": "retire"})

    recent = await running.client.get("/v1/questions")
    assert recent.status_code == 200, recent.text
    out = recent.json()
    assert [q["question_id"] for q in out["questions"]] == ["q-c", "q-a", "q-b"]
    assert (out["total"], out["offset"], out["limit"]) == (3, 0, 50)
    q_c, q_a = out["questions"][0], out["questions"][1]
    assert q_c["per_stage"] == {"plan": 1, "research": 0, "review": 0, "answer": 0}
    assert (q_c["rubrics"], q_c["retired"], q_a["pinned"]) == (1, 1, 1)

    params = {"sort": "rubrics", "limit": "2", "offset": "0"}
    by_size = (await running.client.get("/v1/questions", params=params)).json()
    assert [q["question_id"] for q in by_size["questions"]] == ["q-a", "q-b"]
    assert by_size["total"] == 3 and by_size["limit"] == 2
    params = {"search": " Q-B ", "sort": "question_id"}
    search = await running.client.get("/v1/questions", params=params)
    assert [q["question_id"] for q in search.json()["questions"]] == ["q-b"]

    for bad in ({"sort": "size"}, {"limit": "0"}, {"limit": "201"}, {"offset": "-1"}):
        response = await running.client.get("/v1/questions", params=bad)
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["error"]["field"] in bad, response.text
