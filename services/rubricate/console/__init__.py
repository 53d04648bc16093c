"""The rubric console: see and steer what the judge does, in a browser (docs/console.md)."""
