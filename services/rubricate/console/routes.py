"""The rubric console's pages (docs/console.md), served by the gateway under /console.

Server-rendered Jinja2 templates (autoescaped) with htmx for the live parts. Every page needs
a signed-in session (`console.session`); every form that changes something is a POST with a
CSRF token and from the console's own origin. Data comes from the public API only
(`console.api.ConsoleApi`), scoped to the session's tenant.
"""

import functools
import hashlib
import hmac
import inspect
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from rubricate.common.auth import AuthSettings, hash_key, key_actor
from rubricate.common.dispatch import RouteInvoker
from rubricate.console import session as sessions
from rubricate.console.api import ApiFailure, ConsoleApi
from rubricate.console.settings import ConsoleSettings
from rubricate.console.views import audit_charts, buffer_size_chart, pages, scoring_table
from rubricate_client.constants import STAGES
from rubricate_client.endpoints import (
    AUDIT_LIST,
    AUDIT_QUESTIONS,
    AUDIT_REPLAY,
    AUDIT_REPLAY_JOBS,
    AUDIT_SIGNALS,
    AUDIT_TRAJECTORIES,
    BANK_ITEM_CURATE,
    BANK_ITEM_HISTORY,
    BANK_ITEMS_LIST,
    BUFFER_HISTORY,
    GET_BUFFER,
    JOBS_LIST,
    QUESTIONS_LIST,
    RUBRIC_CURATE,
    RUBRIC_CURATIONS,
    SCORING_GET,
    SCORINGS_LIST,
)
from rubricate_client.headers import DEFAULT_TENANT, TENANT_PATTERN
from rubricate_client.schemas.audit import ReplayRequest
from rubricate_client.schemas.curation import BankItemCurationRequest, RubricCurationRequest
from rubricate_client.schemas.rubrics import RubricSpec

PREFIX: Final = "/console"
_HERE = Path(__file__).parent
_STATIC: Final = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
MAX_NAME_CHARS: Final = 60
MAX_FORM_BYTES: Final = 256 * 1024
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

