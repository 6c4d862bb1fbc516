"""Forms Warp programs use, each against an oracle: wp.types constructors and queries inside and outside
kernels, the math constants, ranged randu, 4-D curl noise, matrix atomics, quaternion and transform
operators, Kernel(options=) and module="unique"."""

import ctypes
import enum
import typing

import numpy as np
import pytest

import loomwork as wp
import loomwork.types as wpt
from loomwork.kernels.annotations import arg_type
from loomwork.kernels.errors import KernelNameError, LaunchError


@wp.kernel
def construct_with_types(out3: wp.array(dtype=wp.vec3), out23: wp.array(dtype=wp.types.matrix((2, 3), float)),
                         outq: wp.array(dtype=wp.quatd), outt: wp.array(dtype=wp.transform),
                         consts: wp.array(dtype=float)):
    out3[0] = wp.types.vector(1.0, 2.0, 3.0) + wp.types.vector(length=3, dtype=float)
    out23[0] = wp.types.matrix(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, shape=(2, 3))
    outq[0] = wp.types.quaternion(0.0, 0.0, 0.0, 1.0, dtype=wp.float64)
    outt[0] = wp.types.transformation(wp.vec3(1.0, 2.0, 3.0), wp.quat_identity(), dtype=float)
    consts[0] = wp.HALF_PI
    consts[1] = wp.TAU - 2.0 * wp.PI
    consts[2] = wp.LOG2E * wp.LN2
    consts[3] = wp.LOG10E * wp.LN10
    consts[4] = wp.PHI * wp.PHI - wp.PHI
    consts[5] = wp.E


