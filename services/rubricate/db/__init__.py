"""The one database: the declarative `Base` (`base`), engines and units of work (`engine`),
URLs (`urls`), key sizes (`limits`), the Alembic history and `upgrade_to_head` (`migrate`,
`migrations/`). Plumbing layer: it imports only `rubricate.core` and the client, never
`common`, a capability or a service."""
