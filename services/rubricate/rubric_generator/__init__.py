"""The rubric-generator model server: generation tasks (stage rubrics for a rollout group)."""
