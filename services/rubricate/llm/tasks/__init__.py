"""Task prompts and their output schemas. Each task: a Pydantic output model, a prompt
builder, and a validator; the model servers run them through `complete_structured`."""
