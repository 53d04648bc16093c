"""The gateway: the public API trainers call, and the orchestration of scoring requests."""
