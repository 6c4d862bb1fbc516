"""CPU kernels across SIMD lanes (kernels/simd.py): the same bits as one thread at a time, and the reasons a
kernel stays scalar."""

import inspect

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import codegen, simd
from loomwork.kernels.frontend import Builder, Source
from loomwork.kernels.module import BuildContext

LANES = f"{__name__}.lanes"
SCALAR = f"{__name__}.scalar"


def both(f):
    """`f` as a kernel in a module that runs threads across SIMD lanes and in one that runs them one at a time."""
    return (wp.kernel(f, module=LANES),
            wp.kernel(f, module=SCALAR, module_options={"cpu_simd": False}))


def nbody(pos: wp.array(dtype=wp.vec3), mass: wp.array(dtype=float), acc: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    pi = pos[i]
    a = wp.vec3(0.0)
    for j in range(pos.shape[0]):
        r = pos[j] - pi
        inv = 1.0 / wp.sqrt(wp.dot(r, r) + 0.01)
        a += r * (mass[j] * inv * inv * inv)
    acc[i] = a


def branches(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float), steps: wp.array(dtype=wp.int32)):
    i = wp.tid()
    v = x[i]
    if v > 0.5:
        v = v * 2.0
        if v > 1.5:
            v = v - 1.0
    elif v < 0.1:
        v = -v
    else:
        v = wp.sqrt(v)
    w = v if v > 0.3 else 0.3 - v
    k = 0
    while w < 8.0 and k < n:
        w = w * 1.5 + 0.1
        k += 1
    steps[i] = k
    if i % 3 == 0:
        out[i] = w
        return
    out[i] = -w


def early_return(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float), scale: float, reps: int):
    i = wp.tid()
    if i >= n:
        return
    if x[i] < 0.0:
        scale = 3.0
    y = x[i]
    for _r in range(reps):
        y = y * scale + 1.0
    out[i] = y


def vec_math(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat33),
             d64: wp.array(dtype=wp.vec3d), out_v: wp.array(dtype=wp.vec3), out_s: wp.array(dtype=float),
             out_d: wp.array(dtype=wp.vec3d), reps: int):
    i = wp.tid()
    u = a[i]
    v = b[i]
    c = wp.cross(u, v)
    d = wp.dot(u, c) + wp.length(v) - wp.length_sq(u)
    nv = wp.normalize(v)
    r = m[i] * u
    e = wp.max(u, v) - wp.min(u, v) + wp.abs(u - v) * 0.5
    s = wp.where(d > 0.0, c, -c)
    t = wp.vec3(u[0], 2.0, d)
    t[1] = t[1] + e[2]
    q = wp.quat_from_axis_angle(nv, d)
    acc = wp.vec3(0.0)
    for _r in range(reps):
        acc = acc + wp.cross(acc + u, v) * 0.5
    out_v[i] = c + nv + r + e + s + t / 3.0 + wp.quat_rotate(q, u) + acc
    out_s[i] = d
    g = d64[i]
    out_d[i] = wp.cross(g, g * 2.0 + wp.vec3d(1.0, 0.5, 0.25)) / wp.length(g)


def int_ops(a: wp.array(dtype=wp.int32), b: wp.array(dtype=wp.int32), u: wp.array(dtype=wp.uint32),
            big: wp.array(dtype=wp.int64), out: wp.array(dtype=wp.int32), out64: wp.array(dtype=wp.int64),
            outf: wp.array(dtype=float), reps: int):
    i = wp.tid()
    x = a[i]
    y = b[i]
    q = x / y
    r = x % y
    z = (x & 0xFF) | (y << 2) ^ (x >> 1)
    mn = wp.min(x, y) + wp.max(x, y) * 3 - wp.abs(x)
    acc = 0
    for j in range(reps):
        acc = acc + (x ^ j) * 3
    out[i] = q + r + z + mn + int(u[i] >> wp.uint32(3)) + int(x < y) + acc
    out64[i] = big[i] * wp.int64(x) + wp.int64(i)
    outf[i] = float(x) / 3.0 + float(q)


@wp.func
def bump(counts: wp.array(dtype=wp.int32), k: int) -> float:
    wp.atomic_add(counts, k, 1)
    return float(k) * 0.5


