"""Console sessions (`console.session`): the cookie proves tenant and actor until it expires,
cannot be forged or altered, and its CSRF token is bound to it."""

import pytest

from rubricate.console import session as s

KEY = s.signing_key("a" * 64)
OTHER = s.signing_key("b" * 64)


def test_a_session_reads_back_until_it_expires() -> None:
    value = s.issue(KEY, tenant="team-a", actor="Ada via console (key:abc)", ttl_s=60, now=1000)
    got = s.read(KEY, value, now=1059)
    assert (got.tenant, got.actor, got.expires_at) == ("team-a", "Ada via console (key:abc)", 1060)
    with pytest.raises(s.SessionError, match="expired"):
        s.read(KEY, value, now=1060)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda v: v.replace(".", ".x", 1),  # signature changed
        lambda v: v[:-2] + ("AA" if not v.endswith("AA") else "BB"),
        lambda v: v.split(".")[0],  # no signature
        lambda v: "e30." + v.split(".")[1],  # another payload ({}) under the old signature
    ],
)
def test_an_altered_cookie_is_no_session(tamper: object) -> None:
    value = s.issue(KEY, tenant="team-a", actor="x", ttl_s=60)
    with pytest.raises(s.SessionError):
        s.read(KEY, tamper(value))  # type: ignore[operator]


def test_a_cookie_signed_under_another_key_is_no_session() -> None:
    with pytest.raises(s.SessionError, match="signature"):
        s.read(KEY, s.issue(OTHER, tenant="team-a", actor="x", ttl_s=60))


def test_the_csrf_token_belongs_to_one_session() -> None:
    one = s.read(KEY, s.issue(KEY, tenant="t", actor="x", ttl_s=60))
    two = s.read(KEY, s.issue(KEY, tenant="t", actor="x", ttl_s=60))
    token = s.csrf_token(KEY, one)
    assert s.csrf_valid(KEY, one, token)
    assert not s.csrf_valid(KEY, two, token)
    assert not s.csrf_valid(KEY, one, None) and not s.csrf_valid(KEY, one, "")
    assert not s.csrf_valid(OTHER, one, token)


@pytest.mark.parametrize(
    ("origin", "referer", "host", "allowed"),
    [
        ("http://gw:8000", None, "gw:8000", True),
        (None, "http://gw:8000/console/questions", "gw:8000", True),
        ("http://evil.example", "http://gw:8000/console", "gw:8000", False),
        ("null", None, "gw:8000", False),
        (None, None, "gw:8000", False),
        ("http://gw:8001", None, "gw:8000", False),
    ],
)
def test_only_the_consoles_own_origin_may_post(
    origin: str | None, referer: str | None, host: str, allowed: bool
) -> None:
    assert s.origin_allowed(origin, referer, host) is allowed