def test_wp_types_constructors_and_constants_in_kernels():
    """wp.types.vector/matrix/quaternion/transformation construct values in kernels; the constants are
    Python floats usable in kernels (float32 there)."""
    out3, out23 = wp.zeros(1, dtype=wp.vec3), wp.zeros(1, dtype=wp.types.matrix((2, 3), float))
    outq, outt, consts = wp.zeros(1, dtype=wp.quatd), wp.zeros(1, dtype=wp.transform), wp.zeros(6)
    wp.launch(construct_with_types, 1, inputs=[out3, out23, outq, outt, consts])
    np.testing.assert_array_equal(out3.numpy()[0], [1, 2, 3])
    np.testing.assert_array_equal(out23.numpy()[0], [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(outq.numpy()[0], [0, 0, 0, 1])
    np.testing.assert_array_equal(outt.numpy()[0], [1, 2, 3, 0, 0, 0, 1])
    np.testing.assert_allclose(consts.numpy(), [np.pi / 2, 0, 1, 1, 1, np.e], rtol=1e-6, atol=1e-6)
    assert wp.PI == np.pi and wp.HALF_PI == np.pi / 2 and wp.INF == np.inf and np.isnan(wp.NAN)


MAT32D = wp.types.matrix((3, 2), wp.float64)


@wp.kernel
def concrete_constructors_with_keywords(out: wp.array(dtype=float)):
    c = MAT32D(2.0)
    d = MAT32D(c, shape=(3, 2), dtype=wp.float64)
    e = wp.vec3(1.0, dtype=float)
    f = wp.vec3(2.0, 3.0, 4.0, length=3)
    q = wp.quatd(0.0, 0.0, 0.0, 1.0, dtype=wp.float64)
    out[0] = float(d[2, 1]) + e[1] + 10.0 * f[2] + float(q[3])


def test_concrete_constructors_take_their_own_keywords(tmp_path):
    """As in Warp 1.19, `mat32d(c, shape=(3, 2))`, `vec3(x, length=3)`, `quatd(..., dtype=wp.float64)` repeat the
    type's own shape/length/dtype as keywords; one that disagrees with the type is an error naming it."""
    out = wp.zeros(1)
    wp.launch(concrete_constructors_with_keywords, 1, inputs=[out])
    assert out.numpy()[0] == 44.0
    bad = {"shape": "wp.mat22(1.0, shape=(3, 3))", "dtype": "wp.vec2(1.0, dtype=wp.float64)",
           "length": "wp.vec2(1.0, length=3)", "keywords": "wp.vec2(1.0, shape=(2,))"}
    for name, call in bad.items():
        path = tmp_path / f"ctor_{name}.py"
        path.write_text(f"import loomwork as wp\n\n@wp.kernel\ndef k(x: wp.array(dtype=float)):\n    v = {call}\n")
        ns = {"__name__": f"ctor_{name}"}
        exec(compile(path.read_text(), str(path), "exec"), ns)
        with pytest.raises(wp.KernelError, match=f"(?s)ctor_{name}.py.*{name}"):
            wp.launch(ns["k"], 1, inputs=[out])


def test_wp_types_queries():
    """type_is_* ask about types, is_* about values; sizes, ctypes, names and equality like Warp's."""
    assert wpt.type_is_float(float) and wpt.type_is_int(int) and not wpt.type_is_int(bool)
    assert wpt.type_is_vector(wp.vec3) and wpt.type_is_vector(wp.spatial_vector) and not wpt.type_is_vector(wp.quat)
    assert wpt.type_is_quaternion(wp.quat) and wpt.type_is_transformation(wp.transform)
    assert wpt.type_is_matrix(wp.mat33) and wpt.type_is_composite(wp.quat) and not wpt.type_is_composite(float)
    assert wpt.type_is_value(wp.vec3) and wpt.type_is_value(float) and not wpt.type_is_value(wp.array)
    assert wpt.type_is_array(wp.array(dtype=float)) and wpt.type_is_array(wp.indexedarray(dtype=float))
    assert (wpt.type_size(wp.mat33), wpt.type_size(wp.transform), wpt.type_size(wp.float32)) == (9, 7, 1)
    assert wpt.type_size_in_bytes(wp.mat33d) == 72 and wpt.type_size_in_bytes(float) == 4
    assert wpt.type_ctype(float) is ctypes.c_float and wpt.type_ctype(wp.vec3) is wp.vec3
    assert [wpt.type_repr(t) for t in (float, wp.vec3, wp.types.matrix((2, 3), wp.float32), wp.quat)] == [
        "float", "vec3f", "mat23f", "quatf"]
    assert wpt.type_repr(wp.array2d(dtype=float)) == "array(ndim=2, dtype=float32)"
    assert wpt.types_equal(float, wp.float32) and wpt.types_equal(wp.vec3, wp.types.vector(3, wp.float32))
    assert not wpt.types_equal(wp.vec3, wp.vec3d)
    assert wpt.types_equal(wp.array(dtype=float), wp.array(dtype=wp.float32))
    assert not wpt.types_equal(wp.array(dtype=float), wp.array2d(dtype=float))
    assert wpt.is_float(1.0) and wpt.is_float(wp.float16(1)) and wpt.is_int(3) and not wpt.is_int(True)
    assert wpt.is_scalar(1.0) and not wpt.is_scalar(True) and wpt.is_value(True) and not wpt.is_value("a")
    assert wpt.is_vector(wp.vec3()) and not wpt.is_vector(wp.quat()) and wpt.is_quaternion(wp.quat())
    assert wpt.is_matrix(wp.mat22()) and wpt.is_composite(wp.transform()) and wpt.is_array(wp.zeros(1))
    assert not wpt.is_vector(wp.vec3) and not wpt.is_array(np.zeros(1))


@wp.kernel
def ranged_randu(seed: int, lo: wp.uint32, hi: wp.uint32, out: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    out[i] = wp.randu(state, lo, hi)


def test_randu_in_a_range():
    """randu(state, lo, hi) is uniform on [lo, hi) (bounds, mean, every value hit) and reproducible."""
    n = 100_000
    a, b = wp.zeros(n, dtype=wp.uint32), wp.zeros(n, dtype=wp.uint32)
    wp.launch(ranged_randu, n, inputs=[7, wp.uint32(10), wp.uint32(20), a])
    wp.launch(ranged_randu, n, inputs=[7, wp.uint32(10), wp.uint32(20), b])
    x = a.numpy()
    np.testing.assert_array_equal(x, b.numpy())
    assert x.min() == 10 and x.max() == 19 and len(np.unique(x)) == 10
    assert abs(x.mean() - 14.5) < 0.05


@wp.kernel
def curl4_divergence(xs: wp.array(dtype=wp.vec4), h: float, div: wp.array(dtype=float),
                     mag: wp.array(dtype=float), dt_change: wp.array(dtype=float)):
    i = wp.tid()
    x = xs[i]
    s = wp.uint32(5)
    c = wp.curlnoise(s, x, wp.uint32(2), 2.0, 0.5)
    dx = wp.curlnoise(s, x + wp.vec4(h, 0.0, 0.0, 0.0), wp.uint32(2), 2.0, 0.5) - wp.curlnoise(
        s, x - wp.vec4(h, 0.0, 0.0, 0.0), wp.uint32(2), 2.0, 0.5)
    dy = wp.curlnoise(s, x + wp.vec4(0.0, h, 0.0, 0.0), wp.uint32(2), 2.0, 0.5) - wp.curlnoise(
        s, x - wp.vec4(0.0, h, 0.0, 0.0), wp.uint32(2), 2.0, 0.5)
    dz = wp.curlnoise(s, x + wp.vec4(0.0, 0.0, h, 0.0), wp.uint32(2), 2.0, 0.5) - wp.curlnoise(
        s, x - wp.vec4(0.0, 0.0, h, 0.0), wp.uint32(2), 2.0, 0.5)
    div[i] = (dx[0] + dy[1] + dz[2]) / (2.0 * h)
    mag[i] = wp.length(c)
    dt_change[i] = wp.length(wp.curlnoise(s, x + wp.vec4(0.0, 0.0, 0.0, 0.5)) - wp.curlnoise(s, x))


def test_time_varying_curl_noise_is_divergence_free_in_space():
    """curlnoise of a vec4 (x, y, z, t) is a 3-D field, divergence-free in space and changing with t."""
    xs = wp.array(np.random.default_rng(0).uniform(-3, 3, (500, 4)).astype(np.float32), dtype=wp.vec4)
    div, mag, change = wp.zeros(500), wp.zeros(500), wp.zeros(500)
    wp.launch(curl4_divergence, 500, inputs=[xs, 2e-3, div, mag, change])
    assert np.abs(div.numpy()).max() < 1e-2 * mag.numpy().mean()
    assert mag.numpy().mean() > 0.1 and change.numpy().mean() > 0.1


@wp.kernel
def matrix_min_max(vals: wp.array(dtype=wp.mat22), lo: wp.array(dtype=wp.mat22), hi: wp.array(dtype=wp.mat22)):
    i = wp.tid()
    wp.atomic_min(lo, 0, vals[i])
    wp.atomic_max(hi, 0, vals[i])


def test_atomic_min_max_of_matrices():
    """atomic_min/atomic_max on matrix arrays work per component, like on vectors."""
    v = np.random.default_rng(1).standard_normal((1000, 2, 2)).astype(np.float32)
    lo = wp.array(np.full((1, 2, 2), np.inf, np.float32), dtype=wp.mat22)
    hi = wp.array(np.full((1, 2, 2), -np.inf, np.float32), dtype=wp.mat22)
    wp.launch(matrix_min_max, 1000, inputs=[wp.array(v, dtype=wp.mat22), lo, hi])
    np.testing.assert_array_equal(lo.numpy()[0], v.min(0))
    np.testing.assert_array_equal(hi.numpy()[0], v.max(0))


@wp.kernel
def quat_transform_ops(q: wp.array(dtype=wp.quat), t: wp.array(dtype=wp.transform), oq: wp.array(dtype=wp.quat),
                       ot: wp.array(dtype=wp.transform), flags: wp.array(dtype=int)):
    a, b = q[0], q[1]
    oq[0] = -a
    oq[1] = wp.abs(a)
    oq[2] = wp.min(a, b)
    oq[3] = wp.max(a, b)
    ot[0] = -t[0]
    ot[1] = wp.abs(t[0])
    ot[2] = wp.max(t[0], t[1])
    flags[0] = int(a == a)
    flags[1] = int(a != b)
    flags[2] = int(t[0] == t[1])


def test_quaternion_and_transform_operators():
    """Negation, abs, min, max and (in)equality of quaternions and transforms are componentwise."""
    rng = np.random.default_rng(2)
    q, t = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 7)).astype(np.float32)
    oq, ot, flags = wp.zeros(4, dtype=wp.quat), wp.zeros(3, dtype=wp.transform), wp.zeros(3, dtype=int)
    wp.launch(quat_transform_ops, 1, inputs=[wp.array(q, dtype=wp.quat), wp.array(t, dtype=wp.transform), oq, ot,
                                             flags])
    np.testing.assert_array_equal(oq.numpy(), [-q[0], np.abs(q[0]), np.minimum(q[0], q[1]), np.maximum(q[0], q[1])])
    np.testing.assert_array_equal(ot.numpy(), [-t[0], np.abs(t[0]), np.maximum(t[0], t[1])])
    np.testing.assert_array_equal(flags.numpy(), [1, 1, 0])


def _fill(a: wp.array(dtype=float)):
    a[wp.tid()] = 2.0 * float(wp.tid())


def test_kernel_objects_with_options_and_unique_modules():
    """wp.Kernel(func, key, options) and @wp.kernel(module="unique", module_options=...) as in Warp: the
    options hold, a unique module is the kernel's alone, so a broken kernel elsewhere does not stop it."""
    k = wp.Kernel(func=_fill, key="fill_no_backward", options={"enable_backward": False})
    assert k.options == {"enable_backward": False}
    a = wp.zeros(4, requires_grad=True)
    wp.launch(k, 4, inputs=[a])
    np.testing.assert_array_equal(a.numpy(), [0, 2, 4, 6])
    with pytest.raises(LaunchError, match="enable_backward=False"):
        wp.launch(k, 4, inputs=[a], adj_inputs=[a], adjoint=True)
    with pytest.raises(ValueError, match="only 'enable_backward'"):
        wp.Kernel(func=_fill, key="bad", options={"fast_math": True})

    def broken(a: wp.array(dtype=float)):
        a[0] = wp.no_such_builtin(1.0)

    good = wp.kernel(_fill, module="unique", module_options={"mode": "debug"})
    bad = wp.kernel(broken, module="unique")
    assert good.module is not bad.module and good.module.option("mode") == "debug"
    with pytest.raises(Exception, match="no_such_builtin"):
        wp.launch(bad, 1, inputs=[a])
    b = wp.zeros(3)
    wp.launch(good, 3, inputs=[b])
    wp.synchronize_device()
    np.testing.assert_array_equal(b.numpy(), [0, 2, 4])
    with pytest.raises(ValueError, match="unknown module option"):
        wp.kernel(_fill, module="unique", module_options={"no_such_option": 1})


def _atomic_max_kernel(dtype):
    @wp.kernel(module="unique")  # each in its own module: one rejected kernel does not break the others
    def atomic_max_of(a: wp.array(dtype=dtype)):
        wp.atomic_max(a, 0, a[1])

    return atomic_max_of


@pytest.mark.parametrize("dtype", [wp.float16, wp.vec3h, wp.int16])
def test_atomic_max_of_unsupported_types_is_a_clear_error(dtype):
    """Atomic min/max of float16 values (scalars or components) or of small integers is Warp's error (a TypeError
    and RuntimeError naming the types that work), not a C++ error."""
    with pytest.raises(RuntimeError, match=r"atomic_max\(\) operations only work on arrays with \[u\]int32, "
                       r"\[u\]int64, bfloat16, float32, or float64 as the underlying scalar types, but got"):
        wp.launch(_atomic_max_kernel(dtype), 1, inputs=[wp.zeros(2, dtype=dtype)])


@wp.kernel
def bfloat16_extremes(a: wp.array(dtype=wp.bfloat16), lo: wp.array(dtype=wp.bfloat16),
                      hi: wp.array(dtype=wp.bfloat16)):
    i = wp.tid()
    wp.atomic_min(lo, 0, a[i])
    wp.atomic_max(hi, 0, a[i])


def test_atomic_min_max_of_bfloat16():
    """Atomic min/max of bfloat16 values (Warp allows them, unlike float16) find the extremes."""
    values = np.array([0.5, -3.25, 7.0, 1.5, -0.125], dtype=np.float32)
    lo, hi = wp.full(1, 100.0, dtype=wp.bfloat16), wp.full(1, -100.0, dtype=wp.bfloat16)
    wp.launch(bfloat16_extremes, len(values), inputs=[wp.array(values, dtype=wp.bfloat16), lo, hi])
    assert (lo.list()[0], hi.list()[0]) == (-3.25, 7.0)


@wp.kernel
def warp_forms(a: wp.array(dtype=float), sorted_ints: wp.array(dtype=int), out: wp.array(dtype=float),
               iout: wp.array(dtype=int), mout: wp.array(dtype=wp.mat22)):
    m = wp.mat22(1.0, 2.0, 3.0, 4.0)
    mout[0] = wp.cw_mul(m, m)
    mout[1] = wp.cw_div(m, wp.mat22(2.0, 2.0, 2.0, 2.0))
    mout[2] = wp.lerp(m, wp.mat22(0.0), a[0])
    iout[0] = wp.bit_count(wp.int8(-1))
    iout[1] = wp.bit_count(wp.uint64(2**63 + 5))
    iout[2] = wp.lower_bound(sorted_ints, 5)
    iout[3] = wp.lower_bound(sorted_ints, 0, 2, 9)
    iout[4] = wp.lower_bound(sorted_ints, 100)
    v = wp.vec3ui(wp.uint32(1), wp.uint32(2), wp.uint32(12))
    w = (v << wp.vec3ui(wp.uint32(1))) | ~wp.vec3ui(wp.uint32(0xFFFFFFFF))
    iout[5] = int(w[2])
    o = wp.outer(wp.vec2i(1, 2), wp.vec3i(1, 2, 3))
    iout[6] = o[1, 2]
    c = 0
    for i in reversed(range(iout.shape[0] - 4)):  # 0..3 backwards
        c = c * 10 + i
    iout[7] = c
    out[0] = wp.copysign(a[0], -0.0)
    out[1] = wp.rint(2.5) + wp.rint(-1.5)
    if False < True:
        out[2] = 1.0
    wp.expect_neq(m, wp.cw_mul(m, m))
    wp.expect_eq(m, m)


def test_warp_builtin_forms():
    """Builtins and forms Warp programs use: matrix cw_mul/cw_div/lerp, bit_count, lower_bound (whole array and
    a range), integer-vector bit operators, outer of two lengths, reversed(range()), copysign, rint, bool order."""
    a = wp.array([0.25], dtype=float, requires_grad=True)
    ints = wp.array([1, 3, 5, 7, 9], dtype=int)
    out, iout, mout = wp.zeros(3, requires_grad=True), wp.zeros(8, dtype=int), wp.zeros(3, dtype=wp.mat22)
    tape = wp.Tape()
    with tape:
        wp.launch(warp_forms, 1, inputs=[a, ints, out, iout, mout])
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(mout.numpy(), [m * m, m / 2, m * 0.75])
    assert iout.numpy().tolist() == [8, 3, 2, 1, 4, 24, 6, 3210]  # none >= the value: the last index, as Warp's
    np.testing.assert_array_equal(out.numpy(), [-0.25, 0.0, 1.0])
    tape.backward(grads={out: wp.array([1.0, 0.0, 0.0])})
    assert a.grad.numpy()[0] == -1.0  # d copysign(x, -0) / dx
    assert wp.bit_count(wp.int64(-1)) == 64 and wp.bit_count(45) == 4


@wp.func
def generic_norm(v: wp.types.vector(length=typing.Any, dtype=wp.float32)):
    return wp.length(v)


@wp.func
def generic_trace(m: wp.types.matrix(shape=(typing.Any, typing.Any), dtype=typing.Any)):
    return wp.trace(m)


@wp.kernel
def generic_vector_params(out: wp.array(dtype=float), m: wp.types.matrix((typing.Any, 3), float)):
    out[0] = generic_norm(wp.vec3(1.0, 2.0, 2.0)) + generic_norm(wp.vec2(3.0, 4.0))
    out[1] = float(generic_trace(wp.mat33(1.0))) + m[0, 0]


def test_generic_vector_and_matrix_annotations():
    """`vector(length=Any, dtype=...)` and `matrix((Any, Any), dtype=...)` are generic annotations; an
    argument that does not fit is named."""
    out = wp.zeros(2)
    wp.launch(generic_vector_params, 1, inputs=[out, wp.types.matrix((2, 3), float)(2.0)])
    np.testing.assert_allclose(out.numpy(), [8.0, 5.0])
    with pytest.raises(TypeError, match="mat22f does not fit"):
        wp.launch(generic_vector_params, 1, inputs=[out, wp.mat22(1.0)])
    assert wp.types.vector(0, float)._length_ == 0
    with pytest.raises(ValueError, match="non-negative"):
        wp.types.vector(-1, float)


@wp.kernel
def overloaded_scale(x: typing.Any, out: wp.array(dtype=typing.Any)):
    out[0] = out.dtype(x) * out.dtype(2)


@wp.overload
def overloaded_scale(x: float, out: wp.array(dtype=float)):  # noqa: F811 - the form under test
    """Only the annotations matter."""


def test_overload_decorator_and_kernel_attributes():
    """`@wp.overload` on a body-less stub instantiates the generic kernel of that name (the name stays the generic
    kernel); `@wp.kernel(name=..., launch_bounds=...)` renames and validates; Warp's `module.options` mapping."""
    assert overloaded_scale.is_generic and len(overloaded_scale._overloads) == 1
    out = wp.zeros(1)
    wp.launch(overloaded_scale, 1, inputs=[1.5, out])
    assert out.numpy()[0] == 3.0
    def with_body(x: float, out: wp.array(dtype=float)):
        out[0] = x

    with_body.__qualname__ = "overloaded_scale"
    with pytest.raises(wp.KernelTypeError, match="body may only be"):
        wp.overload(with_body)

    k = wp.kernel(_fill, name="renamed_fill", launch_bounds=(256, 1), module="unique")
    assert k.key == "renamed_fill"
    with pytest.raises(ValueError, match="launch_bounds"):
        wp.kernel(_fill, launch_bounds=(0,))
    with pytest.raises(ValueError, match="C\\+\\+ identifier"):
        wp.kernel(_fill, name="not valid")
    with pytest.raises(ValueError, match="must be 'warp' or 'external_constant_params'"):
        wp.kernel(_fill, entry_point_abi="external", enable_backward=False)
    assert k.module.options["enable_backward"] == wp.config.enable_backward
    assert wp.array[float, typing.Literal[2]].ndim == 2 and wp.indexedarray[wp.vec3, 3].ndim == 3


def test_a_rejected_kernel_fails_only_its_own_launches():
    """The front end's error in one kernel of a module is raised when that kernel launches (and by an explicit
    wp.load_module); the module's other kernels build and run."""
    def reads_unassigned(flag: bool, out: wp.array(dtype=int)):
        if flag:
            x = 1
        out[0] = x

    def fine(out: wp.array(dtype=int)):
        out[0] = 7

    mod = f"{__name__}.partly_bad"
    bad, good = wp.kernel(reads_unassigned, module=mod), wp.kernel(fine, module=mod)
    out = wp.zeros(1, dtype=int)
    wp.launch(good, 1, inputs=[out])
    assert out.numpy()[0] == 7
    with pytest.raises(KernelNameError, match="may be read here before it is assigned"):
        wp.launch(bad, 1, inputs=[True, out])
    with pytest.raises(KernelNameError):
        wp.load_module(mod)


@wp.kernel
def starred_arguments(arr: wp.array(dtype=int), out: wp.array(dtype=float)):
    v1 = wp.vec3i(*arr[:3])
    v2 = wp.vec2i(*arr[0:4:2])
    v = wp.vec3(1.0, 2.0, 3.0)
    v4 = wp.vec4(1.0, *v[1:], 4.0)
    m = wp.matrix_from_rows(*wp.mat22(1.0, 2.0, 3.0, 4.0))
    q = wp.quat(1.0, 2.0, 3.0, 4.0)
    out[0] = float(v1[2] + v2[1] + wp.max(*arr[:2]))
    out[1] = v4[1] + m[1, 1] + wp.vec2(*q[-2:])[0]


def test_starred_arguments():
    """`f(*v)` passes a vector's, quaternion's or slice's components and a matrix's rows; array slices need
    constant, non-negative bounds with a stop; other values are named."""
    out = wp.zeros(2)
    wp.launch(starred_arguments, 1, inputs=[wp.array([1, 2, 3, 4, 5], dtype=int), out])
    assert out.numpy().tolist() == [8.0, 9.0]

    def no_stop(arr: wp.array(dtype=int)):
        wp.vec3i(*arr[0:])

    def bounds_not_constant(arr: wp.array(dtype=int), n: int):
        wp.vec3i(*arr[:n])

    def not_unpackable(arr: wp.array(dtype=int)):
        wp.vec3i(*arr[0])

    for body, err, match in ((no_stop, ValueError, "explicit upper bound"),
                             (bounds_not_constant, ValueError, "compile-time constant"),
                             (not_unpackable, TypeError, "only supported for")):
        k = wp.kernel(body, module="unique")
        with pytest.raises(err, match=match):
            wp.launch(k, 1, inputs=[wp.zeros(4, dtype=int)] + ([3] if body is bounds_not_constant else []))


def test_expectations_in_python_scope(capsys):
    """wp.expect_eq / expect_neq / expect_near also run in Python scope (a @wp.func called by Python): a failed
    one prints, as in kernels, and raises nothing."""
    wp.expect_eq(wp.vec2(1.0, 2.0), wp.vec2(1.0, 2.0))
    wp.expect_near(1.0, 1.0 + 1e-8)
    assert capsys.readouterr().out == ""
    wp.expect_eq(1, 2)
    wp.expect_neq(3, 3)
    out = capsys.readouterr().out
    assert "expect_eq failed: 1 != 2" in out and "expect_neq failed: 3 == 3" in out


@wp.kernel
def slice_assignments(x: wp.array(dtype=wp.vec2), out: wp.array(dtype=wp.mat33), vout: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    z = wp.mat33(0.0)
    z[0, :2] = x[i]
    z[1:, 2] = x[i] * 2.0
    z[2, 0:2] += x[i]
    out[i] = z
    v = wp.vec4(1.0, 2.0, 3.0, 4.0)
    v[1:3] = x[i]
    v[::3] = 7.0
    vout[i] = v


def test_assignment_through_slices():
    """Slices of local vectors and matrices are assignable (`m[0, :2] = w`, `v[::3] = s`, `m[2, 0:2] += w`),
    differentiably."""
    x = wp.array([[1.0, 2.0]], dtype=wp.vec2, requires_grad=True)
    out, vout = wp.zeros(1, dtype=wp.mat33, requires_grad=True), wp.zeros(1, dtype=wp.vec4, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(slice_assignments, 1, inputs=[x, out, vout])
    np.testing.assert_array_equal(out.numpy()[0], [[1, 2, 0], [0, 0, 2], [1, 2, 4]])
    np.testing.assert_array_equal(vout.numpy()[0], [7, 1, 2, 7])
    tape.backward(grads={out: np.ones((1, 3, 3), dtype=np.float32), vout: np.ones((1, 4), dtype=np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), [[5.0, 5.0]])


@wp.func
def filled_local() -> wp.fixedarray(shape=(2, 3), dtype=int):
    arr = wp.zeros(shape=(2, 3), dtype=int)
    for i in range(arr.shape[0]):
        for j in range(arr.shape[1]):
            arr[i][j] = i * arr.shape[1] + j
    return arr


@wp.kernel
def use_fixedarray(out: wp.array(dtype=int)):
    arr = filled_local()
    out[0] = arr[1][2] + arr.shape[2]
    row = arr[1]
    out[1] = row.shape[0] * 10 + row.shape[1]


def test_fixedarray_annotations_and_local_array_shapes():
    """`wp.fixedarray(shape, dtype)` names a local array type (a function's return annotation); a local array's
    `.shape` lists its extents then zeros, as in Warp."""
    out = wp.zeros(2, dtype=int)
    wp.launch(use_fixedarray, 1, inputs=[out])
    assert out.numpy().tolist() == [5, 30]
    with pytest.raises(TypeError, match="need a shape"):
        arg_type(wp.fixedarray(dtype=int))


@wp.func
def doubled(a: float):
    return a * 2.0


HANDLERS = {"double": doubled}


@wp.kernel
def functions_bound_to_locals(out: wp.array(dtype=float), vs: wp.array(dtype=wp.vec3), qs: wp.array(dtype=wp.quat)):
    f = doubled
    out[0] = f(3.0)
    g = wp.static(HANDLERS["double"])
    out[1] = g(4.0)
    h = wp.sin
    out[2] = h(0.0)
    t = wp.transformation(p=vs[0], q=qs[0])
    out[3] = t[6] + wp.transform(p=vs[0], q=qs[0])[0]


def test_functions_bound_to_locals_and_transform_keywords():
    """A @wp.func or builtin assigned to a local is called through it; transforms take p= and q=; a variable
    cannot be rebound to a function (or back)."""
    out = wp.zeros(4)
    wp.launch(functions_bound_to_locals, 1, inputs=[out, wp.array([wp.vec3(2.0, 3.0, 4.0)], dtype=wp.vec3),
                                                   wp.array([wp.quat(5.0, 6.0, 7.0, 8.0)], dtype=wp.quat)])
    assert out.numpy().tolist() == [6.0, 8.0, 0.0, 10.0]

    def rebinds(out: wp.array(dtype=float)):
        f = doubled
        f = 1.0
        out[0] = f

    with pytest.raises(wp.KernelTypeError, match="names a function"):
        wp.launch(wp.kernel(rebinds, module="unique"), 1, inputs=[wp.zeros(1)])


@wp.kernel
def reversed_dynamic_step(a: wp.array(dtype=int), lo: int, hi: int, step: int):
    c = 0
    for i in reversed(range(lo, hi, step)):
        a[c] = i
        c += 1


@pytest.mark.parametrize("lo,hi,step", [(0, 10, 3), (10, 0, -3), (0, 0, 2), (5, 1, 1)])
def test_reversed_range_with_a_runtime_step(lo, hi, step):
    """reversed(range(lo, hi, step)) visits Python's values when the step is only known at run time."""
    a = wp.full(6, -1, dtype=int)
    wp.launch(reversed_dynamic_step, 1, inputs=[a, lo, hi, step])
    want = list(reversed(range(lo, hi, step)))
    assert a.numpy().tolist() == want + [-1] * (6 - len(want))


@wp.kernel
def builtins_by_bare_name_and_quat_checks(out: wp.array(dtype=bool), h: wp.array(dtype=wp.float16)):
    q = wp.quat(1.0, 2.0, 3.0, 4.0)
    out[0] = wp.isinf(q) or wp.isnan(q) or not wp.isfinite(q)
    h[0] = wp.smoothstep(wp.float16(0.0), wp.float16(1.0), wp.float16(0.25))
    expect_eq(1.0, 1.0)  # noqa: F821 - a builtin's bare name resolves in kernels, as in Warp


def test_builtins_by_bare_name_quaternion_checks_and_half_smoothstep():
    """A kernel may name a builtin without `wp.`; isnan/isinf/isfinite take quaternions; smoothstep of float16."""
    out, h = wp.zeros(1, dtype=bool), wp.zeros(1, dtype=wp.float16)
    wp.launch(builtins_by_bare_name_and_quat_checks, 1, inputs=[out, h])
    assert not out.numpy()[0] and h.numpy()[0] == np.float16(0.15625)


@wp.kernel
def mixed_comparisons(a: wp.array(dtype=float), n: int, big: wp.uint8, out: wp.array(dtype=int)):
    f = a[0]
    if f < n:
        out[0] = 1
    if n >= f:
        out[1] = 1
    if wp.float64(f) > wp.float32(1.0) and n > big:
        out[2] = 1


def test_comparisons_of_mixed_scalar_types():
    """A float and an int (or two ints, or two floats, of different types) compare by value, as in Warp."""
    out = wp.zeros(3, dtype=int)
    wp.launch(mixed_comparisons, 1, inputs=[wp.array([1.5], dtype=float), 2, wp.uint8(1), out])
    assert out.numpy().tolist() == [1, 1, 1]


@wp.func
def tuple_sum_mixed(t: tuple[int, float]) -> float:
    return float(t[0]) + t[1]


@wp.func
def tuple_sum_floats(t: tuple[float, ...]) -> float:
    return t[0] + t[1] + t[2]


@wp.kernel
def tuples_quat_parts_and_array_truth(out: wp.array(dtype=float), q: wp.array(dtype=wp.quat),
                                      maybe: wp.array(dtype=float)):
    out[0] = tuple_sum_mixed((3, 0.5))
    out[1] = tuple_sum_floats((1.0, 2.0, 4.0))
    q[0] = wp.quat(wp.vec3(1.0, 2.0, 3.0), 4.0)
    if maybe:
        out[2] = 1.0
    else:
        out[2] = -1.0


def test_tuple_annotations_quat_from_parts_and_array_truth():
    """tuple[...] annotations take tuples of those types; wp.quat(v, w) puts v in xyz and w last; an array
    is true in a condition unless it is null (None passed)."""
    out, q = wp.zeros(3, dtype=float), wp.zeros(1, dtype=wp.quat)
    wp.launch(tuples_quat_parts_and_array_truth, 1, inputs=[out, q, None])
    np.testing.assert_array_equal(out.numpy(), [3.5, 7.0, -1.0])
    np.testing.assert_array_equal(q.numpy()[0], [1, 2, 3, 4])
    wp.launch(tuples_quat_parts_and_array_truth, 1, inputs=[out, q, out])
    assert out.numpy()[2] == 1.0


def test_tuple_annotation_refuses_other_element_types():
    """A tuple of the wrong element types does not match a tuple[int, float] parameter."""

    @wp.kernel
    def wrong(out: wp.array(dtype=float)):
        out[0] = tuple_sum_mixed((1.5, 2.5))

    with pytest.raises(TypeError, match="tuple_sum_mixed"):
        wp.launch(wrong, 1, inputs=[wp.zeros(1)])


@wp.struct
class AddressPair:
    a: float
    b: float


@wp.kernel
def arrays_at_addresses(src: wp.array2d(dtype=float), pairs: wp.array(dtype=AddressPair), ptr: wp.uint64, n: int,
                        m: int, out: wp.array(dtype=int)):
    grid = wp.array(ptr=src.ptr, shape=(2, 3), dtype=float)
    grid[0, 2] = 3.0
    grid[1, 1] = grid[0, 2] + 1.0
    p = wp.array(ptr=pairs.ptr, shape=(2,), dtype=AddressPair)
    p[1].b = 5.0
    v = wp.array(ptr=ptr, shape=(n, m), dtype=wp.vec2)
    v[n - 1, m - 1] = wp.vec2(7.0, 8.0)
    out[0] = v.shape[0] * 10 + v.shape[1]
    out[1] = int(src.ptr == grid.ptr)


def test_arrays_over_addresses_in_kernels(tmp_path):
    """As in Warp 1.19: wp.array(ptr=..., shape=..., dtype=...) in a kernel is a contiguous array over the memory
    at that address (another array's `.ptr`, or a uint64 argument), with run-time extents; scalar, struct and
    vector dtypes. Positional or missing keywords are errors naming the line."""
    src, pairs = wp.zeros((2, 3), dtype=float), wp.zeros(2, dtype=AddressPair)
    vecs, out = wp.zeros(12, dtype=wp.vec2), wp.zeros(2, dtype=int)
    wp.launch(arrays_at_addresses, 1, inputs=[src, pairs, vecs.ptr, 3, 4, out])
    np.testing.assert_array_equal(src.numpy(), [[0, 0, 3], [0, 4, 0]])
    assert pairs.numpy()[1]["b"] == 5.0 and pairs.numpy()[0]["b"] == 0.0
    np.testing.assert_array_equal(vecs.numpy()[11], [7, 8])
    assert out.numpy().tolist() == [34, 1]
    path = tmp_path / "ptr_bad.py"
    path.write_text("import loomwork as wp\n\n@wp.kernel\ndef k(x: wp.array(dtype=float)):\n"
                    "    a = wp.array(x.ptr, shape=(2,), dtype=float)\n")
    ns = {"__name__": "ptr_bad"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    with pytest.raises(wp.KernelError, match="(?s)ptr_bad.py:5.*takes the keywords ptr, shape and dtype"):
        wp.launch(ns["k"], 1, inputs=[out])


class Shade(enum.IntEnum):
    LIGHT = 1
    DARK = 2


class Bits(enum.IntFlag):
    HIGH = 4


@wp.kernel
def enum_members(out: wp.array(dtype=int)):
    out[0] = Shade.DARK + 10 * int(Shade.LIGHT.value) + 100 * int(Bits.HIGH.value)


def test_enum_members_and_their_values_in_kernels():
    """IntEnum/IntFlag members are integer constants in kernels, and `Member.value` reads the same value, as in
    Warp 1.19."""
    out = wp.zeros(1, dtype=int)
    wp.launch(enum_members, 1, inputs=[out])
    assert out.numpy()[0] == 2 + 10 + 400


@wp.kernel
def wp_float_and_int(h: wp.array(dtype=wp.float16), out: wp.array(dtype=float)):
    out[0] = wp.float(h[0]) * 2.0
    out[1] = float(wp.int(3.7))


def test_wp_float_and_wp_int_in_kernels_are_the_casts():
    """Inside kernels, wp.float(x) and wp.int(x) are float(x) and int(x), as Warp 1.19 resolves them (the
    module has no such attributes in Python)."""
    out = wp.zeros(2, dtype=float)
    wp.launch(wp_float_and_int, 1, inputs=[wp.full(1, 1.5, dtype=wp.float16), out])
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])
    assert not hasattr(wp, "float")
