"""Rubricate: rubric-based rewards for reinforcement learning of LLM agents."""

__version__ = "0.1.0"
