"""`rubricate keys`: create API keys; only their SHA-256 hashes go into the configuration."""

import argparse

from rubricate.common.auth import TENANT_RE, hash_key, new_key


def _create(args: argparse.Namespace) -> int:
    if not TENANT_RE.match(args.tenant):
        print(f"rubricate keys: tenant {args.tenant!r} must match {TENANT_RE.pattern}")
        return 2
    key = new_key()
    print(f"API key (shown once, give it to the trainer): {key}")
    print("Add this entry to RUBRICATE_AUTH_API_KEYS (comma-separated) on the gateway:")
    print(f"{args.tenant}:{hash_key(key)}")
    return 0


def _hash(args: argparse.Namespace) -> int:
    print(hash_key(args.key))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    keys = sub.add_parser("keys", help="API keys (hashed at rest)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="a new key for a tenant and its config entry")
    create.add_argument("--tenant", required=True)
    create.set_defaults(func=_create)
    hashed = keys_sub.add_parser("hash", help="the config hash of an existing key")
    hashed.add_argument("key")
    hashed.set_defaults(func=_hash)
