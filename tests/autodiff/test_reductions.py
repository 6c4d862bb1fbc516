"""Privatized reductions and thread-exclusive gradients give exact answers, and step aside when unsafe."""

import numpy as np

import loomwork as wp
from loomwork.kernels import ir


@wp.kernel
def sum_squares(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, x[i] * x[i])
    out[1] += x[i]
    out[2] -= 1.0


@wp.kernel
def reads_its_accumulator(x: wp.array(dtype=float), out: wp.array(dtype=float), seen: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, x[i])
    seen[i] = out[0]  # reads the array it adds to: must stay a real atomic


@wp.kernel
def neighbours(x: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    n = x.shape[0]
    wp.atomic_add(l, 0, x[i] * x[(i + 1) % n])


@wp.kernel
def scaled_by_weights(w: wp.array(dtype=float), x: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(l, 0, w[0] * x[i] + w[1])


def test_large_float32_sum_is_accurate():
    """2^22 float32 terms summed by atomic_add agree with a float64 sum to 1e-6 (chunk sums are float64)."""
    x = np.random.default_rng(1).standard_normal(1 << 22).astype(np.float32)
    out = wp.zeros(3, dtype=float)
    wp.launch(sum_squares, len(x), inputs=[x, out])
    ref = (x.astype(np.float64) ** 2).sum()
    assert abs(out.numpy()[0] - ref) / ref < 1e-6
    assert abs(out.numpy()[1] - x.astype(np.float64).sum()) < 1e-3 * np.sqrt(len(x))
    assert out.numpy()[2] == -len(x)


def test_which_statements_are_privatized():
    """Only atomics on arrays used in no other way, with unused results and constant indices, qualify."""
    ok = {name for name, _ in _private_arrays(sum_squares)}
    assert ok == {"v_out"}
    assert _private_arrays(reads_its_accumulator) == set()


def _private_arrays(k):
    from loomwork.kernels.frontend import Builder, Source
    from loomwork.kernels.module import BuildContext

    fn = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)), True,
                 BuildContext(False)).build()
    return {(arr.name, idx) for arr, idx in ir.private_reductions(fn, "atomic").values()}


def test_kernel_reading_its_accumulator_still_sees_every_addition():
    """When the kernel reads the array it adds to, the atomics stay real: the final sum is exact."""
    n = 100_000
    x = np.ones(n, dtype=np.float32)
    out = wp.zeros(1, dtype=float)
    seen = wp.zeros(n, dtype=float)
    wp.launch(reads_its_accumulator, n, inputs=[x, out, seen])
    assert out.numpy()[0] == n
    assert seen.numpy().max() == n and seen.numpy().min() >= 1


def test_overlapping_gradient_updates_stay_atomic():
    """x[i] and x[i+1] in one kernel: each gradient element gets two contributions from two threads."""
    n = 200_001
    xv = np.random.default_rng(2).uniform(-1, 1, n).astype(np.float32)
    x = wp.array(xv, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(neighbours, n, inputs=[x, l])
    tape.backward(loss=l)
    np.testing.assert_allclose(x.grad.numpy(), np.roll(xv, -1) + np.roll(xv, 1), rtol=1e-5, atol=1e-6)


def test_gradients_of_shared_parameters_are_summed_exactly():
    """d/dw of sum(w0*x + w1) over 2^20 threads: w0 gets sum(x), w1 gets n (float64 chunk sums)."""
    n = 1 << 20
    xv = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    w = wp.array(np.array([0.5, 2.0], dtype=np.float32), requires_grad=True)
    x = wp.array(xv, requires_grad=True)
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scaled_by_weights, n, inputs=[w, x, l])
    tape.backward(loss=l)
    assert abs(w.grad.numpy()[0] - xv.astype(np.float64).sum()) < 1e-2
    assert w.grad.numpy()[1] == n
    np.testing.assert_array_equal(x.grad.numpy(), np.full(n, 0.5, dtype=np.float32))
