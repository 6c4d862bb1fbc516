"""More of the forms Warp programs use (issue 14), each against an oracle: builtins on vectors and 16-bit
matrices, transform parts, static lengths and constants, atomics, host-side operators of values, generic
parameters."""

from typing import Any

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def vector_signs(v: wp.array(dtype=wp.vec3), iv: wp.array(dtype=wp.vec2i), out: wp.array(dtype=wp.vec3),
                 iout: wp.array(dtype=wp.vec2i)):
    i = wp.tid()
    out[i] = wp.sign(v[i])
    iout[i] = wp.sign(iv[i])


def test_sign_of_vectors_is_componentwise():
    """wp.sign of a float or int vector is the sign of each component (-1 below zero, else 1), in kernels and
    in Python scope."""
    v = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, -7.0]], dtype=np.float32)
    iv = np.array([[-3, 0], [5, -1]], dtype=np.int32)
    out, iout = wp.zeros(2, dtype=wp.vec3), wp.zeros(2, dtype=wp.vec2i)
    wp.launch(vector_signs, 2, inputs=[wp.array(v, dtype=wp.vec3), wp.array(iv, dtype=wp.vec2i), out, iout])
    np.testing.assert_array_equal(out.numpy(), np.where(v < 0, -1.0, 1.0))
    np.testing.assert_array_equal(iout.numpy(), np.where(iv < 0, -1, 1))
    assert list(wp.sign(wp.vec3(-2.0, 0.0, 4.0))) == [-1.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", [wp.float32, wp.float16, wp.int8, wp.uint32])
def test_host_vector_remainder(dtype):
    """Host-side v % w is componentwise with the dividend's sign (C's fmod, as in kernels); % 0 gives 0."""
    vec = wp.types.vector(3, dtype)
    a = [7, 5, 6] if dtype is wp.uint32 else [-7, 5, 6]
    got = vec(*a) % vec(3, 2, 0)
    want = [np.fmod(a[0], 3), 1, 0]
    assert list(got) == want and type(got) is vec


@wp.kernel
def transform_parts(x: wp.array(dtype=wp.vec3), y: wp.array(dtype=wp.quat), z: wp.array(dtype=wp.transform),
                    w: wp.array(dtype=wp.transform)):
    i = wp.tid()
    t = wp.transform_identity()
    t.p = x[i]
    t.q = y[i]
    t.p += x[i]
    z[i] = t
    s = wp.transform_identity()
    wp.transform_set_translation(s, x[i])
    wp.transform_set_rotation(s, y[i])
    w[i] = s
    w[i].p += x[i]


def test_transform_parts_are_assignable():
    """`t.p = v`, `t.q = q`, `t.p += v` and wp.transform_set_translation/rotation set a transform's parts in
    kernels (an array element's part atomically with +=) and in Python scope, with gradients."""
    xs = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], dtype=np.float32)
    qs = np.array([[0.0, 0.0, 0.6, 0.8], [0.0, 1.0, 0.0, 0.0]], dtype=np.float32)
    x = wp.array(xs, dtype=wp.vec3, requires_grad=True)
    y = wp.array(qs, dtype=wp.quat, requires_grad=True)
    z, w = wp.zeros(2, dtype=wp.transform, requires_grad=True), wp.zeros(2, dtype=wp.transform, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(transform_parts, 2, inputs=[x, y, z, w])
    want = np.concatenate([2 * xs, qs], axis=1)
    np.testing.assert_array_equal(z.numpy(), want)
    np.testing.assert_array_equal(w.numpy(), want)
    tape.backward(grads={z: np.ones((2, 7), np.float32), w: np.ones((2, 7), np.float32)})
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 4.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((2, 4), 2.0))
    t = wp.transform()
    wp.transform_set_translation(t, wp.vec3(1.0, 2.0, 3.0))
    wp.transform_set_rotation(t, wp.quat(0.0, 0.0, 0.6, 0.8))
    assert list(t) == [1.0, 2.0, 3.0, 0.0, 0.0, np.float32(0.6), np.float32(0.8)]


