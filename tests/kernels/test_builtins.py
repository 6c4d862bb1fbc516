"""Every math builtin of the first slice against NumPy, in float32 and float64, on random and edge inputs."""

import numpy as np
import pytest

import loomwork as wp

UNARY = {
    "sqrt": (np.sqrt, (0.0, 100.0)), "sin": (np.sin, (-10.0, 10.0)), "cos": (np.cos, (-10.0, 10.0)),
    "tan": (np.tan, (-1.5, 1.5)), "asin": (np.arcsin, (-1.0, 1.0)), "acos": (np.arccos, (-1.0, 1.0)),
    "atan": (np.arctan, (-50.0, 50.0)), "sinh": (np.sinh, (-5.0, 5.0)), "cosh": (np.cosh, (-5.0, 5.0)),
    "tanh": (np.tanh, (-5.0, 5.0)), "exp": (np.exp, (-20.0, 20.0)), "log": (np.log, (1e-3, 1e3)),
    "log2": (np.log2, (1e-3, 1e3)), "log10": (np.log10, (1e-3, 1e3)), "floor": (np.floor, (-5.0, 5.0)),
    "ceil": (np.ceil, (-5.0, 5.0)), "trunc": (np.trunc, (-5.0, 5.0)), "cbrt": (np.cbrt, (-8.0, 8.0)),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), (-5.0, 5.0)),
    "frac": (lambda x: x - np.trunc(x), (-5.0, 5.0)), "abs": (np.abs, (-5.0, 5.0)),
    "sign": (lambda x: np.where(x < 0, -1.0, 1.0), (-5.0, 5.0)), "degrees": (np.degrees, (-5.0, 5.0)),
    "radians": (np.radians, (-500.0, 500.0)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100.0)),
    "step": (lambda x: np.where(x < 0, 1.0, 0.0), (-5.0, 5.0)),
    "nonzero": (lambda x: np.where(x != 0, 1.0, 0.0), (-5.0, 5.0)), "rint": (np.rint, (-5.0, 5.0)),
}
BINARY = {
    "atan2": (np.arctan2, (-5.0, 5.0)), "pow": (np.power, (0.1, 4.0)), "min": (np.minimum, (-5.0, 5.0)),
    "max": (np.maximum, (-5.0, 5.0)), "add": (np.add, (-5.0, 5.0)), "sub": (np.subtract, (-5.0, 5.0)),
    "mul": (np.multiply, (-5.0, 5.0)), "div": (np.divide, (0.5, 5.0)), "mod": (np.fmod, (0.5, 5.0)),
    "copysign": (np.copysign, (-5.0, 5.0)),
}
TERNARY = {
    "clamp": (np.clip, (-5.0, 5.0)), "lerp": (lambda a, b, t: a + (b - a) * t, (-5.0, 5.0)),
    "smoothstep": (lambda a, b, x: (lambda t: t * t * (3 - 2 * t))(np.clip((x - a) / (b - a), 0, 1)), (-5.0, 5.0)),
}
DTYPES = (wp.float32, wp.float64)


def unary_kernel(fn, dtype):
    def unary(x: wp.array(dtype=dtype), y: wp.array(dtype=dtype)):
        i = wp.tid()
        y[i] = fn(x[i])

    return wp.kernel(unary)


def binary_kernel(fn, dtype):
    def binary(x: wp.array(dtype=dtype), z: wp.array(dtype=dtype), y: wp.array(dtype=dtype)):
        i = wp.tid()
        y[i] = fn(x[i], z[i])

    return wp.kernel(binary)


def ternary_kernel(fn, dtype):
    def ternary(a: wp.array(dtype=dtype), b: wp.array(dtype=dtype), c: wp.array(dtype=dtype),
                y: wp.array(dtype=dtype)):
        i = wp.tid()
        y[i] = fn(a[i], b[i], c[i])

    return wp.kernel(ternary)


