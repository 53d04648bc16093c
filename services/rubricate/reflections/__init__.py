"""Reflection rewards and the agent rubric bank (RubricEM §3.4): candidates judged with the
stagewise verdicts, the best kept as a lesson and retrieved within and across episodes.
Roles: `domain/`, `prompts/`, `verifier/`, `gateway/`, `store/`. The one capability that may
import another: `reflections.store` → `stagewise.store` (`schemas`, `service`, `models`)."""
