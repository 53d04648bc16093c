"""The LLM layer: the `LLMBackend` interface and its backends (embedded, OpenAI-compatible,
vLLM, fakes) with their wrappers (judge cache, circuit breaker, limiter); the judge calls
the tasks make (`calls`, over the one retry rule of `retry`); structured output
(`structured`); untrusted text in prompts (`prompt_text`); what the model servers share
(`server`: the app factory, `task_service`: the task services' base). It imports plumbing
(`rubricate.common`) and core only: no capability, no database layer."""
