"""The verifier model server: judging tasks of every capability (stage scores, nugget labels,
step verdicts and rankings, reflection judging, mining judgments), assembled from their
`<capability>/verifier` routers."""