def atomics(x: wp.array(dtype=float), counts: wp.array(dtype=wp.int32), out: wp.array(dtype=float),
            hist: wp.array(dtype=wp.int32), firsts: wp.array(dtype=wp.int32), reps: int):
    i = wp.tid()
    v = x[i]
    k = int(v * 4.0)
    w = wp.sqrt(v * v + 1.0) * 0.5 - v / 3.0
    for _r in range(reps):
        w = wp.max(w, v * 0.25) + wp.min(w, 0.5)
    out[i] = bump(counts, k) + w
    wp.atomic_add(hist, i % 5, 1)
    firsts[i] = wp.atomic_max(hist, 5, i)


def grid(a: wp.array2d(dtype=float), out: wp.array2d(dtype=float), reps: int):
    i, j = wp.tid()
    v = a[i, j]
    for _r in range(reps):
        v = v * float(i) + float(j)
    out[i, j] = v


def with_print(x: wp.array(dtype=float)):
    i = wp.tid()
    print(x[i])


def with_break(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    s = 0.0
    for j in range(10):
        if x[i] < float(j) * 0.1:
            break
        s += 1.0
    out[i] = s


def with_varying_loop(out: wp.array(dtype=float)):
    i = wp.tid()
    s = 0.0
    for j in range(i % 7):
        s += float(j)
    out[i] = s


def with_sum(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


KERNELS = {f.__name__: both(f) for f in (nbody, branches, early_return, vec_math, int_ops, atomics, grid,
                                         with_break, with_varying_loop, with_sum)}
rng = np.random.default_rng(7)


def run_both(name: str, dim, make_args) -> list[tuple[np.ndarray, np.ndarray]]:
    """Launch kernel `name` both ways on fresh copies of the same arguments; (lanes, scalar) output pairs."""
    results = []
    for k in KERNELS[name]:
        args = make_args()
        wp.launch(k, dim, inputs=args)
        results.append([a.numpy().copy() for a in args if isinstance(a, wp.array)])
    return list(zip(*results, strict=True))


def assert_same_bits(pairs) -> None:
    for lanes, scalar in pairs:
        assert lanes.dtype == scalar.dtype and lanes.tobytes() == scalar.tobytes()


@pytest.mark.parametrize("n", [1, 15, 16, 37, 200])
def test_nbody_is_bitwise_the_scalar_path(n):
    """n-body forces through SIMD lanes equal the one-thread path bit for bit, tails of odd n included."""
    pos = rng.standard_normal((n, 3)).astype(np.float32)
    mass = rng.uniform(0.5, 1.5, n).astype(np.float32)
    pairs = run_both("nbody", n, lambda: [wp.array(pos, dtype=wp.vec3), wp.array(mass),
                                          wp.zeros(n, dtype=wp.vec3)])
    assert_same_bits(pairs)
    r = pos[None, :, :] - pos[:, None, :]
    inv = 1.0 / np.sqrt((r.astype(np.float64) ** 2).sum(-1) + 0.01)
    np.testing.assert_allclose(pairs[2][0], (r * (mass * inv**3)[..., None]).sum(1), rtol=1e-4, atol=1e-4)


def test_branches_loops_and_returns_under_masks():
    """if/elif/else, a conditional expression, a while loop and a return on conditions that differ between
    threads give the scalar path's bits, and the oracle's values."""
    n = 101
    x = rng.uniform(-0.2, 1.2, n).astype(np.float32)
    x[:6] = [0.0, -0.0, 0.5, 0.1, np.nan, 1.0]
    pairs = run_both("branches", n, lambda: [wp.array(x), 9, wp.zeros(n), wp.zeros(n, dtype=wp.int32)])
    assert_same_bits(pairs)
    expect_steps = []
    for i, v in enumerate(x.astype(np.float64)):
        v = np.float32(v)
        if v > 0.5:
            v = np.float32(v * 2)
            v = np.float32(v - 1) if v > 1.5 else v
        elif v < 0.1:
            v = -v
        else:
            v = np.sqrt(v)
        w, k = (v if v > 0.3 else np.float32(0.3) - v), 0
        while w < 8.0 and k < 9:
            w, k = np.float32(np.float32(w * np.float32(1.5)) + np.float32(0.1)), k + 1
        expect_steps.append(k)
        assert pairs[1][0][i] == pytest.approx(w if i % 3 == 0 else -w, rel=1e-6, nan_ok=True)
    assert pairs[2][0].tolist() == expect_steps


def test_returned_lanes_touch_no_memory():
    """Threads past the arrays' end return first; the other lanes of their group still run, and nothing is
    read or written past the end. A parameter assigned under a varying condition becomes lanes."""
    n, dim = 30, 45
    x = rng.standard_normal(n).astype(np.float32)
    pairs = run_both("early_return", dim, lambda: [wp.array(x), n, wp.zeros(n), 2.0, 2])
    assert_same_bits(pairs)
    s = np.where(x < 0, np.float32(3), np.float32(2))
    np.testing.assert_array_equal(pairs[1][0], (x * s + np.float32(1)) * s + np.float32(1))


def test_vector_matrix_and_quaternion_math():
    """vec3 (as three lanes of registers), mat33, quaternion and vec3d math give the scalar path's bits."""
    n = 53
    a = rng.standard_normal((n, 3)).astype(np.float32)
    b = rng.standard_normal((n, 3)).astype(np.float32)
    b[0] = 0.0  # normalize of a zero vector
    m = rng.standard_normal((n, 3, 3)).astype(np.float32)
    g = rng.standard_normal((n, 3))
    pairs = run_both("vec_math", n, lambda: [
        wp.array(a, dtype=wp.vec3), wp.array(b, dtype=wp.vec3), wp.array(m, dtype=wp.mat33),
        wp.array(g, dtype=wp.vec3d), wp.zeros(n, dtype=wp.vec3), wp.zeros(n), wp.zeros(n, dtype=wp.vec3d), 3])
    assert_same_bits(pairs)
    c = np.cross(a, b)
    d = (a * c).sum(1) + np.linalg.norm(b, axis=1) - (a * a).sum(1)
    np.testing.assert_allclose(pairs[5][0], d, rtol=1e-4, atol=1e-4)
    gg = np.cross(g, g * 2 + [1.0, 0.5, 0.25]) / np.linalg.norm(g, axis=1)[:, None]
    np.testing.assert_allclose(pairs[6][0], gg, rtol=1e-12)


def test_integer_operations():
    """int32 division and remainder by zero and by -1, bit operations, shifts, min/max/abs, uint32 and int64
    arithmetic and conversions give the scalar path's bits."""
    n = 77
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    b = rng.integers(-5, 5, n).astype(np.int32)
    a[:3], b[:3] = [-(2**31), 7, 5], [-1, 0, -1]
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    big = rng.integers(-(2**40), 2**40, n)
    pairs = run_both("int_ops", n, lambda: [wp.array(a), wp.array(b), wp.array(u), wp.array(big, dtype=wp.int64),
                                            wp.zeros(n, dtype=wp.int32), wp.zeros(n, dtype=wp.int64), wp.zeros(n), 2])
    assert_same_bits(pairs)
    np.testing.assert_array_equal(pairs[5][0], big * a + np.arange(n))
    expect = []
    for x, y, w in zip(a.tolist(), b.tolist(), u.tolist(), strict=True):
        q = 0 if y == 0 else -x if y == -1 else int(x / y)
        r = 0 if y in (0, -1) else x - y * int(x / y)
        z = (x & 0xFF) | ((y << 2) ^ (x >> 1))
        acc = x * 3 + (x ^ 1) * 3
        expect.append(q + r + z + min(x, y) + max(x, y) * 3 - abs(x) + (w >> 3) + (x < y) + acc)
    np.testing.assert_array_equal(pairs[4][0], (np.array(expect, dtype=np.int64) % 2**32).astype(np.uint32)
                                  .view(np.int32))


def test_atomics_and_function_calls_run_lane_by_lane():
    """Atomics and user functions with side effects run once per thread, in lanes that are on."""
    n = 43
    x = rng.uniform(0, 2, n).astype(np.float32)
    pairs = run_both("atomics", n, lambda: [wp.array(x), wp.zeros(8, dtype=wp.int32), wp.zeros(n),
                                            wp.zeros(6, dtype=wp.int32), wp.zeros(n, dtype=wp.int32), 1])
    for lanes, scalar in pairs[:4]:
        np.testing.assert_array_equal(lanes, scalar)
    k = (x * np.float32(4)).astype(np.int32)
    xd = x.astype(np.float64)
    w = np.sqrt(xd * xd + 1) * 0.5 - xd / 3
    np.testing.assert_allclose(pairs[2][0], k * 0.5 + np.maximum(w, xd * 0.25) + np.minimum(w, 0.5), rtol=1e-5)
    assert pairs[2][0].tobytes() == pairs[2][1].tobytes()
    np.testing.assert_array_equal(pairs[1][0], np.bincount(k, minlength=8))
    np.testing.assert_array_equal(pairs[3][0][:5], np.bincount(np.arange(n) % 5))
    assert pairs[3][0][5] == n - 1


def test_two_dimensional_launch():
    """A 2-D launch splits consecutive threads into (i, j) in every lane."""
    a = rng.standard_normal((7, 13)).astype(np.float32)
    pairs = run_both("grid", (7, 13), lambda: [wp.array(a), wp.zeros((7, 13)), 1])
    assert_same_bits(pairs)
    i, j = np.mgrid[0:7, 0:13]
    np.testing.assert_array_equal(pairs[1][0], a * i.astype(np.float32) + j.astype(np.float32))


def test_kernels_that_stay_scalar_give_right_answers():
    """Kernels with a varying break, a varying loop bound or a fixed-element atomic sum run correctly."""
    n = 29
    x = rng.uniform(0, 1, n).astype(np.float32)
    brk = run_both("with_break", n, lambda: [wp.array(x), wp.zeros(n)])
    np.testing.assert_array_equal(brk[1][0], [min(10, int(np.ceil(v * 10))) for v in x.astype(np.float64)])
    loop = run_both("with_varying_loop", n, lambda: [wp.zeros(n)])
    np.testing.assert_array_equal(loop[0][0], [sum(range(i % 7)) for i in range(n)])
    total = run_both("with_sum", n, lambda: [wp.array(x), wp.zeros(1)])
    assert_same_bits(total)


def report_of(f) -> list[str]:
    """What the vectorizer reports for kernel function `f`."""
    k = wp.kernel(f, module=f"{__name__}.report")
    ctx = BuildContext(False)
    fn = Builder(Source(k.func), k.key, k.cname, dict(zip(*k.signature(), strict=True)), True, ctx).build()
    lines: list[str] = []
    codegen.module_source(ctx.order, [fn], False, vectorize=simd.vectorizer(lines.append))
    return lines


@pytest.mark.parametrize("f, construct, why", [
    (with_print, "print()", "the threads' lines would interleave"),
    (with_break, "break", "it is under a condition that differs between threads"),
    (with_varying_loop, "a for loop", "its bounds differ between threads"),
    (with_sum, "an atomic sum into a fixed element", "accumulated per chunk of threads in thread order"),
])
def test_scalar_fallbacks_say_which_construct_and_why(f, construct, why):
    """A kernel that keeps the scalar path is reported with the construct, its file:line and the reason."""
    (line,) = report_of(f)
    assert f"kernel '{f.__name__}' runs one thread at a time" in line
    assert construct in line and why in line and f"{__file__}:" in line
    src, first = inspect.getsourcelines(f)
    word = {"print()": "print(", "break": "break", "a for loop": "for j",
            "an atomic sum into a fixed element": "wp.atomic_add"}[construct]
    at = first + next(i for i, s in enumerate(src) if s.strip().startswith(word))
    assert line.split(f"{__file__}:")[1].startswith(f"{at} (")


def without_loops(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0 + 1.0


def mostly_lane_by_lane(x: wp.array(dtype=float), counts: wp.array(dtype=wp.int32), reps: int):
    i = wp.tid()
    for _r in range(reps):
        bump(counts, int(wp.sin(x[i])))


def test_vectorized_kernels_report_their_lane_by_lane_parts():
    """n-body vectorizes whole; the atomics kernel names what runs lane by lane; a kernel without loops, or
    whose work is mostly lane by lane, keeps the scalar path."""
    assert report_of(nbody) == ["loomwork: kernel 'nbody' runs threads across SIMD lanes on the CPU"]
    (line,) = report_of(atomics)
    assert "runs threads across SIMD lanes" in line and "atomic_add" in line and "bump(" in line
    (line,) = report_of(without_loops)
    assert "runs one thread at a time on the CPU: no loop does vector work" in line
    (line,) = report_of(mostly_lane_by_lane)
    assert "runs one thread at a time on the CPU: too much of its work has no vector form (sin(float32)" in line


def test_verbose_build_prints_the_reasons(capfd):
    """With wp.config.verbose on, building a module prints which kernels stay scalar and why."""
    k = wp.kernel(with_varying_loop, module="unique")
    old = wp.config.verbose
    wp.config.verbose = True
    try:
        wp.launch(k, 3, inputs=[wp.zeros(3)])
    finally:
        wp.config.verbose = old
    err = capfd.readouterr().err
    assert "kernel 'with_varying_loop' runs one thread at a time on the CPU: a for loop" in err
