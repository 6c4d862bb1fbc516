"""The kernel language's first slice, each construct checked against a NumPy or Python oracle."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import loomwork as wp

SCALE = wp.constant(2.5)
OFFSET = wp.constant(wp.vec3(1.0, 2.0, 3.0))
N_STEPS = 4


@wp.func
def lerp3(a: wp.vec3, b: wp.vec3, t: float):
    return a + (b - a) * t


@wp.func
def twice(x: float):
    return 2.0 * x


@wp.func
def twice(x: int):  # noqa: F811 - an overload by argument type
    return x * 2 + 1


@wp.func
def clamp_early(x: float):
    if x < 0.0:
        return 0.0
    if x > 1.0:
        return 1.0
    return x


@wp.func
def generic_square(x):
    return x * x


@wp.func
def with_default(x: float, k: float = 3.0):
    return x * k


@wp.func
def accumulate(a: wp.array(dtype=float), i: int):
    a[i] = a[i] + increment(1.0)


@wp.func
def increment(x: float):
    return twice(x) - 1.0


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def call_funcs(x: wp.array(dtype=float), xi: wp.array(dtype=int), out: wp.array(dtype=float),
               outi: wp.array(dtype=int), outv: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = twice(x[i]) + clamp_early(x[i]) + generic_square(x[i]) + with_default(x[i]) + with_default(x[i], k=1.0)
    outi[i] = twice(xi[i]) + generic_square(xi[i])
    outv[i] = lerp3(wp.vec3(0.0), OFFSET, x[i]) * SCALE
    accumulate(out, i)


@wp.kernel
def control_flow(x: wp.array(dtype=int), out: wp.array(dtype=int)):
    i = wp.tid()
    v = x[i]
    acc = 0
    for j in range(v):
        if j % 2 == 0:
            continue
        if j > 7:
            break
        acc += j
    for j in range(10, 0, -3):
        acc += j
    k = 0
    while k * k < v:
        k += 1
    r = 0
    if v < 3:
        r = 1
    elif v < 6:
        r = 2
    else:
        r = 3
    out[i] = acc * 1000 + k * 10 + r


@wp.kernel
def expressions(x: wp.array(dtype=float), out: wp.array(dtype=float), flags: wp.array(dtype=int)):
    i = wp.tid()
    v = x[i]
    a = v if v > 0.5 else -v
    b = 1.0
    b *= 3.0
    b -= 0.5
    b /= 2.0
    ok = v > 0.2 and v < 0.8
    either = v < 0.1 or not (v < 0.9)
    chain = 0.25 < v < 0.75
    out[i] = a + b + float(i) ** 2.0 - 7.0 // 2.0 + 7.5 % 2.0
    flags[i] = int(ok) + 2 * int(either) + 4 * int(chain) + 8 * int(-3 // 2 == -2) + 16 * (7 % 3) + 32 * (-7 / 2)


@wp.kernel
def short_circuit(x: wp.array(dtype=float), n: int, out: wp.array(dtype=int)):
    i = wp.tid()
    j = i * 100  # far out of range for most threads
    if i < n and x[i] > 0.0:  # x[i] only read when i < n
        out[i] = 1
    if j < n and x[j] > 0.0:
        out[i] = 2


@wp.kernel
def integer_math(a: wp.array(dtype=int), b: wp.array(dtype=int), out: wp.array(dtype=int)):
    i = wp.tid()
    x = a[i]
    y = b[i]
    out[i] = (x & y) + (x | y) * 3 + (x ^ y) * 7 + (x << 2) + (x >> 1) + ~y + x // y + x % y + x / y


@wp.kernel
def min_by_minus_one(a: wp.array(dtype=wp.int64), b: wp.array(dtype=wp.int64), out: wp.array2d(dtype=wp.int64),
                     a32: wp.array(dtype=int), b32: wp.array(dtype=int), out32: wp.array2d(dtype=int),
                     v: wp.array(dtype=wp.vec2i), vout: wp.array(dtype=wp.vec2i)):
    i = wp.tid()
    out[i, 0] = a[i] // b[i]
    out[i, 1] = a[i] % b[i]
    out[i, 2] = a[i] / b[i]
    out32[i, 0] = a32[i] // b32[i]
    out32[i, 1] = a32[i] % b32[i]
    out32[i, 2] = a32[i] / b32[i]
    vout[i] = v[i] / b32[i]


BIG = 2**40


@wp.kernel
def wide_constants(out64: wp.array(dtype=wp.int64), outu: wp.array(dtype=wp.uint64), out32: wp.array(dtype=int)):
    out64[0] = 1 << 40
    out64[1] = 2**40 + 3000000000
    out64[2] = -(2**63)
    out64[3] = BIG
    out64[4] = wp.int64(2**62) // (1 << 61)
    outu[0] = 18446744073709551615
    outu[1] = wp.uint64(-1)
    out32[0] = wp.int32(0xFFFFFFFF)
    out32[1] = -2147483648
    out32[2] = int(2.9e9 - 1e9)


@wp.kernel
def vec_mat(v: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat33), out_v: wp.array(dtype=wp.vec3),
            out_s: wp.array(dtype=float), out_m: wp.array(dtype=wp.mat33)):
    i = wp.tid()
    a = v[i]
    M = m[i]
    b = M * a + M @ a - a / 2.0 + 2.0 * a
    c = wp.cross(a, b)
    c[0] = c[0] + 1.0
    c.y = c.y * 2.0
    out_v[i] = wp.normalize(c) + wp.vec3(a.x, a[1], a.z)
    out_s[i] = wp.dot(a, b) + wp.length(a) + M[1, 2] + M[2][0] + wp.length_sq(a)
    R = M * M + wp.transpose(M) - M * 0.5
    R[0, 0] = 9.0
    R[1][2] = 4.0  # an element through its row: stored in place
    out_m[i] = R


@wp.kernel
def tid_2d(out: wp.array2d(dtype=int)):
    i, j = wp.tid()
    out[i, j] = i * 100 + j


@wp.kernel
def tid_3d(out: wp.array3d(dtype=int)):
    i, j, k = wp.tid()
    out[i, j, k] = i * 10000 + j * 100 + k


@wp.kernel
def tid_4d(out: wp.array4d(dtype=int)):
    i, j, k, l = wp.tid()
    out[i, j, k, l] = i * 1000 + j * 100 + k * 10 + l


@wp.kernel
def rows_and_shapes(a: wp.array2d(dtype=float), sums: wp.array(dtype=float)):
    i = wp.tid()
    row = a[i]
    s = 0.0
    for j in range(a.shape[1]):
        s += row[j]
    sums[i] = s + float(len(a)) * 0.0 + float(row.shape[0])


@wp.kernel
def atomics(vals: wp.array(dtype=float), ivals: wp.array(dtype=int), total: wp.array(dtype=float),
            itotal: wp.array(dtype=int), lo: wp.array(dtype=float), hi: wp.array(dtype=int),
            hist: wp.array(dtype=int), vtotal: wp.array(dtype=wp.vec3), sub: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, vals[i])
    wp.atomic_add(itotal, 0, ivals[i])
    wp.atomic_min(lo, 0, vals[i])
    wp.atomic_max(hi, 0, ivals[i])
    hist[ivals[i] % 8] += 1
    sub[0] -= 1.0
    wp.atomic_sub(sub, 1, 2.0)
    vtotal[0] += wp.vec3(1.0, vals[i], 2.0)


@wp.struct
class Body:
    pos: wp.vec3
    frame: wp.mat22
    mass: float


@wp.kernel
def component_stores(b: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat22), s: wp.array(dtype=Body),
                     g: wp.array2d(dtype=wp.vec2), total: wp.array(dtype=wp.vec3), bodies: wp.array(dtype=Body)):
    i = wp.tid()
    b[i][0] = 7.0
    b[i].y = float(i)
    b[i][2] += 1.0
    b[i][i % 3] *= 2.0
    m[i][1][1] = 9.0
    m[i][0] = wp.vec2(1.0, 2.0)
    m[i][1, 0] -= 3.0
    s[i].pos.x = 3.0
    s[i].frame[1][0] = 5.0
    s[i].mass = 4.0
    g[i, 1].y = 6.0
    g[i][0][0] = 8.0
    total[0].y += 1.0  # an atomic add on the component, exact with every thread contending
    total[0][2] -= 2.0
    bodies[0].pos.z += 1.0
    bodies[0].mass += 0.5


@wp.kernel
def atomic_returns_old(counter: wp.array(dtype=int), slots: wp.array(dtype=int)):
    i = wp.tid()
    slot = wp.atomic_add(counter, 0, 1)
    slots[slot] = i


@wp.kernel
def casts_and_types(x: wp.array(dtype=wp.float64), out16: wp.array(dtype=wp.float16), out8: wp.array(dtype=wp.int8),
                    out64: wp.array(dtype=wp.int64), outu: wp.array(dtype=wp.uint32), outb: wp.array(dtype=wp.bool)):
    i = wp.tid()
    v = x[i]
    out16[i] = wp.float16(v)
    out8[i] = wp.int8(int(v))
    out64[i] = wp.int64(v * 1.0e10)
    outu[i] = wp.uint32(4000000000)
    outb[i] = bool(v > 0.0)


@wp.kernel
def doubles(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[i]
    out[i] = v * 2.0 + wp.sqrt(v) + wp.float64(1.0) / 3.0 + wp.max(v, 0.5) + SCALE


@wp.kernel
def halves(x: wp.array(dtype=wp.float16), out: wp.array(dtype=wp.float16)):
    i = wp.tid()
    out[i] = x[i] * wp.float16(2.0) + wp.float16(0.5)


@wp.kernel
def to_half_and_back(x: wp.array(dtype=float), h: wp.array(dtype=wp.float16), back: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.float16(x[i])
    back[i] = float(h[i])


@wp.kernel
def unroll_constant_loop(out: wp.array(dtype=int)):
    i = wp.tid()
    s = 0
    for k in range(N_STEPS):
        s += k
    out[i] = s


@wp.kernel
def early_return(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    if x[i] < 0.0:
        return
    out[i] = 1.0


@wp.kernel
def no_args_kernel():
    i = wp.tid()  # noqa: F841


@wp.kernel
def math_module(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = math.sqrt(x[i]) + math.pi + wp.pi + min(x[i], 0.5) + max(x[i], 0.5) + abs(-x[i])


@wp.kernel
def uses_vec_params(v: wp.vec3, m: wp.mat22, out: wp.array(dtype=float)):
    out[0] = v[0] + v.y * 10.0 + m[1, 1] * 100.0


def test_saxpy_with_numpy_arrays_and_wp_arrays():
    """The user's saxpy snippet: NumPy arrays directly, then wp arrays."""
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device="cpu")
    np.testing.assert_allclose(y, x + 1.0)
    xa = wp.array(x, device="cpu")
    ya = wp.full(n, 1.23, dtype=float)
    wp.launch(saxpy, dim=n, inputs=[xa, ya, 2.0])
    np.testing.assert_allclose(ya.numpy(), 2.0 * x + np.float32(1.23), rtol=1e-6)