KERNELS = {}
for _d in DTYPES:
    for _n in UNARY:
        KERNELS[_n, _d] = unary_kernel(getattr(wp, _n), _d)
    for _n in BINARY:
        KERNELS[_n, _d] = binary_kernel(getattr(wp, _n), _d)
    for _n in TERNARY:
        KERNELS[_n, _d] = ternary_kernel(getattr(wp, _n), _d)


def tolerance(dtype):
    return dict(rtol=2e-6, atol=2e-6) if dtype is wp.float32 else dict(rtol=1e-14, atol=1e-14)


def inputs(lo, hi, dtype, n=257, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, n)
    edges = [v for v in (lo, hi, 0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5) if lo <= v <= hi]
    x[: len(edges)] = edges
    return x.astype(wp.dtype_to_numpy(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    """A unary builtin matches NumPy."""
    ref, (lo, hi) = UNARY[name]
    x = inputs(lo, hi, dtype)
    y = wp.zeros(len(x), dtype=dtype)
    wp.launch(KERNELS[name, dtype], dim=len(x), inputs=[x, y])
    np.testing.assert_allclose(y.numpy(), ref(x.astype(np.float64)).astype(x.dtype), **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    """A binary builtin matches NumPy."""
    ref, (lo, hi) = BINARY[name]
    a, b = inputs(lo, hi, dtype, seed=1), inputs(lo, hi, dtype, seed=2)[::-1].copy()
    y = wp.zeros(len(a), dtype=dtype)
    wp.launch(KERNELS[name, dtype], dim=len(a), inputs=[a, b, y])
    np.testing.assert_allclose(y.numpy(), ref(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype),
                               **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(TERNARY))
def test_ternary(name, dtype):
    """A three-argument builtin matches NumPy (lo <= hi ordered for clamp and smoothstep)."""
    ref, (lo, hi) = TERNARY[name]
    a, b, c = (inputs(lo, hi, dtype, seed=s) for s in (3, 4, 5))
    if name != "lerp":
        a, b = np.minimum(a, b), np.maximum(a, b) + 0.1
    y = wp.zeros(len(a), dtype=dtype)
    wp.launch(KERNELS[name, dtype], dim=len(a), inputs=[a, b, c, y])
    expect = ref(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)).astype(a.dtype)
    np.testing.assert_allclose(y.numpy(), expect, rtol=5e-6 if dtype is wp.float32 else 1e-13, atol=5e-6)


def test_every_math_builtin_is_covered():
    """Each builtin in the Scalar Math and Vector Math groups has a test here or in test_language.py."""
    tested_elsewhere = {"bit_count",  # test_warp_spellings.py
                        "dot", "cross", "length", "length_sq", "normalize", "transpose", "cw_mul", "cw_div",
                        "isnan", "isinf", "isfinite", "outer", "skew", "trace", "diag", "determinant", "inverse",
                        "norm_l1", "norm_l2"}
    tested_elsewhere |= {  # test_linalg.py
        "erf", "erfc", "erfinv", "erfcinv", "ddot", "argmin", "argmax", "matrix_from_rows", "matrix_from_cols",
        "norm_huber", "norm_pseudo_huber", "smooth_normalize", "svd2", "svd3", "qr3", "eig3", "_svd2", "_svd3",
        "_qr3", "_eig3"}
    tested_elsewhere |= {"inverse_approx"}  # test_rotations_and_utility.py
    groups = {"Scalar Math", "Vector Math"}
    names = {b.name for b in wp._BUILTINS.values() if b.group in groups}
    missing = names - set(UNARY) - set(BINARY) - set(TERNARY) - tested_elsewhere
    assert not missing, f"untested builtins: {sorted(missing)}"


@wp.kernel
def classify(x: wp.array(dtype=float), out: wp.array(dtype=int)):
    i = wp.tid()
    out[i] = int(wp.isnan(x[i])) + 2 * int(wp.isinf(x[i])) + 4 * int(wp.isfinite(x[i]))


@wp.kernel
def componentwise(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.cw_mul(a[i], b[i]) + wp.cw_div(a[i], b[i]) + wp.min(a[i], b[i]) + wp.max(a[i], b[i]) + wp.abs(
        -a[i]) + wp.lerp(a[i], b[i], 0.25)


def test_nan_inf_classification():
    """isnan/isinf/isfinite on nan, +-inf and finite values (inf and nan literals included)."""
    x = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0], dtype=np.float32)
    out = wp.zeros(5, dtype=int)
    wp.launch(classify, dim=5, inputs=[x, out])
    np.testing.assert_array_equal(out.numpy(), [1, 2, 2, 4, 4])


def test_componentwise_vector_builtins():
    """cw_mul, cw_div, min, max, abs and lerp on vectors match NumPy."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-3, 3, (9, 3)).astype(np.float32)
    b = rng.uniform(0.5, 3, (9, 3)).astype(np.float32)
    out = wp.zeros(9, dtype=wp.vec3)
    wp.launch(componentwise, dim=9, inputs=[wp.array(a, dtype=wp.vec3), wp.array(b, dtype=wp.vec3), out])
    expect = a * b + a / b + np.minimum(a, b) + np.maximum(a, b) + np.abs(a) + a + (b - a) * 0.25
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5)


@wp.kernel
def matrix_math(a: wp.array(dtype=wp.vec3d), b: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat33d),
                m4: wp.array(dtype=wp.mat44d), mats: wp.array(dtype=wp.mat33d), scalars: wp.array(dtype=wp.float64),
                inv4: wp.array(dtype=wp.mat44d), picks: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    mats[i * 4 + 0] = wp.outer(a[i], b[i])
    mats[i * 4 + 1] = wp.skew(a[i])
    mats[i * 4 + 2] = wp.diag(b[i])
    mats[i * 4 + 3] = wp.inverse(m[i])
    scalars[i * 5 + 0] = wp.trace(m[i])
    scalars[i * 5 + 1] = wp.determinant(m[i])
    scalars[i * 5 + 2] = wp.determinant(m4[i])
    scalars[i * 5 + 3] = wp.norm_l1(a[i])
    scalars[i * 5 + 4] = wp.norm_l2(a[i])
    inv4[i] = wp.inverse(m4[i])
    picks[i * 2] = wp.select(a[i][0] > b[i][0], a[i], b[i])
    picks[i * 2 + 1] = wp.where(a[i][0] > b[i][0], a[i], b[i])


def test_matrix_builtins_match_numpy():
    """outer, skew, diag, inverse, trace, determinant (3x3, 4x4), norms, select/where against NumPy."""
    rng = np.random.default_rng(6)
    n = 8
    a, b = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    m, m4 = rng.standard_normal((n, 3, 3)), rng.standard_normal((n, 4, 4))
    mats, scalars = wp.zeros(4 * n, dtype=wp.mat33d), wp.zeros(5 * n, dtype=wp.float64)
    inv4, picks = wp.zeros(n, dtype=wp.mat44d), wp.zeros(2 * n, dtype=wp.vec3d)
    wp.launch(matrix_math, n, inputs=[wp.array(a, dtype=wp.vec3d), wp.array(b, dtype=wp.vec3d),
                                      wp.array(m, dtype=wp.mat33d), wp.array(m4, dtype=wp.mat44d),
                                      mats, scalars, inv4, picks])
    M, S, P = mats.numpy().reshape(n, 4, 3, 3), scalars.numpy().reshape(n, 5), picks.numpy().reshape(n, 2, 3)
    for i in range(n):
        np.testing.assert_allclose(M[i, 0], np.outer(a[i], b[i]), atol=1e-12)
        np.testing.assert_allclose(M[i, 1] @ b[i], np.cross(a[i], b[i]), atol=1e-12)
        np.testing.assert_allclose(M[i, 2], np.diag(b[i]), atol=1e-12)
        np.testing.assert_allclose(M[i, 3], np.linalg.inv(m[i]), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(S[i], [np.trace(m[i]), np.linalg.det(m[i]), np.linalg.det(m4[i]),
                                          np.abs(a[i]).sum(), np.linalg.norm(a[i])], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(inv4.numpy()[i], np.linalg.inv(m4[i]), rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(P[i], [b[i], a[i]] if a[i][0] > b[i][0] else [a[i], b[i]])
