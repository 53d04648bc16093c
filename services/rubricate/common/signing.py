"""Signed claims, checked without stored state: `<base64url JSON>.<base64url HMAC-SHA256>`.

Scoped tokens (`common.scoped_tokens`) and console sessions (`console.session`) are both
such values, each under its own key (`derive_key` with its own label)."""

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Literal


class SignatureError(ValueError):
    """`malformed`: not a signed value at all; `invalid`: its signature does not match."""

    def __init__(self, kind: Literal["malformed", "invalid"]) -> None:
        super().__init__(kind)
        self.kind = kind


def derive_key(secret: str, label: bytes) -> bytes:
    return hmac.new(secret.encode(), label, hashlib.sha256).digest()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mac(key: bytes, text: str) -> str:
    """HMAC-SHA256 of `text`, base64url."""
    return b64(hmac.new(key, text.encode(), hashlib.sha256).digest())


def sign(key: bytes, claims: Mapping[str, Any]) -> str:
    body = b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{body}.{mac(key, body)}"


def verify(key: bytes, value: str) -> dict[str, Any]:
    """The claims of a value `sign` made under `key`; SignatureError otherwise."""
    body, sep, signature = value.partition(".")
    if not sep:
        raise SignatureError("malformed")
    try:
        given = unb64(signature)
        claims = json.loads(unb64(body))
    except (binascii.Error, ValueError, UnicodeDecodeError) as e:
        raise SignatureError("malformed") from e
    expected = hmac.new(key, body.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(given, expected):
        raise SignatureError("invalid")
    if not isinstance(claims, dict):
        raise SignatureError("malformed")
    return claims
