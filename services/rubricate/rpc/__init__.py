"""The gateway's gRPC server (`server`: every endpoint with an `rpc`, served through the same
FastAPI app as HTTP) and `protogen` (drafts proto messages from the client's models). Layer
`llm | rpc`: imports only `common`, `core` and the client; no model backend, no SQLAlchemy."""