def test_outputs_argument_and_scalar_types():
    """inputs then outputs fill the parameters in order; wp.float32 scalars and ints are accepted."""
    x = wp.array(np.ones(8, dtype=np.float32))
    y = wp.zeros(8, dtype=float)
    wp.launch(saxpy, dim=8, inputs=[x], outputs=[y, wp.float32(3.0)])
    np.testing.assert_allclose(y.numpy(), 3.0)
    wp.launch(saxpy, dim=8, inputs=[x, y, 1])
    np.testing.assert_allclose(y.numpy(), 4.0)


def test_functions_overloads_generics_defaults(device):
    """@wp.func: typed calls, overloads by argument type, generic params, defaults, early returns, array params."""
    x = np.array([-0.5, 0.25, 0.5, 2.0], dtype=np.float32)
    xi = np.array([1, 2, -3, 4], dtype=np.int32)
    out = wp.zeros(4, dtype=float, device=device)
    outi = wp.zeros(4, dtype=int, device=device)
    outv = wp.zeros(4, dtype=wp.vec3, device=device)
    wp.launch(call_funcs, dim=4, inputs=[wp.array(x, device=device), wp.array(xi, device=device), out, outi, outv],
              device=device)
    expect = 2 * x + np.clip(x, 0, 1) + x * x + 3 * x + x + 1.0
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-6)
    np.testing.assert_array_equal(outi.numpy(), xi * 2 + 1 + xi * xi)
    np.testing.assert_allclose(outv.numpy(), np.outer(x, [1.0, 2.0, 3.0]) * 2.5, rtol=1e-6)


