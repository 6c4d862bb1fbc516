"""loomwork.utils against NumPy: sums, inner products, scans, sorts, run-length encoding, casts, the timer."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.utils import (
    ScopedTimer,
    array_cast,
    array_inner,
    array_scan,
    array_sum,
    radix_sort_pairs,
    runlength_encode,
    segmented_sort_pairs,
)


def test_sums_are_accurate():
    """A float32 sum of 2^22 values agrees with the float64 sum to 1e-7; value_count, out and axis work."""
    x = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
    a = wp.array(x)
    ref = x.astype(np.float64).sum()
    assert abs(array_sum(a) - ref) <= 1e-7 * np.abs(x).sum()
    assert array_sum(a, value_count=10) == pytest.approx(x[:10].astype(np.float64).sum(), rel=1e-6)
    out = wp.zeros(1, dtype=float)
    array_sum(a, out=out)
    assert out.numpy()[0] == pytest.approx(ref, rel=1e-6)
    m = wp.array(np.arange(12, dtype=np.float64).reshape(3, 4))
    np.testing.assert_array_equal(array_sum(m, axis=1).numpy(), np.arange(12).reshape(3, 4).sum(1, keepdims=True))
    np.testing.assert_array_equal(array_sum(m, axis=-2, value_count=2).numpy(), [[4.0, 6.0, 8.0, 10.0]])
    assert array_sum(wp.array(np.arange(10, dtype=np.int32))) == 45
    v = wp.array(np.ones((5, 3), dtype=np.float32), dtype=wp.vec3)
    np.testing.assert_array_equal(array_sum(v), [5.0, 5.0, 5.0])


def test_reductions_return_what_warp_returns():
    """As Warp 1.19: a NumPy scalar of the dtype over everything, `out` itself when given, an array with the
    reduced axis kept along an axis, zeros for empty reductions, and IndexError for an axis out of range."""
    total = array_sum(wp.array(np.arange(4, dtype=np.float32)))
    assert isinstance(total, np.float32) and total == 6.0
    out = wp.zeros(1, dtype=float)
    assert array_sum(wp.ones(3, dtype=float), out=out) is out and out.numpy()[0] == 3.0
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = array_inner(wp.array(a), wp.array(a), axis=1)
    assert got.shape == (2, 1, 4)
    np.testing.assert_allclose(got.numpy(), (a * a).sum(axis=1, keepdims=True))
    vecs = wp.array(np.ones((2, 3, 3), dtype=np.float32), dtype=wp.vec3)
    assert array_inner(vecs, vecs, axis=0).dtype == wp.float32
    np.testing.assert_array_equal(array_inner(vecs, vecs, axis=0).numpy(), np.full((1, 3), 6.0))
    np.testing.assert_array_equal(array_sum(wp.empty((2, 0, 3)), axis=-2).numpy(), np.zeros((2, 1, 3)))
    assert array_inner(wp.zeros(0, dtype=wp.vec2), wp.zeros(0, dtype=wp.vec2)) == 0.0
    with pytest.raises(IndexError, match="axis 2"):
        array_sum(wp.ones((2, 3)), axis=2)


def test_inner_products():
    """array_inner of scalars and of vec3 arrays (sum of dot products) matches NumPy."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(100_000), rng.standard_normal(100_000)
    assert array_inner(wp.array(x), wp.array(y)) == pytest.approx(x @ y, rel=1e-12)
    a, b = rng.standard_normal((10, 3)).astype(np.float32), rng.standard_normal((10, 3)).astype(np.float32)
    got = array_inner(wp.array(a, dtype=wp.vec3), wp.array(b, dtype=wp.vec3))
    assert got == pytest.approx(float((a.astype(np.float64) * b).sum()), rel=1e-5)
    with pytest.raises(TypeError, match="same dtype and shape"):
        array_inner(wp.zeros(3, dtype=float), wp.zeros(4, dtype=float))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("inclusive", [True, False])
def test_scans(dtype, inclusive):
    """Inclusive and exclusive prefix sums over 10^6 values match NumPy's cumsum."""
    x = np.random.default_rng(2).integers(-5, 6, 1_000_003).astype(dtype)
    out = wp.zeros(len(x), dtype=wp.dtype_from_numpy(dtype))
    array_scan(wp.array(x), out, inclusive=inclusive)
    ref = np.cumsum(x.astype(np.int64))
    if not inclusive:
        ref = np.r_[0, ref[:-1]]
    np.testing.assert_array_equal(out.numpy(), ref.astype(dtype))