router = APIRouter(prefix=PREFIX, include_in_schema=False)
templates = Environment(
    loader=FileSystemLoader(_HERE / "templates"),
    autoescape=select_autoescape(["html"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


# --- plumbing -----------------------------------------------------------------------------


def _settings(request: Request) -> ConsoleSettings:
    """Read once by the app that mounts the console (`gateway.app.create_app`)."""
    settings: ConsoleSettings = request.app.state.console_settings
    return settings


def _auth(request: Request) -> AuthSettings:
    auth = getattr(request.app.state, "auth", None)
    return auth if isinstance(auth, AuthSettings) else AuthSettings()


def _key(request: Request) -> bytes:
    key = getattr(request.app.state, "console_key", None)
    if key is None:
        settings, auth = _settings(request), _auth(request)
        if settings.secret is not None:
            secret = settings.secret.get_secret_value()
        elif auth.internal_token is not None:
            secret = hmac.new(
                auth.internal_token.get_secret_value().encode(), b"console", hashlib.sha256
            ).hexdigest()
        else:
            secret = secrets.token_hex(32)
        key = request.app.state.console_key = sessions.signing_key(secret)
    return bytes(key)


def _invoker(request: Request) -> RouteInvoker:
    invoker = getattr(request.app.state, "console_invoker", None)
    if invoker is None:
        invoker = request.app.state.console_invoker = RouteInvoker(request.app)
    return invoker


def _session(request: Request) -> sessions.Session | None:
    value = request.cookies.get(sessions.COOKIE_NAME)
    if not value:
        return None
    try:
        return sessions.read(_key(request), value)
    except sessions.SessionError:
        return None


def _api(request: Request, session: sessions.Session) -> ConsoleApi:
    return ConsoleApi(_invoker(request), _auth(request), tenant=session.tenant, actor=session.actor)


def _secure(request: Request) -> bool:
    mode = _settings(request).secure_cookie
    return mode == "always" or (mode == "auto" and request.url.scheme == "https")


def _render(
    request: Request,
    template: str,
    session: sessions.Session | None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    html = templates.get_template(template).render(
        session=session,
        csrf=sessions.csrf_token(_key(request), session) if session else "",
        csrf_field=sessions.CSRF_FIELD,
        prefix=PREFIX,
        path=request.url.path,
        notice=request.query_params.get("notice"),
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _to_login(request: Request) -> Response:
    target = f"{PREFIX}/login?" + urlencode({"next": request.url.path})
    if request.headers.get("HX-Request"):
        return Response(status_code=200, headers={"HX-Redirect": target, **SECURITY_HEADERS})
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


def _back(path: str, notice: str) -> RedirectResponse:
    sep = "&" if "?" in path else "?"
    return RedirectResponse(
        f"{path}{sep}{urlencode({'notice': notice})}", status_code=303, headers=SECURITY_HEADERS
    )


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form (the only kind the console's forms send), last value per field."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise ApiFailure(413, "form too large")
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in parsed.items()}


def _error(
    request: Request, session: sessions.Session | None, status: int, message: str
) -> HTMLResponse:
    return _render(
        request, "error.html", session, status=status, status_code=status, message=message
    )


def _refused(request: Request, session: sessions.Session | None, why: str) -> HTMLResponse:
    return _error(request, session, 403, why)


def _invalid(
    request: Request, session: sessions.Session, what: str, exc: Exception
) -> HTMLResponse:
    """A form whose values the API's request model refused (422)."""
    return _error(request, session, 422, f"Not a valid {what}: {exc}")


def _checked_post(
    request: Request, form: dict[str, str]
) -> tuple[sessions.Session | None, HTMLResponse | None]:
    """The session of a state-changing POST, or the refusal to send: no session, another
    origin, or a missing/wrong CSRF token."""
    session = _session(request)
    if session is None:
        return None, _refused(request, None, "Your session has ended: sign in again.")
    if not sessions.origin_allowed(
        request.headers.get("origin"), request.headers.get("referer"), request.headers.get("host")
    ):
        return None, _refused(request, session, "Refused: the form did not come from this page.")
    presented = form.get(sessions.CSRF_FIELD) or request.headers.get(sessions.CSRF_HEADER)
    if not sessions.csrf_valid(_key(request), session, presented):
        return None, _refused(request, session, "Refused: the form's security token is wrong.")
    return session, None


def _failure(request: Request, session: sessions.Session, exc: ApiFailure) -> HTMLResponse:
    status = exc.status if 400 <= exc.status < 600 else 502
    return _error(request, session, status, exc.message)


Handler = Callable[..., Awaitable[Response]]


def _signed_in(handler: Handler) -> Handler:
    """A page for a signed-in session: `handler(request, session, **path)`; without a
    session, a redirect to the sign-in page."""

    async def page(request: Request, **path: Any) -> Response:
        session = _session(request)
        if session is None:
            return _to_login(request)
        return await handler(request, session, **path)

    return _route(page, handler, injected=("session",))


def _checked(handler: Handler) -> Handler:
    """A state-changing POST: `handler(request, session, form, **path)` once `_checked_post`
    accepts the session, the origin and the CSRF token; else its refusal."""

    async def post(request: Request, **path: Any) -> Response:
        form = await _form(request)
        session, refusal = _checked_post(request, form)
        if refusal is not None or session is None:
            return refusal or _to_login(request)
        return await handler(request, session, form, **path)

    return _route(post, handler, injected=("session", "form"))


def _route(wrapper: Handler, handler: Handler, *, injected: tuple[str, ...]) -> Handler:
    """`wrapper` named as `handler`, with its signature less the `injected` parameters: the
    signature FastAPI reads for the route's parameters."""
    functools.update_wrapper(wrapper, handler)
    signature = inspect.signature(handler)
    kept = [p for p in signature.parameters.values() if p.name not in injected]
    setattr(wrapper, "__signature__", signature.replace(parameters=kept))  # noqa: B010
    return wrapper


def _int(value: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return min(hi, max(lo, int(value))) if value not in (None, "") else default
    except ValueError:
        return default


# --- sign-in ------------------------------------------------------------------------------


@router.get("/static/{name}")
async def static(name: str) -> Response:
    media = _STATIC.get(name)
    if media is None:
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(
        (_HERE / "static" / name).read_bytes(),
        media_type=media,
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


@router.get("", response_model=None)
@router.get("/", response_model=None)
async def home(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/questions", status_code=303)


@router.get("/login", response_model=None)
async def login_page(request: Request) -> Response:
    return _render(
        request,
        "login.html",
        None,
        open_mode=_auth(request).mode == "open",
        next=_safe_next(request.query_params.get("next")),
        error=None,
    )


def _safe_next(target: str | None) -> str:
    """Only a console path (never another site, nor `//host`)."""
    if target and target.startswith(PREFIX + "/") and not target.startswith("//"):
        return target
    return f"{PREFIX}/questions"


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    form = await _form(request)
    auth = _auth(request)
    open_mode = auth.mode == "open"
    target = _safe_next(form.get("next"))

    def again(error: str, status: int) -> HTMLResponse:
        return _render(
            request,
            "login.html",
            None,
            status=status,
            open_mode=open_mode,
            next=target,
            error=error,
        )

    if not sessions.origin_allowed(
        request.headers.get("origin"), request.headers.get("referer"), request.headers.get("host")
    ):
        return again("Refused: the sign-in form did not come from this page.", 403)
    name = " ".join(form.get("name", "").split())[:MAX_NAME_CHARS]
    if open_mode:
        tenant = form.get("tenant", "").strip() or DEFAULT_TENANT
        if not re.match(TENANT_PATTERN, tenant) or len(tenant) > 64:
            return again("A tenant name is letters, digits, '.', '_' or '-'.", 400)
        actor = f"{name} via console" if name else "console"
    else:
        key = form.get("key", "").strip()
        tenant_of_key = auth.key_table().get(hash_key(key)) if key else None
        if tenant_of_key is None:
            return again("Unknown API key.", 401)
        tenant = tenant_of_key
        who = f"{name} via console" if name else "console"
        actor = f"{who} ({key_actor(key)})"
    value = sessions.issue(
        _key(request), tenant=tenant, actor=actor, ttl_s=_settings(request).session_ttl_s
    )
    response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        sessions.COOKIE_NAME,
        value,
        max_age=_settings(request).session_ttl_s,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return response


@router.post("/logout", response_model=None)
@_checked
async def logout(request: Request, session: sessions.Session, form: dict[str, str]) -> Response:
    response = RedirectResponse(f"{PREFIX}/login", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(
        sessions.COOKIE_NAME, path=PREFIX, httponly=True, samesite="strict", secure=_secure(request)
    )
    return response


# --- questions ----------------------------------------------------------------------------


@router.get("/questions", response_model=None)
@_signed_in
async def questions(request: Request, session: sessions.Session) -> Response:
    api = _api(request, session)
    size = _settings(request).page_size
    q = request.query_params
    search = q.get("search", "")[:200]
    sort = q.get("sort", "recent")
    sort = sort if sort in ("recent", "question_id", "rubrics") else "recent"
    offset = _int(q.get("page"), 0, 0, 10**6) * size
    try:
        listing = await api.call(
            QUESTIONS_LIST, params={"search": search, "sort": sort, "offset": offset, "limit": size}
        )
    except ApiFailure as exc:
        return _failure(request, session, exc)
    audits: dict[str, Any] = {}
    audit_error = None
    ids = [item.question_id for item in listing.questions]
    if ids:
        try:
            found = await api.call(AUDIT_QUESTIONS, params={"question_ids": ",".join(ids)})
            audits = {a.question_id: a for a in found.questions}
        except ApiFailure as exc:
            audit_error = exc.message
    template = "_questions_table.html" if request.headers.get("HX-Request") else "questions.html"
    return _render(
        request,
        template,
        session,
        listing=listing,
        audits=audits,
        audit_error=audit_error,
        search=search,
        sort=sort,
        pager=pages(offset, size, listing.total),
        stages=STAGES,
    )


@router.get("/questions/{question_id}", response_model=None)
@_signed_in
async def question(request: Request, session: sessions.Session, question_id: str) -> Response:
    api = _api(request, session)
    path = {"question_id": question_id}
    try:
        buffer = await api.call(GET_BUFFER, params=path)
        history = await api.call(BUFFER_HISTORY, params=path)
        curations = await api.call(RUBRIC_CURATIONS, params=path)
        scorings = await api.call(SCORINGS_LIST, params={"question_id": question_id, "limit": 10})
    except ApiFailure as exc:
        return _failure(request, session, exc)
    chosen_id = request.query_params.get("scoring")
    chosen = None
    if chosen_id:
        try:
            chosen = await api.call(SCORING_GET, params={"scoring_id": chosen_id})
        except ApiFailure as exc:
            return _failure(request, session, exc)
        if chosen.question_id != question_id:
            chosen = None
    elif scorings.scorings:
        chosen = scorings.scorings[0]
    table = None
    trajectories_note = None
    if chosen is not None:
        trajectories = None
        try:
            kept = await api.call(AUDIT_TRAJECTORIES, params={"scoring_id": chosen.scoring_id})
            trajectories = kept.trajectories
            if trajectories is None:
                trajectories_note = "The trajectories of this scoring were not kept."
        except ApiFailure as exc:
            trajectories_note = (
                "The trajectories of this scoring were not kept (it was not audited)."
                if exc.status == 404
                else f"Trajectories unavailable: {exc.message}"
            )
        table = scoring_table(chosen, trajectories)
    return _render(
        request,
        "question.html",
        session,
        buffer=buffer,
        history=history.rubrics,
        chart=buffer_size_chart(history.rubrics),
        curations=curations.events,
        scorings=scorings.scorings,
        table=table,
        trajectories_note=trajectories_note,
        stages=STAGES,
    )


@router.post("/questions/{question_id}/rubrics/{rubric_id}", response_model=None)
@_checked
async def curate_rubric(
    request: Request,
    session: sessions.Session,
    form: dict[str, str],
    question_id: str,
    rubric_id: str,
) -> Response:
    action = form.get("action", "")
    reason = form.get("reason", "").strip() or None
    try:
        edit = None
        if action == "edit":
            edit = RubricSpec(
                title=form.get("title", ""),
                description=form.get("description", ""),
                weight=_int(form.get("weight"), 2, 1, 3),
                polarity="negative" if form.get("polarity") == "negative" else "positive",
            )
        body = RubricCurationRequest.model_validate(
            {"action": action, "edit": edit, "reason": reason}
        )
    except ValueError as exc:
        return _invalid(request, session, "change", exc)
    try:
        await _api(request, session).call(
            RUBRIC_CURATE, params={"question_id": question_id, "rubric_id": rubric_id}, body=body
        )
    except ApiFailure as exc:
        return _failure(request, session, exc)
    return _back(f"{PREFIX}/questions/{_quote(question_id)}", f"Rubric {action}: done.")


@router.post("/questions/{question_id}/replay", response_model=None)
@_checked
async def replay_question(
    request: Request, session: sessions.Session, form: dict[str, str], question_id: str
) -> Response:
    judge = form.get("judge", "reference")
    try:
        body = ReplayRequest.model_validate({"question_id": question_id, "judge": judge})
        job = await _api(request, session).call(AUDIT_REPLAY, body=body)
    except ValueError as exc:
        return _invalid(request, session, "replay", exc)
    except ApiFailure as exc:
        return _failure(request, session, exc)
    return _back(f"{PREFIX}/jobs", f"Replay {job.id} queued.")


def _quote(value: str) -> str:
    return quote(value, safe="")


# --- bank ---------------------------------------------------------------------------------


@router.get("/bank", response_model=None)
@_signed_in
async def bank(request: Request, session: sessions.Session) -> Response:
    size = _settings(request).page_size
    q = request.query_params
    status = q.get("status", "")
    status = status if status in ("pending", "approved", "retired") else ""
    search = q.get("search", "")[:200]
    offset = _int(q.get("page"), 0, 0, 10**6) * size
    try:
        listing = await _api(request, session).call(
            BANK_ITEMS_LIST,
            params={"status": status, "search": search, "offset": offset, "limit": size},
        )
    except ApiFailure as exc:
        return _failure(request, session, exc)
    return _render(
        request,
        "bank.html",
        session,
        listing=listing,
        status_filter=status,
        search=search,
        pager=pages(offset, size, listing.total),
    )


@router.get("/bank/{question_hash}", response_model=None)
@_signed_in
async def bank_item(request: Request, session: sessions.Session, question_hash: str) -> Response:
    try:
        history = await _api(request, session).call(
            BANK_ITEM_HISTORY, params={"question_hash": question_hash}
        )
    except ApiFailure as exc:
        return _failure(request, session, exc)
    return _render(request, "bank_item.html", session, history=history)


@router.post("/bank/{question_hash}", response_model=None)
@_checked
async def curate_bank_item(
    request: Request, session: sessions.Session, form: dict[str, str], question_hash: str
) -> Response:
    action = form.get("action", "")
    payload: dict[str, Any] = {
        "action": action,
        "reason": form.get("reason", "").strip() or None,
    }
    if action == "edit":
        payload["takeaways"] = _lines(form.get("takeaways", ""))
        rubrics = {
            key.removeprefix("rubrics."): _lines(value)
            for key, value in form.items()
            if key.startswith("rubrics.")
        }
        if rubrics:
            payload["rubrics"] = rubrics
    try:
        body = BankItemCurationRequest.model_validate(payload)
    except ValueError as exc:
        return _invalid(request, session, "change", exc)
    try:
        await _api(request, session).call(
            BANK_ITEM_CURATE, params={"question_hash": question_hash}, body=body
        )
    except ApiFailure as exc:
        return _failure(request, session, exc)
    back = form.get("back", "")
    target = back if back.startswith(f"{PREFIX}/bank") else f"{PREFIX}/bank"
    return _back(target, f"Bank item {action}: done.")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# --- audit and jobs -----------------------------------------------------------------------


@router.get("/audit", response_model=None)
@_signed_in
async def audit(request: Request, session: sessions.Session) -> Response:
    api = _api(request, session)
    question_id = request.query_params.get("question_id") or None
    try:
        signals = await api.call(AUDIT_SIGNALS, params={"question_id": question_id})
        latest = await api.call(AUDIT_LIST, params={"question_id": question_id, "limit": 50})
    except ApiFailure as exc:
        return _failure(request, session, exc)
    return _render(
        request,
        "audit.html",
        session,
        signals=signals,
        charts=audit_charts(signals),
        audits=latest.audits,
        question_id=question_id,
    )


async def _jobs(request: Request, session: sessions.Session) -> dict[str, Any]:
    api = _api(request, session)
    mining, replays, errors = None, None, []
    try:
        mining = (await api.call(JOBS_LIST, params={"limit": 50})).jobs
    except ApiFailure as exc:
        errors.append(f"Mining jobs: {exc.message}")
    try:
        replays = (await api.call(AUDIT_REPLAY_JOBS, params={"limit": 50})).jobs
    except ApiFailure as exc:
        errors.append(f"Replay jobs: {exc.message}")
    live = any(j.state in ("queued", "running") for j in (mining or [])) or any(
        j.state in ("queued", "running") for j in (replays or [])
    )
    return {"mining": mining, "replays": replays, "errors": errors, "live": live}


@router.get("/jobs", response_model=None)
@_signed_in
async def jobs(request: Request, session: sessions.Session) -> Response:
    return _render(request, "jobs.html", session, **await _jobs(request, session))


@router.get("/jobs/table", response_model=None)
@_signed_in
async def jobs_table(request: Request, session: sessions.Session) -> Response:
    """The jobs table alone: the page polls it while a job is queued or running."""
    return _render(request, "_jobs_table.html", session, **await _jobs(request, session))