def test_control_flow_matches_python():
    """for/range with steps, break, continue, while, if/elif/else agree with the same Python code."""

    def reference(v):
        acc = 0
        for j in range(v):
            if j % 2 == 0:
                continue
            if j > 7:
                break
            acc += j
        for j in range(10, 0, -3):
            acc += j
        k = 0
        while k * k < v:
            k += 1
        r = 1 if v < 3 else (2 if v < 6 else 3)
        return acc * 1000 + k * 10 + r

    x = np.arange(0, 20, dtype=np.int32)
    out = wp.zeros(20, dtype=int)
    wp.launch(control_flow, dim=20, inputs=[x, out])
    np.testing.assert_array_equal(out.numpy(), [reference(int(v)) for v in x])


def test_expressions_and_operators():
    """Conditional expressions, augmented assignment, bool ops, chained comparisons, // % ** on floats."""
    x = np.array([0.05, 0.3, 0.6, 0.95], dtype=np.float32)
    out = wp.zeros(4, dtype=float)
    flags = wp.zeros(4, dtype=int)
    wp.launch(expressions, dim=4, inputs=[x, out, flags])
    a = np.where(x > 0.5, x, -x)
    b = (1.0 * 3.0 - 0.5) / 2.0
    np.testing.assert_allclose(out.numpy(), a + b + np.arange(4) ** 2 - 3.0 + 1.5, rtol=1e-6)
    ok = (x > 0.2) & (x < 0.8)
    either = (x < 0.1) | ~(x < 0.9)
    chain = (0.25 < x) & (x < 0.75)
    # -7 / 2 truncates (C semantics, as in Warp) and -3 // 2 floors (Python semantics)
    expect = ok + 2 * either + 4 * chain + 8 * 1 + 16 * 1 + 32 * -3
    np.testing.assert_array_equal(flags.numpy(), expect)