@wp.kernel
def static_lengths(v: wp.vec3, m: wp.types.matrix((2, 4), float), out: wp.array(dtype=int)):
    q = wp.quat_identity()
    out[0] = wp.static(len(v))
    out[1] = wp.static(len(m) * 10)
    out[2] = wp.static(len(q))
    for i in wp.static(range(len(v))):
        out[3] += i


def test_static_len_of_kernel_variables():
    """wp.static(len(x)) of a vector, matrix or quaternion variable is its length (a matrix's rows), known when
    the kernel compiles (also as a wp.static loop bound)."""
    out = wp.zeros(4, dtype=int)
    wp.launch(static_lengths, 1, inputs=[wp.vec3(), wp.types.matrix((2, 4), float)(), out])
    np.testing.assert_array_equal(out.numpy(), [3, 20, 4, 3])


@wp.kernel
def componentwise_extremes(v: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat22), lo: wp.array(dtype=wp.vec3),
                           hi: wp.array(dtype=wp.mat22)):
    i = wp.tid()
    wp.atomic_min(lo, 0, v[i])
    wp.atomic_max(hi, 0, m[i])


def test_atomic_min_max_gradients_of_vectors_and_matrices_are_componentwise():
    """The gradient of atomic_min/max into a vector or matrix element goes, component by component, to the
    value that won that component."""
    rng = np.random.default_rng(3)
    vs, ms = rng.uniform(-1, 1, (50, 3)).astype(np.float32), rng.uniform(-1, 1, (50, 2, 2)).astype(np.float32)
    v, m = wp.array(vs, dtype=wp.vec3, requires_grad=True), wp.array(ms, dtype=wp.mat22, requires_grad=True)
    lo = wp.full(1, wp.vec3(10.0), dtype=wp.vec3, requires_grad=True)
    hi = wp.full(1, wp.mat22(-10.0), dtype=wp.mat22, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(componentwise_extremes, 50, inputs=[v, m, lo, hi])
    np.testing.assert_array_equal(lo.numpy()[0], vs.min(axis=0))
    tape.backward(grads={lo: np.ones((1, 3), np.float32), hi: np.ones((1, 2, 2), np.float32)})
    want_v = np.zeros_like(vs)
    want_v[vs.argmin(axis=0), np.arange(3)] = 1.0
    want_m = np.zeros_like(ms).reshape(50, 4)
    want_m[ms.reshape(50, 4).argmax(axis=0), np.arange(4)] = 1.0
    np.testing.assert_array_equal(v.grad.numpy(), want_v)
    np.testing.assert_array_equal(m.grad.numpy(), want_m.reshape(50, 2, 2))


@wp.kernel
def scatter_bits(bits: wp.array(dtype=int), ors: wp.array(dtype=wp.uint32), xors: wp.array(dtype=wp.uint32),
                 ands: wp.array(dtype=wp.uint32), vwords: wp.array(dtype=wp.vec2ui)):
    i = wp.tid()
    bit = wp.uint32(1) << wp.uint32(i % 32)
    if bits[i] != 0:
        ors[i // 32] |= bit
        xors[i // 32] ^= bit
        wp.atomic_or(vwords, i // 32, wp.vec2ui(bit, wp.uint32(0)))
    else:
        ands[i // 32] &= ~bit
        vwords[i // 32] ^= wp.vec2ui(wp.uint32(0), bit)


def test_augmented_bit_operators_on_array_elements_are_atomic():
    """`a[i] |= v`, `^=`, `&=` on 32/64-bit integer elements (scalars or vectors) and wp.atomic_or/and/xor of
    integer vectors are atomic: the 32 threads sharing a word never lose each other's bits."""
    n = 1 << 16
    bits = np.random.default_rng(5).integers(0, 2, n).astype(np.int32)
    packed = np.packbits(bits.astype(np.uint8), bitorder="little").view(np.uint32)
    ors, xors = wp.zeros(n // 32, dtype=wp.uint32), wp.zeros(n // 32, dtype=wp.uint32)
    ands = wp.full(n // 32, 0xFFFFFFFF, dtype=wp.uint32)
    vwords = wp.zeros(n // 32, dtype=wp.vec2ui)
    wp.launch(scatter_bits, n, inputs=[wp.array(bits), ors, xors, ands, vwords])
    for got in (ors, xors, ands):
        np.testing.assert_array_equal(got.numpy(), packed)
    np.testing.assert_array_equal(vwords.numpy()[:, 0], packed)
    np.testing.assert_array_equal(vwords.numpy()[:, 1], ~packed)


@wp.kernel
def vector_extremes(v: wp.array(dtype=wp.vec3), lo: wp.array(dtype=float), hi: wp.array(dtype=float)):
    i = wp.tid()
    lo[i] = wp.min(v[i])
    hi[i] = wp.max(v[i])


def test_vector_min_max_skip_nan_components():
    """wp.min(v)/wp.max(v) fold like the scalar min/max (C's fmin/fmax): a NaN component gives way to any
    number wherever it sits, and the gradient goes to the component chosen; NaN only when all are NaN."""
    nan = np.nan
    vs = np.array([[nan, -1.0, 2.0], [3.0, nan, -4.0], [nan, nan, nan], [1.0, 5.0, nan]], dtype=np.float32)
    v = wp.array(vs, dtype=wp.vec3, requires_grad=True)
    lo, hi = wp.zeros(4, requires_grad=True), wp.zeros(4, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(vector_extremes, 4, inputs=[v, lo, hi])
    np.testing.assert_array_equal(lo.numpy(), [-1.0, -4.0, nan, 1.0])
    np.testing.assert_array_equal(hi.numpy(), [2.0, 3.0, nan, 5.0])
    tape.backward(grads={lo: np.ones(4, np.float32), hi: np.ones(4, np.float32)})
    np.testing.assert_array_equal(v.grad.numpy(), [[0, 1, 1], [1, 0, 1], [2, 0, 0], [1, 1, 0]])
    assert wp.min(wp.vec3(nan, -1.0, 2.0)) == -1.0 and wp.max(1.0, nan) == 1.0


@wp.kernel
def bare_type_names(out: wp.array(dtype=wp.mat22), q: wp.array(dtype=wp.quat)):
    out[0] = mat22(1.0, 2.0, 3.0, 4.0) * 2.0  # noqa: F821 - resolved as Warp resolves builtins' bare names
    q[0] = quat(0.0, 0.0, 0.0, 1.0)  # noqa: F821


def test_bare_vector_and_matrix_type_names_in_kernels():
    """Inside kernels, `mat22(...)`, `quat(...)` and the other vector/matrix type names construct values by their
    bare names (Warp treats its constructors as builtins), when nothing in scope has that name."""
    out, q = wp.zeros(1, dtype=wp.mat22), wp.zeros(1, dtype=wp.quat)
    wp.launch(bare_type_names, 1, inputs=[out, q])
    np.testing.assert_array_equal(out.numpy()[0], [[2.0, 4.0], [6.0, 8.0]])
    np.testing.assert_array_equal(q.numpy()[0], [0.0, 0.0, 0.0, 1.0])


def _three() -> int:
    return 3


@wp.kernel
def static_constant_locals(out: wp.array(dtype=int), flag: int):
    c = 4
    out[0] = wp.static(_three() * c)
    c = 5
    out[1] = wp.static(c + 1)
    if flag > 0:
        c = 7
    out[2] = c


def test_static_reads_constant_locals():
    """wp.static() may read a local assigned a literal (outside branches and loops) before it: its current
    value, as Warp's constant locals."""
    out = wp.zeros(3, dtype=int)
    wp.launch(static_constant_locals, 1, inputs=[out, 1])
    np.testing.assert_array_equal(out.numpy(), [12, 6, 7])


def test_fill_matrix_arrays_from_flat_or_nested_values():
    """fill_ of an array of matrices takes the matrix as a value, nested rows, its values flat (row-major), or one
    scalar for every component."""
    a = wp.zeros((2, 3), dtype=wp.mat22)
    for value in (np.arange(4.0), [0.0, 1.0, 2.0, 3.0], [[0.0, 1.0], [2.0, 3.0]], wp.mat22(0.0, 1.0, 2.0, 3.0)):
        a.zero_()
        a.fill_(value)
        np.testing.assert_array_equal(a.numpy(), np.broadcast_to(np.arange(4.0).reshape(2, 2), (2, 3, 2, 2)))
    np.testing.assert_array_equal(a.fill_(2.0).numpy(), np.full((2, 3, 2, 2), 2.0))


def test_empty_list_makes_an_empty_array_of_any_dtype():
    """wp.array([], dtype=...) is an empty 1-D array for vector and matrix dtypes too."""
    for dtype in (wp.vec2b, wp.mat22, wp.float32):
        a = wp.array([], dtype=dtype)
        assert a.shape == (0,) and a.size == 0 and a.numpy().shape == (0, *getattr(dtype, "_shape_", ()))


def test_bit_count_in_python_scope_uses_the_value_width():
    """wp.bit_count in Python scope counts bits in the value's own width: int8(-1) has 8, a Python int is an
    int32 when it fits (-1 has 32), a float or vector is refused with Warp's no-overload error (a TypeError and
    a RuntimeError)."""
    assert wp.bit_count(wp.int8(-1)) == 8 and wp.bit_count(wp.uint16(0xFFFF)) == 16
    assert wp.bit_count(wp.int64(-2)) == 63 and wp.bit_count(-1) == 32 and wp.bit_count(45) == 4
    assert wp.bit_count(np.int16(-1)) == 16
    for bad in (wp.float32(1.0), wp.bool(True), wp.vec2i(1, 2)):
        with pytest.raises(TypeError, match="Couldn't find a function 'bit_count'") as e:
            wp.bit_count(bad)
        assert isinstance(e.value, RuntimeError)


@wp.kernel
def overwrite_through_slices(x: wp.array(dtype=wp.vec2), y: wp.array(dtype=wp.types.matrix((2, 3), float)),
                             z: wp.array(dtype=wp.mat44)):
    i = wp.tid()
    m = z[i]
    m[0, :2] = x[i]
    m[:2, 1:] = y[i]  # overwrites m[0, 1]: x[i][1] no longer reaches the output through it
    m[:2, 3] += x[i][:2]
    m[2:, 3] -= x[i][0:]
    z[i] = m


def test_gradient_through_overwritten_slices():
    """A component written through a slice and then overwritten by another slice assignment contributes no
    gradient (Warp 1.19 gives x[1] a gradient of 1 here, which finite differences refute)."""
    x = wp.ones(1, dtype=wp.vec2, requires_grad=True)
    y = wp.ones(1, dtype=wp.types.matrix((2, 3), float), requires_grad=True)
    z = wp.zeros(1, dtype=wp.mat44, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(overwrite_through_slices, 1, inputs=[x, y, z])
    tape.backward(grads={z: np.ones((1, 4, 4), np.float32)})
    # d sum(z) / dx: x0 via m[0,0], m[0,3] and -m[2,3]; x1 via m[1,3] and -m[3,3] (its m[0,1] was overwritten)
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 0.0]])
    np.testing.assert_array_equal(y.grad.numpy(), np.ones((1, 2, 3)))


@wp.struct
class Pair:
    a: float
    b: wp.vec2


@wp.kernel
def generic_any(x: Any, s: Any, out: Any):
    i = wp.tid()
    out[i] = x[i] * s.a + s.b[1]


def test_any_parameters_take_arrays_and_structs():
    """A kernel parameter annotated Any is instantiated for the array or struct it is launched with."""
    s = Pair()
    s.a, s.b = 2.0, wp.vec2(0.0, 0.5)
    out = wp.zeros(3)
    wp.launch(generic_any, 3, inputs=[wp.array(np.arange(3, dtype=np.float32)), s, out])
    np.testing.assert_array_equal(out.numpy(), [0.5, 2.5, 4.5])


@wp.func
def _bump(x: int):
    return x + 1


@wp.func
def _bump(x: float):  # noqa: F811 - an overload
    return x + 0.5


@wp.func
def _bump(x: wp.vec3):  # noqa: F811
    return x + wp.vec3(1.0, 0.0, 0.0)


@wp.func
def _halve64(x: wp.float64):
    return x / wp.float64(2.0)


def test_python_calls_pick_the_overload_by_argument_type():
    """From Python, an overloaded @wp.func runs the overload the arguments' types select (int, float, vec3);
    a call no overload takes (a Python float for float64, a number for a vector) raises Warp's RuntimeError."""
    assert _bump(1) == 2 and _bump(1.0) == 1.5
    assert _bump(wp.vec3(1.0, 2.0, 3.0)) == wp.vec3(2.0, 2.0, 3.0)
    assert _halve64(wp.float64(3.0)) == 1.5
    with pytest.raises(RuntimeError, match=r"^Error calling function '_halve64', no overload found for arguments"):
        _halve64(1.0)
    with pytest.raises(RuntimeError, match="no overload found"):
        _bump("text")


def test_matrices_print_row_by_row():
    """str() of a matrix is Warp's: one row a line."""
    assert str(wp.mat22(1.0, 2.0, 3.0, 4.0)) == "[[1.0, 2.0],\n [3.0, 4.0]]"


def test_float_scalars_compare_with_python_ints_as_floats():
    """A float scalar compared with a Python int takes it as a float, as Warp does: one beyond the float range
    raises OverflowError rather than comparing exactly; ints and in-range values compare as before."""
    for t in (wp.float16, wp.float32, wp.float64):
        with pytest.raises(OverflowError):
            _ = t(1.0) < 2**1024
        with pytest.raises(OverflowError):
            _ = t(1.0) == 2**1024
        assert t(2.0) > 1 and t(1.0) == 1 and t(1.0) != 2
    assert wp.int8(1) < 2**80


def test_spatial_types_and_transform_constructor_forms():
    """The spatial types carry Warp's names; a transform is built from p and q (positional or keywords), one
    scalar, or 7 components, and anything else is a TypeError naming the argument, in Python and in kernels."""
    assert wp.spatial_vectorf.__name__ == "spatial_vectorf" and wp.spatial_matrixd.__name__ == "spatial_matrixd"
    assert list(wp.transformf((1.0, 2.0, 3.0))) == [1, 2, 3, 0, 0, 0, 1]
    assert list(wp.transformd(p=(1.0, 2.0, 3.0), q=(0.0, 0.0, 0.0, 1.0))) == [1, 2, 3, 0, 0, 0, 1]
    assert list(wp.transformh(True)) == [1.0] * 7
    for args, kw, words in (((1.5, 2.5), {}, "argument 'p'"), (((1.0, 2.0, 3.0), 1.0), {}, "argument 'q'"),
                            ((), {"q": 1.0}, "argument 'q'"), ((object(),), {}, "expected a scalar value"),
                            ((*range(7),), {"q": (0, 0, 0, 1)}, "multiple values for argument 'q'"),
                            ((*range(7),), {"pos": (0, 0, 0)}, "unexpected keyword argument 'pos'")):
        with pytest.raises(TypeError, match=words):
            wp.transformf(*args, **kw)
    with pytest.raises(wp.WarpCodegenError, match=r"given \(2\) when constructing a transform; expected 0, 1, or 7"):
        wp.launch(_two_scalar_transform, dim=1)


@wp.kernel
def _two_scalar_transform():
    wp.transform(1.0, 2.0)
