"""The verifier model server: judging tasks (stage rubric scores)."""