def test_short_circuit_protects_out_of_range_reads():
    """`and` evaluates its right side only when the left holds (no out-of-range read)."""
    x = wp.full(4, 1.0, dtype=float)
    out = wp.zeros(64, dtype=int)
    wp.launch(short_circuit, dim=64, inputs=[x, 4, out])
    expect = np.zeros(64, dtype=np.int32)
    expect[:4] = 1
    expect[0] = 2
    np.testing.assert_array_equal(out.numpy(), expect)


def test_integer_operators_and_division_by_zero():
    """Bitwise ops, shifts, // (floor) and % / (truncating, like Warp); integer division by zero gives 0."""
    a = np.array([7, -7, 12, 5, 3], dtype=np.int32)
    b = np.array([2, 2, 5, -3, 0], dtype=np.int32)
    out = wp.zeros(5, dtype=int)
    wp.launch(integer_math, dim=5, inputs=[a, b, out])
    with np.errstate(divide="ignore"):
        floordiv = np.where(b != 0, np.floor_divide(a, np.where(b == 0, 1, b)), 0)
    trunc_div = np.where(b != 0, np.trunc(a / np.where(b == 0, 1, b)).astype(np.int32), 0)
    trunc_mod = np.where(b != 0, np.fmod(a, np.where(b == 0, 1, b)), 0)
    expect = (a & b) + (a | b) * 3 + (a ^ b) * 7 + (a << 2) + (a >> 1) + ~b + floordiv + trunc_mod + trunc_div
    np.testing.assert_array_equal(out.numpy(), expect)


def test_min_divided_by_minus_one_wraps_instead_of_trapping():
    """INT_MIN // -1, / -1 and % -1 (int32, int64, int vectors / -1) give MIN, MIN and 0 instead of killing the
    process with SIGFPE; other divisors are unchanged."""
    lo64, lo32 = -(2**63), -(2**31)
    a, b = np.array([lo64, lo64, 7, -7], dtype=np.int64), np.array([-1, 1, -1, 0], dtype=np.int64)
    out, out32 = wp.zeros((4, 3), dtype=wp.int64), wp.zeros((4, 3), dtype=int)
    a32, b32 = np.array([lo32, lo32, 7, -7], dtype=np.int32), b.astype(np.int32)
    v = np.array([[lo32, 5]] * 4, dtype=np.int32)
    vout = wp.zeros(4, dtype=wp.vec2i)
    wp.launch(min_by_minus_one, 4, inputs=[a, b, out, a32, b32, out32, v, vout])
    for got, lo in ((out.numpy(), lo64), (out32.numpy(), lo32)):
        np.testing.assert_array_equal(got, [[lo, 0, lo], [lo, 0, lo], [-7, 0, -7], [0, 0, 0]])
    minus, plus = [lo32, -5], [lo32, 5]
    np.testing.assert_array_equal(vout.numpy(), [minus, plus, minus, [0, 0]])


def test_wide_integer_constants_keep_their_value():
    """Literals and constant expressions beyond int32 (1 << 40, 2**40 + 3e9, uint64 max) keep every bit;
    explicit casts reinterpret the sign at the same width (wp.uint64(-1), wp.int32(0xFFFFFFFF))."""
    out64, outu, out32 = wp.zeros(5, dtype=wp.int64), wp.zeros(2, dtype=wp.uint64), wp.zeros(3, dtype=int)
    wp.launch(wide_constants, 1, inputs=[out64, outu, out32])
    assert out64.numpy().tolist() == [2**40, 2**40 + 3000000000, -(2**63), 2**40, 2]
    assert outu.numpy().tolist() == [2**64 - 1, 2**64 - 1] and out32.numpy().tolist() == [-1, -(2**31), 1900000000]


