"""`service.threads`: short blocking steps on few threads, waits for the cluster on threads of their own."""

import threading
import time

import anyio
from starlette.concurrency import run_in_threadpool

from service.threads import set_thread_limits, wait_for_cluster


class Concurrency:
    """A blocking call that records how many of its calls run at once."""

    def __init__(self):
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def __call__(self, seconds: float) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(seconds)
        with self.lock:
            self.now -= 1


def test_short_steps_and_cluster_waits_have_their_own_limits():
    short, waits = Concurrency(), Concurrency()

    async def main():
        set_thread_limits(3, 5)
        assert anyio.to_thread.current_default_thread_limiter().total_tokens == 3
        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(run_in_threadpool, short, 0.05)  # as starlette and FastAPI run them
                group.start_soon(wait_for_cluster, waits, 0.05)

    anyio.run(main)
    assert short.most == 3 and waits.most == 5  # the waits did not take the short steps' threads


def test_cluster_waits_have_a_limit_where_none_was_set():
    waits = Concurrency()

    async def main():
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(wait_for_cluster, waits, 0.05)
        return await wait_for_cluster(lambda a, b=0: a + b, 1, b=2)

    assert anyio.run(main) == 3 and waits.most == 40
