"""The rubric-generator model server: generation tasks of every capability (stage rubrics,
step rubrics, mining rewrites, extraction, merging and importance), assembled from their
`<capability>/generator` routers."""