def test_vectors_and_matrices(device):
    """vec3/mat33 arithmetic, component access and assignment, cross/dot/normalize/transpose vs NumPy."""
    rng = np.random.default_rng(1)
    n = 16
    v = rng.standard_normal((n, 3)).astype(np.float32)
    m = rng.standard_normal((n, 3, 3)).astype(np.float32)
    out_v = wp.zeros(n, dtype=wp.vec3, device=device)
    out_s = wp.zeros(n, dtype=float, device=device)
    out_m = wp.zeros(n, dtype=wp.mat33, device=device)
    wp.launch(vec_mat, dim=n, inputs=[wp.array(v, dtype=wp.vec3, device=device),
                                      wp.array(m, dtype=wp.mat33, device=device), out_v, out_s, out_m], device=device)
    mv = np.einsum("nij,nj->ni", m, v)
    b = 2 * mv - v / 2 + 2 * v
    c = np.cross(v, b)
    c[:, 0] += 1.0
    c[:, 1] *= 2.0
    exp_v = c / np.linalg.norm(c, axis=1, keepdims=True) + v
    np.testing.assert_allclose(out_v.numpy(), exp_v, rtol=1e-4, atol=1e-5)
    exp_s = np.einsum("ni,ni->n", v, b) + np.linalg.norm(v, axis=1) + m[:, 1, 2] + m[:, 2, 0] + (v * v).sum(1)
    np.testing.assert_allclose(out_s.numpy(), exp_s, rtol=1e-4, atol=1e-4)
    exp_m = m @ m + np.transpose(m, (0, 2, 1)) - 0.5 * m
    exp_m[:, 0, 0] = 9.0
    exp_m[:, 1, 2] = 4.0
    np.testing.assert_allclose(out_m.numpy(), exp_m, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel,shape", [(tid_2d, (3, 5)), (tid_3d, (2, 3, 4)), (tid_4d, (2, 3, 2, 5))])
def test_multi_dimensional_launch(kernel, shape):
    """`i, j = wp.tid()` (2-D to 4-D) gives row-major indices over the launch grid."""
    out = wp.zeros(shape, dtype=int)
    wp.launch(kernel, dim=shape, inputs=[out])
    idx = np.indices(shape)
    weights = {2: (100, 1), 3: (10000, 100, 1), 4: (1000, 100, 10, 1)}[len(shape)]
    np.testing.assert_array_equal(out.numpy(), sum(w * i for w, i in zip(weights, idx, strict=True)))


def test_large_2d_launch_uses_threads():
    """A launch big enough for the thread pool gives the same answer as a small one."""
    out = wp.zeros((512, 300), dtype=int)
    wp.launch(tid_2d, dim=(512, 300), inputs=[out])
    i, j = np.indices((512, 300))
    np.testing.assert_array_equal(out.numpy(), i * 100 + j)


def test_subarray_rows_shapes_and_strided_views():
    """a[i] of a 2-D array is a row view; a.shape[k], len(a); strided views are honoured."""
    base = np.arange(40, dtype=np.float32).reshape(5, 8)
    a = wp.array(base)
    sums = wp.zeros(5, dtype=float)
    wp.launch(rows_and_shapes, dim=5, inputs=[a, sums])
    np.testing.assert_allclose(sums.numpy(), base.sum(1) + 8)
    view = a[1:5:2, ::3]
    sums2 = wp.zeros(2, dtype=float)
    wp.launch(rows_and_shapes, dim=2, inputs=[view, sums2])
    np.testing.assert_allclose(sums2.numpy(), base[1:5:2, ::3].sum(1) + 3)


def test_atomics_are_exact_under_threads():
    """atomic_add/sub/min/max and a[i] += v agree with NumPy with every core contending."""
    n = 200_000
    rng = np.random.default_rng(0)
    vals = rng.integers(-50, 50, n).astype(np.float32)
    ivals = rng.integers(0, 1000, n).astype(np.int32)
    total = wp.zeros(1, dtype=float)
    itotal = wp.zeros(1, dtype=int)
    lo = wp.full(1, 1e9, dtype=float)
    hi = wp.full(1, -1, dtype=int)
    hist = wp.zeros(8, dtype=int)
    vtotal = wp.zeros(1, dtype=wp.vec3)
    sub = wp.zeros(2, dtype=float)
    wp.launch(atomics, dim=n, inputs=[vals, ivals, total, itotal, lo, hi, hist, vtotal, sub])
    assert total.numpy()[0] == vals.sum()
    assert itotal.numpy()[0] == ivals.sum()
    assert lo.numpy()[0] == vals.min() and hi.numpy()[0] == ivals.max()
    np.testing.assert_array_equal(hist.numpy(), np.bincount(ivals % 8, minlength=8))
    np.testing.assert_allclose(vtotal.numpy()[0], [n, vals.sum(), 2 * n])
    np.testing.assert_array_equal(sub.numpy(), [-n, -2 * n])


def test_stores_into_parts_of_array_elements():
    """b[i].y = v, m[i][1][1] = v, s[i].pos.x = v write through to the array; += / -= on a part is atomic."""
    n = 20_000  # past the serial threshold: threads contend for total[0] and bodies[0]
    b, m, s = wp.ones(n, dtype=wp.vec3), wp.zeros(n, dtype=wp.mat22), wp.zeros(n, dtype=Body)
    g, total, bodies = wp.zeros((n, 2), dtype=wp.vec2), wp.zeros(1, dtype=wp.vec3), wp.zeros(1, dtype=Body)
    wp.launch(component_stores, n, inputs=[b, m, s, g, total, bodies])
    i = np.arange(n)
    exp_b = np.stack([np.full(n, 7.0), i, np.full(n, 2.0)], axis=1)
    exp_b[i, i % 3] *= 2.0
    np.testing.assert_array_equal(b.numpy(), exp_b)
    np.testing.assert_array_equal(m.numpy(), np.broadcast_to([[1.0, 2.0], [-3.0, 9.0]], (n, 2, 2)))
    sv = s.numpy()
    np.testing.assert_array_equal(sv["pos"], np.broadcast_to([3.0, 0.0, 0.0], (n, 3)))
    np.testing.assert_array_equal(sv["frame"].reshape(n, 2, 2), np.broadcast_to([[0.0, 0.0], [5.0, 0.0]], (n, 2, 2)))
    np.testing.assert_array_equal(sv["mass"], np.full(n, 4.0))
    np.testing.assert_array_equal(g.numpy(), np.broadcast_to([[8.0, 0.0], [0.0, 6.0]], (n, 2, 2)))
    np.testing.assert_array_equal(total.numpy(), [[0.0, n, -2.0 * n]])
    assert bodies.numpy()["pos"][0].tolist() == [0.0, 0.0, n] and bodies.numpy()["mass"][0] == 0.5 * n


def test_atomic_add_returns_previous_value():
    """Each thread gets a distinct slot from atomic_add's return value."""
    n = 50_000
    counter = wp.zeros(1, dtype=int)
    slots = wp.full(n, -1, dtype=int)
    wp.launch(atomic_returns_old, dim=n, inputs=[counter, slots])
    assert counter.numpy()[0] == n
    np.testing.assert_array_equal(np.sort(slots.numpy()), np.arange(n))


def test_casts_and_scalar_types():
    """Casts between float64, float16, int8, int64, uint32 and bool behave like NumPy's."""
    x = np.array([-2.75, 0.1, 3.5, 100.25], dtype=np.float64)
    outs = [wp.zeros(4, dtype=t) for t in (wp.float16, wp.int8, wp.int64, wp.uint32, wp.bool)]
    wp.launch(casts_and_types, dim=4, inputs=[x, *outs])
    np.testing.assert_array_equal(outs[0].numpy(), x.astype(np.float16))
    np.testing.assert_array_equal(outs[1].numpy(), np.trunc(x).astype(np.int8))
    np.testing.assert_array_equal(outs[2].numpy(), (x * 1e10).astype(np.int64))
    np.testing.assert_array_equal(outs[3].numpy(), np.full(4, 4000000000, dtype=np.uint32))
    np.testing.assert_array_equal(outs[4].numpy(), x > 0)


def test_float64_kernels_keep_double_precision():
    """Literals adopt float64 next to float64 values; results match NumPy to double precision."""
    x = np.array([0.1, 2.0, 1e-8], dtype=np.float64)
    out = wp.zeros(3, dtype=wp.float64)
    wp.launch(doubles, dim=3, inputs=[x, out])
    np.testing.assert_allclose(out.numpy(), x * 2 + np.sqrt(x) + 1 / 3 + np.maximum(x, 0.5) + 2.5, rtol=1e-15)


def test_float16_arithmetic():
    """float16 arrays and arithmetic round like NumPy's float16."""
    x = np.array([0.1, 1.5, -3.25, 1000.0, 60000.0], dtype=np.float16)
    out = wp.zeros(5, dtype=wp.float16)
    wp.launch(halves, dim=5, inputs=[x, out])
    with np.errstate(over="ignore"):
        expect = (x.astype(np.float32) * np.float16(2.0)).astype(np.float16).astype(np.float32) + np.float16(0.5)
    np.testing.assert_array_equal(out.numpy(), expect.astype(np.float16))


def test_float16_conversions_round_like_numpy():
    """float32 -> float16 rounds to nearest even, with subnormals, overflow to infinity, infinities, NaN and -0
    (one F16C instruction where the CPU has it, integer code where not): the bits NumPy gives."""
    tiny = np.float32(2.0 ** -24)
    x = np.array([0.0, -0.0, 1.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65504.0, 65520.0, 1e10, -1e10, np.inf,
                  -np.inf, tiny, tiny * 0.5, tiny * 1.5, tiny * 2.5, 6.1e-5, -3.14159, 1e-3, 2049.0, 2051.0],
                 dtype=np.float32)
    h, back = wp.zeros(len(x), dtype=wp.float16), wp.zeros(len(x), dtype=float)
    with np.errstate(over="ignore"):
        expect = x.astype(np.float16)
    wp.launch(to_half_and_back, len(x), inputs=[x, h, back])
    np.testing.assert_array_equal(h.numpy().view(np.uint16), expect.view(np.uint16))
    np.testing.assert_array_equal(back.numpy(), expect.astype(np.float32))
    nan = wp.array(np.array([np.nan, -np.nan], dtype=np.float32))
    wp.launch(to_half_and_back, 2, inputs=[nan, h, back])
    assert np.isnan(h.numpy()[:2]).all() and np.isnan(back.numpy()[:2]).all()


def test_global_constants_and_plain_python_globals():
    """wp.constant values and plain Python ints are compile-time constants."""
    out = wp.zeros(3, dtype=int)
    wp.launch(unroll_constant_loop, dim=3, inputs=[out])
    np.testing.assert_array_equal(out.numpy(), [6, 6, 6])


def test_early_return_in_kernel():
    """`return` in a kernel ends that thread only."""
    x = np.array([-1.0, 1.0, -2.0, 3.0], dtype=np.float32)
    out = wp.zeros(4, dtype=float)
    wp.launch(early_return, dim=4, inputs=[x, out])
    np.testing.assert_array_equal(out.numpy(), [0, 1, 0, 1])


def test_kernel_without_arguments_and_empty_launch():
    """A kernel with no parameters launches; dim=0 does nothing."""
    wp.launch(no_args_kernel, dim=10)
    wp.launch(saxpy, dim=0, inputs=[np.zeros(0, np.float32), np.zeros(0, np.float32), 1.0])


def test_python_math_and_builtin_functions():
    """math.sqrt, math.pi, wp.pi and Python's min/max/abs work inside kernels."""
    x = np.array([0.25, 4.0], dtype=np.float32)
    out = wp.zeros(2, dtype=float)
    wp.launch(math_module, dim=2, inputs=[x, out])
    expect = np.sqrt(x) + 2 * np.pi + np.minimum(x, 0.5) + np.maximum(x, 0.5) + x
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-6)


