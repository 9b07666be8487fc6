"""`service.threads`: short blocking steps on few threads, waits for the cluster on threads of their own."""

import threading

import anyio
from starlette.concurrency import run_in_threadpool

from service.threads import set_thread_limits, wait_for_cluster
from tests.waiting import PATIENCE_S


class Concurrency:
    """A blocking call that records how many of its calls run at once. The calls wait until ``full`` of
    them run together (or `PATIENCE_S`: a limit below ``full`` then fails the test), and 0.2 s more, in
    which any call over the limit would start too: so the count reached is the limit's, not how fast
    threads start."""

    def __init__(self, full: int):
        self.lock, self.now, self.most, self.full = threading.Lock(), 0, 0, full
        self.released = threading.Event()
        self.timer = None

    def __call__(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            if self.now >= self.full and self.timer is None:
                self.timer = threading.Timer(0.2, self.released.set)
                self.timer.start()
        self.released.wait(timeout=PATIENCE_S)  # (the full count never reached: the test fails after)
        with self.lock:
            self.now -= 1


def test_short_steps_and_cluster_waits_have_their_own_limits():
    short, waits = Concurrency(3), Concurrency(5)

    async def main():
        set_thread_limits(3, 5)
        assert anyio.to_thread.current_default_thread_limiter().total_tokens == 3
        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(run_in_threadpool, short)  # as starlette and FastAPI run them
                group.start_soon(wait_for_cluster, waits)

    anyio.run(main)
    assert short.most == 3 and waits.most == 5  # the waits did not take the short steps' threads


def test_cluster_waits_have_a_limit_where_none_was_set():
    waits = Concurrency(40)

    async def main():
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(wait_for_cluster, waits)
        return await wait_for_cluster(lambda a, b=0: a + b, 1, b=2)

    assert anyio.run(main) == 3 and waits.most == 40


def test_a_cancelled_wait_that_abandons_its_call_ends_at_once_and_one_that_does_not_waits():
    """The fit watchdog's waits abandon their call when the service stops: a scheduler call that
    blocks must not hold the stop (the app's lifespan awaits the cancelled watchdog)."""
    release = threading.Event()
    returned = []

    def blocked():
        release.wait(timeout=10.0)
        returned.append(True)

    async def cancelled_after(seconds: float, abandon: bool) -> float:
        begun = anyio.current_time()
        with anyio.move_on_after(seconds):
            await wait_for_cluster(blocked, abandon_on_cancel=abandon)
        return anyio.current_time() - begun

    anyio.run(cancelled_after, 0.2, True)
    assert not release.is_set() and not returned  # ended while its call still blocked; the call runs on
    threading.Timer(1.0, release.set).start()
    anyio.run(cancelled_after, 0.2, False)
    # waited for its end: the call had returned when the wait did, a second after the cancel (the Timer starts
    # before the wait's own clock, so the wait's measured time can read a little under that second)
    assert release.is_set() and returned
