"""Arrays in Python scope: creation, NumPy views, slicing, in-place operations and errors."""

import numpy as np
import pytest

import loomwork as wp


class ArrayInterfaceOnly:
    """An object exposing only __array_interface__ (no __array__)."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


def test_from_list_numpy_and_interfaces():
    """wp.array accepts lists, NumPy arrays and __array_interface__ objects, inferring dtype."""
    assert wp.array([1.0, 2.0, 3.0], dtype=float).dtype is wp.float32
    a = wp.array(np.arange(4, dtype=np.int64))
    assert a.dtype is wp.int64 and a.shape == (4,)
    b = wp.array(ArrayInterfaceOnly(np.ones((2, 3), dtype=np.float32)))
    assert b.shape == (2, 3) and b.ndim == 2
    np.testing.assert_array_equal(b.numpy(), np.ones((2, 3)))


def test_copy_false_shares_memory():
    """wp.array(np_array, copy=False) views the NumPy buffer; copy=True (default) does not."""
    src = np.zeros(4, dtype=np.float32)
    view = wp.array(src, dtype=float, copy=False)
    view.fill_(2.0)
    assert src[0] == 2.0
    owned = wp.array(src, dtype=float)
    owned.fill_(3.0)
    assert src[0] == 2.0


def test_numpy_is_zero_copy_on_cpu():
    """.numpy() and np.array(w) see the same memory as the array."""
    w = wp.zeros(3, dtype=float)
    w.numpy()[1] = 5.0
    assert w.numpy()[1] == 5.0
    np.testing.assert_array_equal(np.array(w), [0.0, 5.0, 0.0])
    assert w.__array_interface__["data"][0] == w.ptr


def test_vector_arrays_add_trailing_dimensions():
    """Arrays of vec3 view as (n, 3) NumPy arrays and accept (n, 3) data."""
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    a = wp.array(data, dtype=wp.vec3)
    assert a.shape == (4,) and a.dtype is wp.vec3
    np.testing.assert_array_equal(a.numpy(), data)
    assert a[2] == wp.vec3(6.0, 7.0, 8.0)
    m = wp.zeros(2, dtype=wp.mat22)
    assert m.numpy().shape == (2, 2, 2)
    assert wp.array([wp.vec2(1.0, 2.0), wp.vec2(3.0, 4.0)], dtype=wp.vec2).numpy()[1, 0] == 3.0


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_creation_functions(ndim):
    """zeros/ones/full/empty and the *_like forms give the requested shape, dtype and values."""
    shape = tuple(range(2, 2 + ndim))
    assert wp.zeros(shape, dtype=wp.float64).numpy().sum() == 0
    assert np.all(wp.ones(shape, dtype=wp.int32).numpy() == 1)
    f = wp.full(shape, 1.5, dtype=float)
    assert np.all(f.numpy() == 1.5) and f.shape == shape and f.ndim == ndim
    assert wp.empty(shape, dtype=wp.int16).shape == shape
    assert np.all(wp.ones_like(f).numpy() == 1.0)
    assert np.all(wp.zeros_like(f).numpy() == 0.0)
    assert np.all(wp.full_like(f, 7.0).numpy() == 7.0)
    assert wp.empty_like(f).shape == shape
    c = wp.clone(f)
    c.fill_(0.0)
    assert np.all(f.numpy() == 1.5)


def test_full_infers_dtype_from_value():
    """wp.full without dtype takes int32 for ints, float32 for floats, the vector type for vectors."""
    assert wp.full(3, 2).dtype is wp.int32
    assert wp.full(3, 2.0).dtype is wp.float32
    assert wp.full(3, wp.vec3(1.0, 2.0, 3.0)).dtype is wp.vec3


def test_fill_forms_of_the_faq():
    """The FAQ's wp.full, arr.fill_ and arr[:4].fill spellings."""
    arr = wp.full(8, 1.23, dtype=float)
    np.testing.assert_allclose(arr.numpy(), np.full(8, 1.23, dtype=np.float32))
    arr.fill_(0.5)
    assert np.all(arr.numpy() == 0.5)
    arr[:4].fill(1.23)
    np.testing.assert_allclose(arr.numpy(), np.array([1.23] * 4 + [0.5] * 4, dtype=np.float32))
    arr.zero_()
    assert not arr.numpy().any()


