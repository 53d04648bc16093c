"""The gateway's step routes (`routes`), the orchestration of `/v1/steps/*` (`service`),
listwise rewards and multi-judge ranking (`ranking`: `/v1/rubrics/listwise-reward`,
`/v1/rank`) and what the two share (`shared`: the step-verdicts call, timing, the audit
hand-over). Model-server tasks are called as the values of `steps.verifier.endpoints` and
`steps.generator.endpoints`. Gateway contract: no model backend, no SQLAlchemy; imports
`steps.domain`, the generator's and verifier's `endpoints` and `schemas`, `common`."""
