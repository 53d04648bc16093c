"""The one-line top-level module that makes Rubricate's judge a verifiers judge plugin (id
`rubricate_judge`): verifiers resolves a plugin id to `verifiers.v1.judges.<id>` or a
top-level module `<id>`, not to a dotted path."""

from rubricate_client.verifiers_judge import RubricateJudge

__all__ = ["RubricateJudge"]