@pytest.mark.parametrize("key_dtype", [np.int32, np.float32])
def test_radix_sort_pairs_is_a_stable_sort(key_dtype):
    """Keys (negatives, duplicates, floats with signs) sort like NumPy's stable argsort; values follow."""
    rng = np.random.default_rng(3)
    n = 300_001
    keys = (rng.integers(-1000, 1000, 2 * n) if key_dtype is np.int32 else rng.standard_normal(2 * n)).astype(key_dtype)
    values = np.arange(2 * n, dtype=np.int32)
    k, v = wp.array(keys), wp.array(values)
    radix_sort_pairs(k, v, n)
    order = np.argsort(keys[:n], kind="stable")
    np.testing.assert_array_equal(k.numpy()[:n], keys[:n][order])
    np.testing.assert_array_equal(v.numpy()[:n], order)
    np.testing.assert_array_equal(k.numpy()[n:], keys[n:])  # beyond count: untouched
    with pytest.raises(TypeError, match="keys must be int32 or float32"):
        radix_sort_pairs(wp.zeros(4, dtype=wp.int64), wp.zeros(4, dtype=int), 4)


def test_segmented_sort_runlength_and_cast():
    """Sorting within segments, run-length encoding and casting between dtypes."""
    keys = wp.array(np.array([3, 1, 2, 9, 7, 8], dtype=np.int32))
    values = wp.array(np.arange(6, dtype=np.int32))
    segmented_sort_pairs(keys, values, 6, wp.array(np.array([0, 3], dtype=np.int32)))
    np.testing.assert_array_equal(keys.numpy(), [1, 2, 3, 7, 8, 9])
    np.testing.assert_array_equal(values.numpy(), [1, 2, 0, 4, 5, 3])
    run_values, run_lengths = wp.zeros(6, dtype=int), wp.zeros(6, dtype=int)
    n = runlength_encode(wp.array(np.array([1, 1, 2, 2, 2, 5], dtype=np.int32)), run_values, run_lengths)
    assert n == 3 and run_values.numpy()[:3].tolist() == [1, 2, 5] and run_lengths.numpy()[:3].tolist() == [2, 3, 1]
    d = wp.zeros(3, dtype=wp.float32)
    array_cast(wp.array(np.array([0.5, 1.5, 2.5])), d)
    np.testing.assert_array_equal(d.numpy(), [0.5, 1.5, 2.5])


def test_scoped_timer(capsys):
    """ScopedTimer reports milliseconds, records into a dict, and can stay quiet."""
    times = {}
    with ScopedTimer("step", dict=times) as t:
        sum(range(1000))
    assert t.elapsed >= 0 and times["step"] == [t.elapsed] and "step took" in capsys.readouterr().out
    with ScopedTimer("quiet", print=False):
        pass
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100, 1343, 1344, 1345, 3000, 65855, 65856, 65857, 67200, 131712,
                               131713, 1 << 20])
def test_scan_edge_sizes(n):
    """Scans of sizes around the splits (blocks of 8 lanes of 8232, lanes of whole 168-element chunks, a
    serial tail; including empty) match cumsum exactly."""
    x = np.random.default_rng(n).integers(-3, 4, n).astype(np.int32)
    out = wp.zeros(n, dtype=int)
    array_scan(wp.array(x, dtype=int), out, inclusive=True)
    np.testing.assert_array_equal(out.numpy(), np.cumsum(x))
    array_scan(wp.array(x, dtype=int), out, inclusive=False)
    np.testing.assert_array_equal(out.numpy(), np.cumsum(x) - x)


@pytest.mark.parametrize("inclusive", [True, False])
def test_float32_scans_are_as_accurate_as_a_double_scan(inclusive):
    """Random float32 prefix sums over 2^21 values stay within a few float32 roundings of the exact sums
    (a serial float32 scan, like NumPy's cumsum, drifts by orders of magnitude more)."""
    x = np.random.default_rng(5).standard_normal((1 << 21) + 37).astype(np.float32)
    exact = np.cumsum(x.astype(np.float64))
    if not inclusive:
        exact = np.r_[0.0, exact[:-1]]
    out = wp.zeros(len(x) + 1, dtype=float)
    view = out[1:]  # an output that is not 32-byte aligned
    array_scan(wp.array(x), view, inclusive=inclusive)
    scale = np.abs(exact).max()
    assert np.abs(view.numpy() - exact).max() <= 4e-7 * scale
    assert np.abs(np.cumsum(x) - np.cumsum(x.astype(np.float64))).max() > 1e-5 * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_scans_of_outputs_beyond_the_cache(dtype):
    """Outputs of 32 MiB and more are written with streaming stores from the first 32-byte aligned element:
    exact (integer-valued) results for inclusive, exclusive, misaligned and in-place scans."""
    n = (32 << 20) // np.dtype(dtype).itemsize + 37
    x = np.random.default_rng(6).integers(-5, 6, n).astype(dtype)
    ref = np.cumsum(x.astype(np.int64)).astype(dtype)
    out = wp.zeros(n + 3, dtype=wp.dtype_from_numpy(dtype))
    for offset in (0, 1, 3):
        view = out[offset:offset + n]
        array_scan(wp.array(x), view, inclusive=True)
        np.testing.assert_array_equal(view.numpy(), ref)
    array_scan(wp.array(x), view, inclusive=False)
    np.testing.assert_array_equal(view.numpy()[1:], ref[:-1])
    assert view.numpy()[0] == 0
    a = wp.array(x)
    array_scan(a, a)
    np.testing.assert_array_equal(a.numpy(), ref)