def test_slicing_makes_strided_views():
    """Slices with steps and integer indices give views that share memory."""
    a = wp.array(np.arange(24, dtype=np.float32).reshape(4, 6))
    v = a[1:3, ::2]
    assert v.shape == (2, 3) and not v.is_contiguous
    np.testing.assert_array_equal(v.numpy(), np.arange(24).reshape(4, 6)[1:3, ::2])
    v.fill_(-1.0)
    assert a.numpy()[1, 0] == -1.0 and a.numpy()[1, 1] == 5 + 2
    row = a[2]
    assert row.shape == (6,)
    assert a[3, 5] == 23.0
    with pytest.raises(IndexError, match="out of bounds"):
        a[4]
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0]


def test_assign_copy_and_clone():
    """assign copies values in; wp.copy copies elements with offsets and counts."""
    a = wp.zeros(6, dtype=float)
    a.assign(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(a.numpy(), np.arange(6))
    b = wp.zeros(6, dtype=float)
    wp.copy(b, a, dest_offset=2, src_offset=1, count=3)
    np.testing.assert_array_equal(b.numpy(), [0, 0, 1, 2, 3, 0])
    with pytest.raises(ValueError, match="out of range"):
        wp.copy(b, a, dest_offset=5, count=3)
    with pytest.raises(ValueError, match="assign"):
        a.assign([1.0, 2.0])


def test_properties_and_repr():
    """shape, strides, size, ndim, dtype, device, ptr and len are those of the data."""
    a = wp.zeros((3, 4), dtype=wp.float64)
    assert a.shape == (3, 4) and a.strides == (32, 8) and a.size == 12 and a.ndim == 2
    assert a.dtype is wp.float64 and str(a.device) == "cpu" and a.device == "cpu" and isinstance(a.ptr, int)
    assert len(a) == 3
    assert "float64" in repr(a)


def test_reshape_flatten_and_list():
    """reshape/flatten are views of contiguous arrays; .list() returns Python values."""
    a = wp.array(np.arange(6, dtype=np.int32))
    r = a.reshape((2, -1))
    assert r.shape == (2, 3)
    r.numpy()[1, 0] = 99
    assert a.numpy()[3] == 99
    assert a.reshape((3, 2)).flatten().shape == (6,)
    assert wp.array([1, 2], dtype=wp.int32).list() == [1, 2]
    with pytest.raises(ValueError, match=r"cannot reshape array of shape \(6,\) \(size 6\) into shape \(4, 2\)"):
        a.reshape((4, 2))
    with pytest.raises(RuntimeError, match="cannot reshape"):  # Warp's exception type too
        a.reshape((4, 2))
    with pytest.raises(ValueError, match="Array shapes must be non-negative"):
        wp.zeros(-1)


def test_annotation_forms():
    """wp.array(dtype=..., ndim=...), wp.array2d(dtype=...) and wp.array[float] are annotations."""
    assert wp.array(dtype=float, ndim=2).ndim == 2
    assert wp.array2d(dtype=float).ndim == 2
    ann = wp.array[float]
    assert ann.dtype is wp.float32 and ann.ndim == 1
    assert wp.array2d[wp.vec3].ndim == 2 and wp.array2d[wp.vec3].dtype is wp.vec3
    assert wp.array3d(dtype=float).ndim == 3 and wp.array4d(dtype=float).ndim == 4


def test_bad_shapes_and_devices_raise():
    """Negative extents, too many dimensions and unknown devices raise clear errors."""
    with pytest.raises(ValueError, match="negative"):
        wp.zeros(-1)
    with pytest.raises(ValueError, match="1 to 4 dimensions"):
        wp.zeros((1, 1, 1, 1, 1))
    with pytest.raises(wp.DeviceError, match="unknown device"):
        wp.zeros(3, device="tpu")
    with pytest.raises(ValueError, match="whole values"):
        wp.array(np.zeros(4, dtype=np.float32), dtype=wp.vec3)


def test_from_numpy():
    """wp.from_numpy copies, infers the dtype, and accepts a vector dtype."""
    src = np.ones((5, 3), dtype=np.float32)
    a = wp.from_numpy(src, dtype=wp.vec3)
    assert a.shape == (5,) and a.dtype is wp.vec3
    b = wp.from_numpy(np.arange(3, dtype=np.float64))
    assert b.dtype is wp.float64


def test_requires_grad_allocates_gradient():
    """requires_grad=True gives an array with a zeroed .grad of the same shape."""
    a = wp.zeros(4, dtype=float, requires_grad=True)
    assert a.requires_grad and a.grad is not None and a.grad.shape == (4,)
    assert not a.grad.numpy().any()


def test_transpose_view_and_from_ptr():
    """transpose permutes dimensions as a view; view reinterprets equal-size dtypes; from_ptr wraps memory."""
    a = wp.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = a.transpose()
    assert t.shape == (3, 2)
    np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3).T)
    t.numpy()[2, 1] = 99.0
    assert a.numpy()[1, 2] == 99.0
    v = wp.zeros(4, dtype=wp.vec3).view(wp.vec3i)
    assert v.dtype is wp.vec3i and v.shape == (4,)
    with pytest.raises(TypeError, match="cannot create an array view"):
        wp.zeros(4, dtype=wp.vec3).view(wp.vec4)
    src = np.arange(5, dtype=np.float64)
    w = wp.from_ptr(src.ctypes.data, 5, dtype=wp.float64)
    np.testing.assert_array_equal(w.numpy(), src)
    with pytest.raises(ValueError, match="non-null"):
        wp.from_ptr(0, 5)
    with pytest.raises(ValueError, match="permutation"):
        a.transpose((0, 0))