def test_vector_and_matrix_kernel_arguments():
    """vec3 and mat22 values (or plain sequences) are accepted as kernel arguments."""
    out = wp.zeros(1, dtype=float)
    wp.launch(uses_vec_params, dim=1, inputs=[wp.vec3(1.0, 2.0, 3.0), wp.mat22(0.0, 0.0, 0.0, 4.0), out])
    assert out.numpy()[0] == 1.0 + 20.0 + 400.0
    wp.launch(uses_vec_params, dim=1, inputs=[(1.0, 1.0, 1.0), np.eye(2), out])
    assert out.numpy()[0] == 1.0 + 10.0 + 100.0


def test_load_module_builds_the_callers_module_eagerly():
    """wp.load_module() builds the caller's module now, before any launch."""
    wp.load_module()
    lm = saxpy.module.loaded[("cpu", *saxpy.module.options_key())]
    assert "saxpy" in lm.kernels


FORCE_LOAD_PROGRAM = """
import loomwork as wp
from loomwork.kernels.module import get_module

@wp.kernel
def first(a: wp.array(dtype=float)):
    a[wp.tid()] = 1.0

def second_body(a: wp.array(dtype=int)):
    a[wp.tid()] = 2

second = wp.kernel(second_body, module="force_load_second")
wp.force_load()
print(sorted(len(get_module(m).loaded) for m in ("__main__", "force_load_second")))
"""


