"""The CPU thread pool: launches of every size, back to back and from several Python threads at once."""

import threading

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels.cpu import cpu_runtime


@wp.kernel
def count_visits(hits: wp.array(dtype=int)):
    i = wp.tid()
    hits[i] = hits[i] + 1


@wp.kernel
def sum_into(total: wp.array(dtype=wp.int64), n: int):
    i = wp.tid()
    wp.atomic_add(total, 0, wp.int64(i % n))


def test_every_index_runs_exactly_once_at_every_size():
    """Sizes around the serial threshold and chunk boundaries visit each index once."""
    for n in (1, 63, 64, 65, 8191, 8192, 8193, 100_003, 1 << 20):
        hits = wp.zeros(n, dtype=int)
        wp.launch(count_visits, dim=n, inputs=[hits])
        assert hits.numpy().min() == 1 and hits.numpy().max() == 1, n


def test_many_launches_back_to_back():
    """Hundreds of consecutive parallel launches all complete (the pool never loses a wake-up)."""
    hits = wp.zeros(20_000, dtype=int)
    for _ in range(300):
        wp.launch(count_visits, dim=20_000, inputs=[hits])
    assert (hits.numpy() == 300).all()


def test_launches_from_several_python_threads():
    """Concurrent launches from Python threads are correct (one uses the pool, others run inline)."""
    totals = [wp.zeros(1, dtype=wp.int64) for _ in range(4)]
    n = 200_000

    def work(t):
        for _ in range(10):
            wp.launch(sum_into, dim=n, inputs=[t, 1000])

    threads = [threading.Thread(target=work, args=(t,)) for t in totals]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    expect = 10 * int(np.sum(np.arange(n) % 1000))
    assert [int(t.numpy()[0]) for t in totals] == [expect] * 4


def test_pool_uses_every_core():
    """The pool has one thread per core the process may use (or wp.config.cpu_threads)."""
    expected = wp.config.cpu_threads or __import__("os").cpu_count()
    assert cpu_runtime().lw_get_num_threads() == expected


def _os_threads() -> int:
    return len(__import__("os").listdir("/proc/self/task"))


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_cpu_threads_set_after_the_first_launch_resizes_the_pool():
    """A new wp.config.cpu_threads takes effect at the next launch: the pool's workers are replaced (the old
    ones exit), and launches stay correct at every size."""
    saved = wp.config.cpu_threads
    n = 100_000
    try:
        hits = wp.zeros(n, dtype=int)
        wp.launch(count_visits, dim=n, inputs=[hits])
        counts = {}
        for threads in (2, 5, 1, 3):
            wp.config.cpu_threads = threads
            wp.launch(count_visits, dim=n, inputs=[hits])
            assert cpu_runtime().lw_get_num_threads() == threads
            counts[threads] = _os_threads()
        assert counts[5] - counts[2] == 3 and counts[3] - counts[1] == 2
        assert (hits.numpy() == 5).all()
    finally:
        wp.config.cpu_threads = saved
        wp.launch(count_visits, dim=n, inputs=[wp.zeros(n, dtype=int)])
    assert cpu_runtime().lw_get_num_threads() == (saved or __import__("os").cpu_count())


def test_an_oversubscribed_pool_visits_every_index_once():
    """With more workers than cores, workers are often late or descheduled: a launch waits only for those
    that joined it, a late one joins a later launch, and every index of every launch runs exactly once
    (also after pauses long enough for the workers to fall asleep)."""
    saved = wp.config.cpu_threads
    try:
        wp.config.cpu_threads = 4 * (__import__("os").cpu_count() or 1)
        hits = wp.zeros(50_000, dtype=int)
        for k in range(400):
            if k % 100 == 0:
                __import__("time").sleep(0.02)  # past the spin: workers sleep, the next launch wakes them
            wp.launch(count_visits, dim=hits.shape[0] if k % 2 else 9000, inputs=[hits])
        h = hits.numpy()
        assert (h[:9000] == 400).all() and (h[9000:] == 200).all()
    finally:
        wp.config.cpu_threads = saved
