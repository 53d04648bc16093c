"""The shape of a fake judge's task handler: (user prompt, generation parameters) → reply."""

from collections.abc import Callable

from rubricate.llm.base import GenerationParams

Handler = Callable[[str, GenerationParams], str]
