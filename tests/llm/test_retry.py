import pytest

from rubricate.common.usage import Usage
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.retry import backoff_delay, call_with_retries


class Script:
    """An async callable that raises the scripted exceptions, then returns "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_retries_transport_errors_with_capped_exponential_backoff() -> None:
    fn = Script(*(TransportError(f"down {i}") for i in range(4)))
    sleeps = Sleeps()
    retries: list[tuple[int, str, float]] = []
    result = await call_with_retries(
        fn,
        max_retries=5,
        base_s=0.5,
        max_s=3.0,
        sleep=sleeps,
        rand=lambda: 1.0,
        on_retry=lambda n, exc, d: retries.append((n, str(exc), d)),
    )
    assert result == "ok" and fn.calls == 5
    assert sleeps.delays == [0.5, 1.0, 2.0, 3.0]
    assert retries == [
        (1, "down 0", 0.5),
        (2, "down 1", 1.0),
        (3, "down 2", 2.0),
        (4, "down 3", 3.0),
    ]


async def test_full_jitter_scales_the_cap() -> None:
    sleeps = Sleeps()
    await call_with_retries(
        Script(TransportError("x"), TransportError("y")),
        max_retries=2,
        base_s=1.0,
        max_s=10.0,
        sleep=sleeps,
        rand=lambda: 0.25,
    )
    assert sleeps.delays == [0.25, 0.5]
    assert all(0 <= backoff_delay(a, base_s=0.5, max_s=20) < 20 for a in range(100))


async def test_gives_up_after_max_retries_with_the_last_error_and_the_spent_usage() -> None:
    errors = [TransportError(f"down {i}") for i in range(3)]
    for e in errors:
        e.usage.record(prompt_tokens=7, completion_tokens=0, latency_s=0.1)
    fn = Script(*errors)
    with pytest.raises(TransportError) as caught:
        await call_with_retries(fn, max_retries=2, base_s=0.01, max_s=0.01, sleep=Sleeps())
    assert caught.value is errors[-1]
    assert fn.calls == 3
    assert caught.value.usage.calls == 3 and caught.value.usage.prompt_tokens == 21


async def test_the_same_error_object_raised_twice_is_counted_once_per_raise() -> None:
    error = TransportError("down")
    error.usage.record(prompt_tokens=1, completion_tokens=0, latency_s=0)
    with pytest.raises(TransportError) as caught:
        await call_with_retries(
            Script(error, error), max_retries=1, base_s=0, max_s=0, sleep=Sleeps()
        )
    assert caught.value.usage == Usage(calls=2, prompt_tokens=2)


@pytest.mark.parametrize("error", [BackendRequestError("bad request"), ValueError("bug")])
async def test_other_errors_are_not_retried(error: Exception) -> None:
    fn = Script(error)
    sleeps = Sleeps()
    with pytest.raises(type(error)):
        await call_with_retries(fn, max_retries=5, base_s=0.01, max_s=0.01, sleep=sleeps)
    assert fn.calls == 1 and sleeps.delays == []


async def test_zero_retries_means_one_attempt() -> None:
    fn = Script(TransportError("down"))
    with pytest.raises(TransportError):
        await call_with_retries(fn, max_retries=0, base_s=1, max_s=1, sleep=Sleeps())
    assert fn.calls == 1


async def test_sleeps_for_real_by_default() -> None:
    fn = Script(TransportError("down"))
    assert await call_with_retries(fn, max_retries=1, base_s=0.001, max_s=0.001) == "ok"
