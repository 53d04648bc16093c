"""Celery queue depth, read from the Redis broker at scrape time.

Kombu's Redis transport keeps each queue as a Redis list named after the queue, plus one list
per priority step (`<queue>\\x06\\x163`, ... for the default steps 0, 3, 6, 9). The depth of
a queue is the sum of their lengths: messages published and not yet taken by a worker
(messages a worker has prefetched are no longer counted).
"""

import logging
from collections.abc import Iterable, Iterator, Sequence

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

from rubricate.common.metrics import QUEUE_BROKER_UP_METRIC, QUEUE_DEPTH_METRIC

log = logging.getLogger("rubricate.queue_metrics")

KOMBU_PRIORITY_SEP = "\x06\x16"
KOMBU_PRIORITY_STEPS = (0, 3, 6, 9)


def priority_keys(queue: str, steps: Sequence[int] = KOMBU_PRIORITY_STEPS) -> list[str]:
    """The Redis list keys kombu uses for `queue` (priority 0 is the bare name)."""
    return [queue if step == 0 else f"{queue}{KOMBU_PRIORITY_SEP}{step}" for step in steps]


class QueueDepthCollector(Collector):
    """`rubricate_queue_depth{queue}` and `rubricate_queue_broker_up` from the broker."""

    def __init__(self, *, broker_url: str, queues: Iterable[str], timeout_s: float = 1.0) -> None:
        names = sorted(set(queues))
        if not names:
            raise ValueError("QueueDepthCollector needs at least one queue name")
        if not broker_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"queue depth is read from a Redis broker, not {broker_url!r}")
        self.queues = names
        self._client = redis.Redis.from_url(
            broker_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )

    def depths(self) -> dict[str, int]:
        """Messages waiting per queue (raises redis errors)."""
        pipe = self._client.pipeline(transaction=False)
        for queue in self.queues:
            for key in priority_keys(queue):
                pipe.llen(key)
        lengths = [int(n) for n in pipe.execute()]
        per_queue = len(KOMBU_PRIORITY_STEPS)
        return {
            queue: sum(lengths[i * per_queue : (i + 1) * per_queue])
            for i, queue in enumerate(self.queues)
        }

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # no collection at registration time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            QUEUE_BROKER_UP_METRIC, "1 when the queue-depth read reached the broker, else 0."
        )
        try:
            depths = self.depths()
        except redis.RedisError as exc:
            log.warning("queue_metrics.broker_unreachable error=%s: %s", type(exc).__name__, exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            QUEUE_DEPTH_METRIC,
            "Messages waiting in a Celery queue on the Redis broker, by queue.",
            labels=["queue"],
        )
        for queue, n in depths.items():
            depth.add_metric([queue], n)
        yield depth

    def close(self) -> None:
        self._client.close()


_registered: dict[tuple[str, tuple[str, ...]], QueueDepthCollector] = {}


def register_queue_depth_collector(
    *,
    broker_url: str,
    queues: Iterable[str],
    registry: CollectorRegistry = REGISTRY,
) -> QueueDepthCollector:
    """Register once per (broker, queues) and registry; a second call returns the first."""
    names = tuple(sorted(set(queues)))
    key = (f"{id(registry)}|{broker_url}", names)
    if key not in _registered:
        collector = QueueDepthCollector(broker_url=broker_url, queues=names)
        registry.register(collector)
        _registered[key] = collector
    return _registered[key]
