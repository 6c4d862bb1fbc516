"""bfloat16: storage as the upper half of a float32 (round to nearest even), arithmetic through float in
kernels, arrays that show their bits to NumPy and convert values at every Python boundary."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.utils as wpu
from loomwork.kernels.types import bf16_bits, bf16_to_float

vec3bf = wp.types.vector(3, wp.bfloat16)


def reference_bits(x):
    """Round-to-nearest-even truncation of float32 bits, one value at a time in Python integers."""
    out = []
    for f in np.asarray(x, dtype=np.float32).ravel():
        u = int(f.view(np.uint32))
        if (u & 0x7FFFFFFF) > 0x7F800000:
            out.append((u >> 16) | 0x40)
            continue
        low, high = u & 0xFFFF, u >> 16
        if low > 0x8000 or (low == 0x8000 and high & 1):
            high += 1
        out.append(high & 0xFFFF)
    return np.array(out, dtype=np.uint16)


def test_rounding_matches_the_definition():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(2000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 2000),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.4e38,
                                  1e-40], dtype=np.float32)]).astype(np.float32)
    bits = bf16_bits(x)
    np.testing.assert_array_equal(bits, reference_bits(x))
    back = bf16_to_float(bits)
    finite = np.isfinite(x) & (np.abs(x) < 3.38e38) & (np.abs(x) > 1.2e-38)  # normal, no overflow
    assert np.all(np.abs(back[finite] - x[finite]) <= np.abs(x[finite]) * 2.0**-8)
    assert np.isnan(back[np.isnan(x)]).all()
    assert float(wp.bfloat16(1.0 + 2**-8)) == 1.0  # a tie rounds to even
    assert float(wp.bfloat16(1.0 + 3 * 2**-8)) == 1.0 + 2**-6


@wp.kernel
def bf16_math(a: wp.array(dtype=wp.bfloat16), s: wp.bfloat16, out: wp.array(dtype=wp.bfloat16),
              wide: wp.array(dtype=float), v: wp.array(dtype=vec3bf), total: wp.array(dtype=wp.bfloat16)):
    i = wp.tid()
    x = a[i]
    y = x * s + wp.bfloat16(1.0)
    out[i] = wp.max(y, -y) - wp.sqrt(wp.abs(x))
    wide[i] = float(x) * 3.0
    v[i] = vec3bf(x, y, wp.bfloat16(wide[i])) * wp.bfloat16(0.5)
    wp.atomic_add(total, 0, x)


def test_kernels_compute_through_float_and_round_on_store():
    x = np.array([1.5, -2.25, 3.14159, 100.7, -0.001, 7.0], dtype=np.float32)
    a = wp.array(x, dtype=wp.bfloat16)
    assert a.numpy().dtype == np.uint16  # NumPy sees the bit patterns
    xb = bf16_to_float(a.numpy()).astype(np.float64)
    n = len(x)
    out, wide = wp.zeros(n, dtype=wp.bfloat16), wp.zeros(n, dtype=float)
    v, total = wp.zeros(n, dtype=vec3bf), wp.zeros(1, dtype=wp.bfloat16)
    wp.launch(bf16_math, n, inputs=[a, 0.5, out, wide, v, total])

    def r(values):
        return bf16_to_float(bf16_bits(np.asarray(values, dtype=np.float32))).astype(np.float64)

    y = r(r(xb * 0.5) + 1.0)
    np.testing.assert_array_equal(out.list(), r(np.abs(y) - r(np.sqrt(np.abs(xb)))))
    np.testing.assert_array_equal(wide.numpy(), (xb * 3.0).astype(np.float32))
    vectors = np.array([e.numpy_value() for e in v.list()])
    np.testing.assert_array_equal(vectors, r(np.stack([xb, y, r(xb * 3.0)], axis=1) * 0.5))
    assert total.list()[0] == pytest.approx(xb.sum(), rel=2**-6)


def test_python_boundaries_convert_values():
    a = wp.array([1.0, -2.5, 3.3], dtype=wp.bfloat16)
    assert a.list() == [1.0, -2.5, 3.296875] and a[2] == 3.296875
    a[0] = 7.1
    assert a.list()[0] == 7.09375
    a.fill_(0.3)
    assert a.list() == [0.30078125] * 3
    f = wp.array([0.1, 2.0, -8.5], dtype=float)
    wpu.array_cast(f, a)
    assert a.list() == [0.10009765625, 2.0, -8.5]
    g = wp.zeros(3, dtype=wp.float64)
    wpu.array_cast(a, g)
    assert g.numpy().tolist() == a.list()
    assert wpu.array_sum(a) == pytest.approx(0.10009765625 + 2.0 - 8.5, rel=2**-8)
    b = wp.zeros(3, dtype=wp.bfloat16)
    b.assign(f)
    assert b.list() == a.list()
    b.assign(a.numpy())  # uint16 NumPy data are bit patterns, as .numpy() gives them
    assert b.list() == a.list()
    assert wp.array(a.numpy(), dtype=wp.bfloat16).list() == a.list()
    keys, vals = wp.array([3.0, -1.0, 2.0, -5.0], dtype=wp.bfloat16), wp.array([0, 1, 2, 3], dtype=int)
    wpu.segmented_sort_pairs(keys, vals, 4, wp.array([0], dtype=int))
    assert keys.list() == [-5.0, -1.0, 2.0, 3.0] and vals.list() == [3, 1, 2, 0]
    assert float(wp.bfloat16(3.14159)) == 3.140625
    assert vec3bf(1.0, 2.5, 3.3).numpy_value().tolist() == [1.0, 2.5, 3.296875]


def test_structs_gradients_and_errors():
    @wp.struct
    class Sample:
        x: wp.bfloat16
        w: float

    @wp.kernel
    def weighted(s: Sample, a: wp.array(dtype=wp.bfloat16), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = float(a[i] * a[i] * s.x) * s.w

    s = Sample()
    s.x, s.w = 1.3, 2.0
    bits = s.numpy_value()[Sample.numpy_dtype()["names"].index("x")]  # records keep bfloat16 as its 16 bits
    assert (np.array([bits], dtype=np.uint32) << 16).view(np.float32)[0] == np.float32(1.296875)
    a = wp.array([0.5, 2.0], dtype=wp.bfloat16, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(weighted, 2, inputs=[s, a, out])
    tape.backward(grads={out: wp.ones(2, dtype=float)})
    np.testing.assert_allclose(out.numpy(), [0.5 * 0.5 * 1.296875 * 2, 4 * 1.296875 * 2], rtol=1e-2)
    np.testing.assert_allclose(a.grad.list(), [2 * 0.5 * 1.296875 * 2, 2 * 2 * 1.296875 * 2], rtol=1e-2)
    with pytest.raises(wp.LaunchError, match="bfloat16"):
        wp.launch(weighted, 2, inputs=[s, np.zeros(2, dtype=np.float32), out])