def test_force_load_builds_every_module(tmp_path):
    """wp.force_load() builds every module with kernels, in a fresh process (so no other test's modules,
    some broken on purpose, are part of "every")."""
    script = tmp_path / "force_load.py"
    script.write_text(FORCE_LOAD_PROGRAM)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, LOOMWORK_CACHE_DIR=wp.config.kernel_cache_dir))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1, 1]"


def test_contiguous_and_strided_entries_agree():
    """Unit-stride arguments take the vectorized entry, stepped views the general one: same results."""
    n = 1 << 15
    base = np.arange(2 * n, dtype=np.float32)
    y_strided = np.ones(2 * n, dtype=np.float32)
    wp.launch(saxpy, dim=n, inputs=[base[::2], y_strided[::2], 3.0])  # NumPy views with stride 8
    np.testing.assert_allclose(y_strided[::2], 3.0 * base[::2] + 1.0)
    assert (y_strided[1::2] == 1.0).all()
    wide = wp.array(np.arange(40, dtype=np.float32).reshape(5, 8))
    cols = wide[:, 2:6]  # rows 32 bytes apart, each row contiguous
    sums = wp.zeros(5, dtype=float)
    wp.launch(rows_and_shapes, dim=5, inputs=[cols, sums])
    np.testing.assert_allclose(sums.numpy(), np.arange(40).reshape(5, 8)[:, 2:6].sum(1) + 4)


