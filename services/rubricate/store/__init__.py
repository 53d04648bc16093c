"""The store service (:8003): `create_app` (`app`) assembles `stagewise.store` (rubric buffers,
stored stagewise scorings), `reflections.store` (bank, snapshots) and `audit.store` (rubric
history) on one engine and the buffer cache, and maps database, buffer, scoring and bank
failures to errors once; plus `settings`, `size_metrics` (gauges), `migrate`. Service layer:
capabilities and plumbing."""
