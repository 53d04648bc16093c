"""Fake judges that judge nothing, for tests, benchmarks and `--fake-judge` runs:
`FakeJudgeBackend` (`fake_judge`) answers every capability's tasks from markers in the text,
with handlers in `fake_mining`, `fake_nuggets`, `fake_reflections`, `fake_steps` (`handler`:
a handler's shape). Service layer: imports `llm` and capabilities' `prompts`/`domain`."""
