"""A model server process answering from the fake judge (for tests that kill it).

python -m tests.support.fake_model_server {verifier|rubric-generator} PORT [DELAY_S]
"""

import sys

import uvicorn

from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend


def main() -> None:
    service, port = sys.argv[1], int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    backend = FakeJudgeBackend(delay_s=delay)
    llm = LLMSettings(max_retries=0, backoff_base_s=0.001, backoff_max_s=0.002)
    if service == "verifier":
        from rubricate.verifier.app import create_app
    else:
        from rubricate.rubric_generator.app import create_app
    uvicorn.run(
        create_app(llm=llm, backend=backend), host="127.0.0.1", port=port, log_level="warning"
    )


if __name__ == "__main__":
    main()
