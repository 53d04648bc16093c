"""Queue depth read from a real Redis broker, as kombu lays Celery queues out."""

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from rubricate.common.queue_metrics import (
    QueueDepthCollector,
    priority_keys,
    register_queue_depth_collector,
)

REDIS_URL = os.environ.get("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue name of this test's own; its keys are deleted afterwards."""
    name = f"test-queue-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}: {exc}", pytrace=False)
    yield name
    client.delete(*priority_keys(name))
    client.close()


def test_priority_keys_follow_kombu() -> None:
    assert priority_keys("q") == ["q", "q\x06\x163", "q\x06\x166", "q\x06\x169"]


def test_depth_sums_the_priority_lists(queue: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    client.rpush(queue, "m1", "m2")
    client.rpush(f"{queue}\x06\x166", "m3")
    collector = QueueDepthCollector(broker_url=REDIS_URL, queues=[queue, f"{queue}-empty"])
    assert collector.depths() == {queue: 3, f"{queue}-empty": 0}
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert f'rubricate_queue_depth{{queue="{queue}"}} 3.0' in text
    assert f'rubricate_queue_depth{{queue="{queue}-empty"}} 0.0' in text
    assert "rubricate_queue_broker_up 1.0" in text
    client.lpop(queue)
    assert registry.get_sample_value("rubricate_queue_depth", {"queue": queue}) == 2
    collector.close()
    client.close()


def test_unreachable_broker_reports_down_not_zero() -> None:
    collector = QueueDepthCollector(broker_url="redis://127.0.0.1:1/0", queues=["q"], timeout_s=0.2)
    registry = CollectorRegistry()
    registry.register(collector)
    assert registry.get_sample_value("rubricate_queue_broker_up") == 0
    assert registry.get_sample_value("rubricate_queue_depth", {"queue": "q"}) is None


def test_registration_is_idempotent_and_validated(queue: str) -> None:
    registry = CollectorRegistry()
    first = register_queue_depth_collector(broker_url=REDIS_URL, queues=[queue], registry=registry)
    again = register_queue_depth_collector(broker_url=REDIS_URL, queues=[queue], registry=registry)
    assert first is again
    with pytest.raises(ValueError, match="Redis broker"):
        QueueDepthCollector(broker_url="amqp://guest@localhost//", queues=["q"])
    with pytest.raises(ValueError, match="at least one queue"):
        QueueDepthCollector(broker_url=REDIS_URL, queues=[])
