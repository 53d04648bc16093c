"""The LLM layer: one `LLMBackend` interface, its backends, structured output, task prompts."""