@wp.struct
class TupleHeld:
    origin: wp.vec3
    scale: float


@wp.func
def tuple_annotated(x: int, y: float) -> tuple[int, float]:
    return (x * 123, y * 1.5)


@wp.kernel
def tuple_values(out: wp.array(dtype=float)):
    s = TupleHeld(wp.vec3(1.0, 2.0, 3.0), 0.5)
    t = (1, 2.5, wp.vec3(1.0, 2.0, 3.0), s, wp.tid())
    t0, t1, t2, t3, t4 = t
    out[0] = float(len(t)) + t[1] + t3.scale + t2[2] + float(t0 + t4)
    a, b = tuple_annotated(1, 2.0)
    axis_angle = wp.quat_to_axis_angle(wp.quat_identity())
    out[1] = float(a) + b + axis_angle[1]


def test_tuple_values():
    """Tuples are values in kernels: built from mixed types, indexed by constants, unpacked, measured with len(),
    returned (annotated `-> tuple[int, float]`) and received from builtins with several outputs."""
    out = wp.zeros(2)
    wp.launch(tuple_values, 1, inputs=[out])
    np.testing.assert_allclose(out.numpy(), [12.0, 126.0])


@wp.kernel
def body_is_ellipsis(a: wp.array(dtype=float)):
    ...


def test_a_body_of_ellipsis_compiles():
    """`...` as a kernel's body (a placeholder) compiles to a kernel that does nothing, as in Warp."""
    a = wp.ones(2)
    wp.launch(body_is_ellipsis, 2, inputs=[a])
    assert a.numpy().tolist() == [1.0, 1.0]


@wp.kernel
def keyword_calls(out: wp.array(dtype=float)):
    out[0] = wp.pow(x=2.0, y=4.0) + wp.pow(2.0, y=3.0) + wp.pow(y=1.0, x=5.0)
    m = wp.transform_compose(rotation=wp.quat_identity(), scale=wp.vec3(2.0, 3.0, 4.0),
                             position=wp.vec3(1.0, 2.0, 3.0))
    out[1] = m[1, 1] + m[2, 3]
    wp.atomic_add(out, value=0.5, i=2)


def test_builtins_take_arguments_by_keyword():
    """Builtins take keyword arguments by their documented parameter names, in any order after the
    positional ones; a keyword that repeats a positional argument or names no parameter is refused."""
    out = wp.zeros(3)
    wp.launch(keyword_calls, 1, inputs=[out])
    assert out.numpy().tolist() == [16.0 + 8.0 + 5.0, 3.0 + 3.0, 0.5]

    def repeats(out: wp.array(dtype=float)):
        out[0] = wp.pow(2.0, x=4.0)

    def unknown(out: wp.array(dtype=float)):
        out[0] = wp.sin(angle=1.0)

    for f, words in ((repeats, "keyword argument.s. x .*it takes pow.x, y."), (unknown, "angle .*it takes sin.x.")):
        with pytest.raises(wp.KernelTypeError, match=words):
            wp.launch(wp.kernel(f, module=f"test_language_keywords_{f.__name__}"), 1, inputs=[out])


def test_func_decorator_takes_name_module_and_inline():
    """@wp.func(name=..., module=..., inline=...) as Warp's: a unique module keeps a definition apart from the
    same name's overloads; the function is called from kernels and Python as any other."""
    @wp.func(module="unique", inline=True)
    def twice(x: float) -> float:
        return 2.0 * x

    @wp.func(name="thrice_fn")
    def thrice(x: float) -> float:
        return 3.0 * x

    @wp.kernel(module="unique")
    def use(out: wp.array(dtype=float)):
        out[0] = twice(1.5) + thrice(1.0)

    out = wp.zeros(1)
    wp.launch(use, 1, inputs=[out])
    assert out.numpy()[0] == 6.0 and twice(2.0) == 4.0 and thrice.key == "thrice_fn"
    with pytest.raises(TypeError, match="inline must be"):
        wp.func(inline="yes")
