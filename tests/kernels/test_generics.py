"""Generic kernels and functions: Any / wp.Scalar / wp.Float / wp.Int parameters, array(dtype=Any),
instantiated at launch from the arguments or explicitly with wp.overload."""

from typing import Any

import numpy as np
import pytest

import loomwork as wp


@wp.func
def twice(x: wp.Float):
    return x + x


@wp.kernel
def scale(x: wp.array(dtype=Any), s: Any):
    i = wp.tid()
    x[i] = s * x[i]


@wp.kernel
def double_floats(x: wp.array(dtype=wp.Float), out: wp.array(dtype=wp.Float)):
    i = wp.tid()
    out[i] = twice(x[i])


@wp.kernel
def scaled_copy(x: wp.array(dtype=Any), s: Any, y: wp.array(dtype=Any)):
    i = wp.tid()
    y[i] = s * x[i]


@wp.kernel
def vec_norms(v: wp.array(dtype=Any), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = float(wp.length(v[i]))


def test_instantiation_from_arguments():
    """One generic kernel runs on float32, float64 and int32 data, each with its own instance."""
    for dtype, s in ((np.float32, 2.0), (np.float64, wp.float64(3.0)), (np.int32, 4)):
        x = wp.array(np.arange(5).astype(dtype))
        wp.launch(scale, 5, inputs=[x, s])
        np.testing.assert_array_equal(x.numpy(), np.arange(5) * float(s))
    assert len(scale._overloads) == 3


def test_constraints_and_generic_functions():
    """wp.Float accepts float16/32/64 and refuses ints; a generic @wp.func follows the argument type."""
    for dtype in (np.float16, np.float32, np.float64):
        x = wp.array(np.array([1.5, -2.0], dtype=dtype))
        out = wp.zeros(2, dtype=wp.dtype_from_numpy(dtype))
        wp.launch(double_floats, 2, inputs=[x, out])
        np.testing.assert_array_equal(out.numpy(), [3.0, -4.0])
    with pytest.raises(wp.LaunchError, match="does not fit"):
        wp.launch(double_floats, 2, inputs=[wp.zeros(2, dtype=int), wp.zeros(2, dtype=int)])


def test_explicit_overload_and_vector_arrays():
    """wp.overload with a list or a dict gives the concrete kernel; arrays of vectors instantiate too."""
    k = wp.overload(vec_norms, [wp.array(dtype=wp.vec3d), wp.array(dtype=float)])
    assert k is wp.overload(vec_norms, {"v": wp.array(dtype=wp.vec3d)})
    v = wp.array(np.array([[3.0, 4.0, 0.0]]), dtype=wp.vec3d)
    out = wp.zeros(1, dtype=float)
    wp.launch(k, 1, inputs=[v, out])
    assert out.numpy()[0] == 5.0
    wp.launch(vec_norms, 1, inputs=[wp.array(np.array([[0.0, 0.0, 2.0]], dtype=np.float32), dtype=wp.vec3), out])
    assert out.numpy()[0] == 2.0
    with pytest.raises(TypeError, match="no parameter"):
        wp.overload(vec_norms, {"w": wp.array(dtype=float)})


def test_generic_kernels_differentiate():
    """A generic kernel's instances get adjoints like any kernel."""
    x = wp.array(np.array([1.0, 2.0]), requires_grad=True)
    y = wp.zeros(2, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scaled_copy, 2, inputs=[x, wp.float64(3.0), y])
    tape.backward(grads={y: np.ones(2)})
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


@wp.kernel
def typed_copies(a: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    zero = type(a[0])(0)
    out[0] = type(a).dtype(a[0]) + zero + a.dtype(0)


def test_type_of_values_in_generic_kernels():
    """`type(x)` and `a.dtype` in a kernel are the compile-time types (construct and convert with them)."""
    for values, dtype in (([3], wp.int32), ([wp.vec3(1.0, 2.0, 3.0)], wp.vec3)):
        out = wp.zeros(1, dtype=dtype)
        wp.launch(typed_copies, 1, inputs=[wp.array(values, dtype=dtype), out])
        np.testing.assert_array_equal(out.numpy()[0], np.asarray(values[0]))


@wp.func
def _combine(a: float, b: float):
    return a * b


@wp.func
def _combine(a: Any, b: Any):  # noqa: F811 - a generic overload defined after the concrete one
    return a + b


@wp.func
def _combine(a: int, b: int):  # noqa: F811
    return a - b


@wp.kernel
def combine_all(out: wp.array(dtype=float), iout: wp.array(dtype=int)):
    out[0] = _combine(7.0, 10.0)
    iout[0] = _combine(17, 25)
    v = _combine(wp.vec2(1.0, 2.0), wp.vec2(10.0, 20.0))
    out[1] = v[1]


def test_concrete_overloads_win_over_generic_ones():
    """A call takes the concrete overload that fits (float: *, int: -) even when a generic one was defined
    later; other types fall back to the generic overload (vectors: +), as in Warp."""
    out, iout = wp.zeros(2), wp.zeros(1, dtype=int)
    wp.launch(combine_all, 1, inputs=[out, iout])
    np.testing.assert_array_equal(out.numpy(), [70.0, 22.0])
    assert iout.numpy()[0] == -8


@wp.kernel
def type_attributes(a: wp.array(dtype=Any), x: Any, out: wp.array(dtype=float)):
    zero = type(a[0])()
    copy = type(a).dtype(a[0]) * a.dtype.dtype(1.0) + zero
    wp.expect_eq(copy, a[0])
    v = wp.types.vector(length=2, dtype=type(x))
    m = wp.identity(n=v.length, dtype=v.dtype) * x
    out[0] = float(a.dtype.length) + 10.0 * float(a[0].length) + 100.0 * float(wp.trace(m))
    out[1] = float(wp.float64.length) + 10.0 * float(type(x)(2.0) == x)


def test_type_attributes_in_generic_kernels():
    """As in Warp 1.19's kernels: a value type (or a value) has `.dtype`, its scalar type, and `.length`, its
    component count (1 for a scalar), and keywords such as `dtype=type(x)` or `n=v.length` take such
    compile-time objects."""
    out = wp.zeros(2)
    cases = [(wp.array([[1.0, 2.0, 3.0]], dtype=wp.vec3), 2.0, [3 + 30 + 400, 1 + 10]),
             (wp.array([np.eye(2)], dtype=wp.mat22d), -1.0, [4 + 40 - 200, 1])]
    for arr, x, want in cases:
        wp.launch(type_attributes, 1, inputs=[arr, wp.float64(x) if arr.dtype is wp.mat22d else x, out])
        assert out.numpy().tolist() == want


def test_overload_stubs_find_kernels_given_another_name():
    """@wp.overload on a stub finds a generic kernel made with @wp.kernel(name=...) by its function's name;
    two kernels from one function are ambiguous; `kernel.overloads` lists the concrete kernels."""
    @wp.kernel(name="renamed_generic")
    def generic_stub_target(x: Any, out: wp.array(dtype=float)):
        out[0] = float(x) * 2.0

    @wp.overload
    def generic_stub_target(x: float, out: wp.array(dtype=float)): ...  # noqa: F811

    assert generic_stub_target.key == "renamed_generic" and len(generic_stub_target.overloads) == 1
    out = wp.zeros(1)
    wp.launch(generic_stub_target, 1, inputs=[1.5, out])
    assert out.numpy()[0] == 3.0

    def shared(x: Any):
        return

    wp.kernel(name="shared_a")(shared)
    wp.kernel(name="shared_b")(shared)
    with pytest.raises(wp.KernelTypeError, match="Ambiguous kernel lookup"):
        @wp.overload
        def shared(x: int): ...  # noqa: F811