def test_requires_grad_set_after_creation():
    """Setting `requires_grad = True` on an array gives it a zeroed gradient buffer (Warp's form); False drops it;
    views keep their base's gradient view."""
    a = wp.zeros(3)
    assert a.grad is None
    a.requires_grad = True
    assert a.grad is not None and a.grad.numpy().tolist() == [0.0, 0.0, 0.0]
    assert a[1:].grad.shape == (2,) and a[1:].requires_grad
    a.requires_grad = False
    assert a.grad is None


@wp.kernel
def squares_of(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_reshaped_views_keep_their_gradient():
    """`flatten()` / `reshape()` of an array with a gradient share it (as transpose and slices do), so a launch on
    the view inside a Tape reaches the original's `.grad`."""
    a = wp.array(np.arange(4, dtype=np.float32).reshape(2, 2), requires_grad=True)
    flat, y = a.flatten(), wp.zeros(4, requires_grad=True)
    assert flat.requires_grad and flat.grad.shape == (4,)
    tape = wp.Tape()
    with tape:
        wp.launch(squares_of, 4, inputs=[flat, y])
    tape.backward(grads={y: np.ones(4, dtype=np.float32)})
    assert a.grad.numpy().tolist() == [[0.0, 2.0], [4.0, 6.0]]


def test_requires_grad_set_after_a_launch_reaches_kernels():
    """An array launched before `requires_grad = True` is set gets its gradient in a later Tape (the kernels'
    view of the array carries the new gradient buffer)."""
    x = wp.array(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    wp.launch(squares_of, 3, inputs=[x, wp.zeros(3)])
    x.requires_grad = True
    y = wp.zeros(3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(squares_of, 3, inputs=[x, y])
    tape.backward(grads={y: np.ones(3, dtype=np.float32)})
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


@wp.kernel
def rebind_views(arr: wp.array3d(dtype=wp.int32), out: wp.array(dtype=wp.int32)):
    sub = arr[:1]
    out[0] = sub.shape[0] * 100 + sub.shape[3]
    sub = arr[1, 0]
    out[1] = sub[2] + sub.shape[1]
    sub = arr[0, :, ::2]
    out[2] = sub[1, 1]


def test_array_names_rebind_across_shapes():
    """Straight-line code may rebind an array name to a view of another rank; extents past ndim read 0."""
    arr = wp.array(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    out = wp.zeros(3, dtype=wp.int32)
    wp.launch(rebind_views, dim=1, inputs=[arr, out])
    np.testing.assert_array_equal(out.numpy(), [100, 14, 6])


def test_full_infers_vectors_matrices_and_structs():
    """wp.full infers a vector, matrix or struct dtype from its value, as Warp does."""
    assert wp.full(3, wp.vec2(1.0, 2.0)).dtype == wp.vec2
    v = wp.full(2, [1.0, 2.0, 3.0])
    assert v.dtype == wp.types.vector(3, wp.float64)
    np.testing.assert_array_equal(v.numpy(), [[1.0, 2.0, 3.0]] * 2)
    assert wp.full(2, np.eye(2, dtype=np.float32)).dtype == wp.mat22


def test_views_between_vectors_and_scalars():
    """view turns vectors and matrices into their scalars and back, as Warp's does, with the gradient."""
    a = wp.array(np.arange(12, dtype=np.float16).reshape(4, 3), requires_grad=True)
    v = a.view(wp.vec3h)
    assert v.shape == (4,) and v.dtype is wp.vec3h and v.ptr == a.ptr and v.grad.ptr == a.grad.ptr
    assert v.numpy().tolist() == a.numpy().tolist()
    m = wp.zeros(5, dtype=wp.mat33)
    f = m.view(float)
    assert f.shape == (5, 3, 3) and f.strides == (36, 12, 4)
    f.fill_(2.0)
    assert m.numpy()[4, 2, 2] == 2.0
    assert wp.zeros(4, dtype=float).view(wp.vec4).shape == (1,)  # one vector: a 1-D array of one
    with pytest.raises(ValueError, match=r"does not end in the shape \(4,\)"):
        wp.zeros((3, 5), dtype=float).view(wp.vec4)
    with pytest.raises(ValueError, match="inner strides"):
        wp.zeros((3, 6), dtype=float)[:, ::2].view(wp.vec3)
    with pytest.raises(TypeError, match="cannot create an array view"):
        wp.zeros(3, dtype=wp.float64).view(wp.vec3)


def test_arrays_over_foreign_memory_call_their_deleter_once_all_views_are_gone():
    """wp.array(ptr=..., deleter=f) calls f(ptr, capacity) when it and every view of it are garbage, as
    Warp's does; other arrays have deleter None; a deleter without ptr= is refused."""
    import gc

    buf = np.arange(8, dtype=np.float32)
    calls = []
    a = wp.array(ptr=buf.ctypes.data, dtype=float, shape=(8,), capacity=32, deleter=lambda p, n: calls.append((p, n)))
    view = a[2:5]
    assert a.deleter is not None and view.deleter is None and wp.zeros(3).deleter is None
    del a
    gc.collect()
    assert calls == [] and view.numpy().tolist() == [2.0, 3.0, 4.0]
    del view
    gc.collect()
    assert calls == [(buf.ctypes.data, 32)]
    with pytest.raises(TypeError, match="applies to arrays over ptr"):
        wp.array(np.zeros(3), deleter=print)


def test_an_array_over_numpy_memory_keeps_the_numpy_array():
    """wp.array(a, copy=False) views a NumPy array's memory and keeps it alive (`_ref` in Warp's words)."""
    a = np.ones(8, dtype=np.int32)
    w = wp.array(a, dtype=int, copy=False)
    assert w._ref is a and w.ptr == a.ctypes.data


def test_cptr_types_host_memory_as_the_elements():
    """array.cptr() is a ctypes pointer typed as the elements (scalars, vectors, struct records)."""
    assert wp.array([1.0, 2.0], dtype=float).cptr()[1] == 2.0
    assert wp.array([wp.vec2(1.0, 2.0)], dtype=wp.vec2).cptr()[0] == wp.vec2(1.0, 2.0)
    with pytest.raises(wp.DeviceError, match="host memory"):
        wp.array(dtype=float).cptr()


def test_copy_names_what_it_cannot_use():
    """wp.copy refuses negative or non-integer offsets and counts, element sizes that differ, and arrays
    that are both strided with different shapes, naming the values (RuntimeErrors, as Warp raises)."""
    src, dest = wp.array([1, 2, 3, 4], dtype=wp.int32), wp.zeros(4, dtype=wp.int32)
    for kwargs, words in (({"src_offset": -1}, "Source offset must be non-negative, got -1"),
                          ({"dest_offset": -2}, "Destination offset must be non-negative"),
                          ({"count": -1}, "count must be non-negative"), ({"count": 2.0}, "must be integers")):
        with pytest.raises(RuntimeError, match=words):
            wp.copy(dest, src, **kwargs)
    with pytest.raises(TypeError, match="destination dtype=float64, source dtype=float32"):
        wp.copy(wp.zeros(4, dtype=wp.float64), wp.zeros(4, dtype=wp.float32))
    strided = wp.array(np.arange(18, dtype=np.float32).reshape(6, 3))[::3, :]
    with pytest.raises(ValueError, match=r"destination shape=\(3, 2\), source shape=\(2, 3\)"):
        wp.copy(wp.zeros((6, 2), dtype=float)[::2, :], strided)
    wp.copy(dest, src, dest_offset=1, src_offset=2, count=2)
    assert dest.numpy().tolist() == [0, 3, 4, 0]
    assert not wp.indexedarray(src, [wp.array([0, 2], dtype=wp.int32)]).is_contiguous


@wp.kernel
def _squares_2d(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    y[i, j] = x[i, j] * x[i, j]


def test_strided_allocation_and_gradients_laid_out_as_their_arrays():
    """Arrays are allocated with given strides (the memory they span, no more); a gradient made for a
    non-contiguous view (requires_grad on a transpose) has the view's layout, so what kernels write into it
    is what .grad shows (it was laid out contiguously and came back transposed)."""
    a = wp.empty((2, 3, 4), dtype=wp.int32, strides=(40, 16, 4))
    assert a.capacity == 4 + 40 + 2 * 16 + 3 * 4 and a.strides == (40, 16, 4)
    assert wp.zeros((3, 5), dtype=float, strides=(4, 12)).numpy().tolist() == [[0.0] * 5] * 3
    assert wp.empty((0, 3), dtype=wp.int32, strides=(4, 16)).capacity == 0
    with pytest.raises(ValueError, match="expected 2 strides, got 1"):
        wp.empty((3, 3), dtype=wp.int32, strides=(4,))
    with pytest.raises(NotImplementedError, match="Negative strides"):
        wp.empty((3, 3), dtype=wp.int32, strides=(16, -4))
    t = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4)).transpose()
    t.requires_grad = True
    assert t.grad.strides == t.strides
    y = wp.zeros((4, 3), requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_squares_2d, (4, 3), inputs=[t, y])
    tape.backward(grads={y: np.ones((4, 3), np.float32)})
    np.testing.assert_array_equal(t.grad.numpy(), 2.0 * t.numpy())


def test_arrays_of_no_elements_own_no_memory():
    """An array of no elements has no memory (`ptr` None, as in Warp), nor has its gradient; NumPy still sees
    it (with an address it never reads), its strides are Warp's (a zero extent zeroes the strides before it),
    and copies, fills, launches and a Tape over it do nothing, without error."""
    a = wp.zeros((1, 0), dtype=wp.vec2f)
    assert a.ptr is None and a.size == 0 and a.strides == (0, 8)
    assert a.__array_interface__["data"][0] != 0
    view = np.asarray(a)
    assert view.shape == (1, 0, 2) and view.strides == (0, 8, 4)
    b = wp.empty(0, dtype=float, requires_grad=True)
    assert b.grad is not None and b.grad.ptr is None and b.grad.shape == (0,)
    assert str(b) == "[]" and b.list() == [] and b.clone().ptr is None
    b.zero_()
    b.fill_(2.0)
    wp.copy(b, wp.zeros(0))
    tape = wp.Tape()
    with tape:
        wp.launch(_fill_ones, dim=0, inputs=[b])
    tape.backward(grads={b: wp.zeros(0)})
    assert wp.array(np.zeros((0, 3), dtype=np.float32), dtype=wp.vec3).ptr is None


@wp.kernel
def _fill_ones(x: wp.array(dtype=float)):
    x[wp.tid()] = 1.0


def test_vectors_from_data_whose_last_dimension_holds_several():
    """Vector and matrix arrays made from scalar data read its last dimension as whole values, as Warp does:
    (4, 6) floats are (4, 2) vec3s, (2, 3, 4) floats (2, 3) mat22s, a strided source too; a last dimension that
    holds no whole number of values is refused."""
    data = np.arange(24, dtype=np.float32)
    assert wp.array(data.reshape(4, 6), dtype=wp.vec3).shape == (4, 2)
    assert wp.array(data.reshape(2, 3, 4), dtype=wp.mat22).shape == (2, 3)
    assert wp.array(data.reshape(4, 2, 3), dtype=wp.vec3).shape == (4, 2)
    assert wp.array(data, dtype=wp.vec3).shape == (8,)
    src = wp.array(np.arange(14, dtype=np.float32).reshape(2, 7))[:, 1:]
    dst = wp.array(src, dtype=wp.vec3)
    np.testing.assert_array_equal(dst.numpy(), [[[1, 2, 3], [4, 5, 6]], [[8, 9, 10], [11, 12, 13]]])
    with pytest.raises(ValueError, match="multiple of 3"):
        wp.array(data.reshape(4, 3, 2), dtype=wp.vec3)


def test_an_object_with_both_interfaces_is_read_through_the_host_one_for_the_cpu():
    """An object offering `__array_interface__` and `__cuda_array_interface__` becomes a CPU array through the
    host interface (it used to ask for a CUDA device)."""
    class Both:
        def __init__(self, values: np.ndarray) -> None:
            self.data = values
            self.__array_interface__ = values.__array_interface__
            self.__cuda_array_interface__ = values.__array_interface__

    a = wp.array(Both(np.arange(4, dtype=np.float32).reshape(2, 2)), dtype=wp.mat22, device="cpu")
    assert a.shape == (1,) and a.numpy()[0, 1, 1] == 3.0


def test_reduction_axis_out_of_bounds_is_an_index_error_naming_it():
    """An axis outside the array's dimensions is an IndexError in Warp's words."""
    a = wp.zeros((2, 3))
    for axis in (2, -3):
        with pytest.raises(IndexError, match=rf"array_sum\(\) axis {axis} is out of bounds"):
            wp.utils.array_sum(a, axis=axis)
