"""indexedarray: gathered views of arrays through index arrays, read, written and differentiated in kernels."""

import numpy as np
import pytest

import loomwork as wp


@wp.kernel
def gather_scale(src: wp.indexedarray(dtype=float), s: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = src[i] * s


@wp.kernel
def scatter_add(dst: wp.indexedarray(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(dst, i, v[i])


@wp.kernel
def grid_sum(a: wp.indexedarray2d(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(out, 0, a[i, j] * float(a.shape[1]))


def test_gather_and_scatter():
    """Reads go through the indices; atomic writes land at the indexed (possibly repeated) elements."""
    data = wp.array(np.arange(10, dtype=np.float32) * 10.0)
    idx = wp.array(np.array([7, 2, 2, 9], dtype=np.int32))
    view = wp.indexedarray(data, [idx])
    assert view.shape == (4,) and len(view) == 4
    np.testing.assert_array_equal(view.numpy(), [70.0, 20.0, 20.0, 90.0])
    out = wp.zeros(4, dtype=float)
    wp.launch(gather_scale, 4, inputs=[view, 0.5, out])
    np.testing.assert_array_equal(out.numpy(), [35.0, 10.0, 10.0, 45.0])
    wp.launch(scatter_add, 4, inputs=[view, np.ones(4, dtype=np.float32)])
    np.testing.assert_array_equal(data.numpy()[[2, 7, 9]], [22.0, 71.0, 91.0])


def test_two_dimensional_selection():
    """A 2-D view selecting rows, every column; shape reflects the selection."""
    a = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = wp.indexedarray2d(a, [np.array([2, 0], dtype=np.int32), None])
    assert view.shape == (2, 4)
    np.testing.assert_array_equal(view.numpy(), np.arange(12).reshape(3, 4)[[2, 0]])
    out = wp.zeros(1, dtype=float)
    wp.launch(grid_sum, (2, 4), inputs=[view, out])
    assert out.numpy()[0] == 4.0 * (np.arange(12).reshape(3, 4)[[2, 0]]).sum()


def test_gradients_through_repeated_indices():
    """Gradients of gathered reads accumulate at the source elements, repeated indices counted twice."""
    data = wp.array(np.arange(5, dtype=np.float32), requires_grad=True)
    view = wp.indexedarray(data, [np.array([1, 1, 3], dtype=np.int32)])
    out = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(gather_scale, 3, inputs=[view, 2.0, out])
    tape.backward(grads={out: np.ones(3, dtype=np.float32)})
    np.testing.assert_array_equal(data.grad.numpy(), [0.0, 4.0, 0.0, 2.0, 0.0])


def test_bad_indices():
    """Out-of-range, wrong-dtype and too many index arrays are refused; so is a plain array for the param."""
    data = wp.zeros(4, dtype=float)
    with pytest.raises(IndexError, match=r"in \[0, 4\)"):
        wp.indexedarray(data, [np.array([4], dtype=np.int32)])
    with pytest.raises(TypeError, match="int32"):
        wp.indexedarray(data, [wp.zeros(2, dtype=wp.int64)])
    with pytest.raises(ValueError, match="2 index arrays"):
        wp.indexedarray(data, [None, None])
    with pytest.raises(wp.LaunchError, match="expects indexedarray"):
        wp.launch(gather_scale, 1, inputs=[data, 1.0, wp.zeros(1, dtype=float)])


@wp.kernel
def rows_through_views(a: wp.indexedarray2d(dtype=float), out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    row = a[i]
    out[i, j] = row[j] + a[i][j] * 10.0
    a[i][j] = a[i, j] + 1.0


def test_partial_indexing_in_kernels():
    """a[i] of a 2-D indexedarray is a 1-D indexedarray whose elements follow both index arrays."""
    data = wp.array(np.arange(16, dtype=np.float32).reshape(4, 4))
    rows, cols = np.array([3, 1], dtype=np.int32), np.array([0, 2, 3], dtype=np.int32)
    expected = data.numpy()[np.ix_(rows, cols)].copy()
    ia = wp.indexedarray2d(data, [wp.array(rows), wp.array(cols)])
    out = wp.zeros((2, 3), dtype=float)
    wp.launch(rows_through_views, dim=ia.shape, inputs=[ia, out])
    np.testing.assert_allclose(out.numpy(), expected * 11.0)
    np.testing.assert_allclose(data.numpy()[np.ix_(rows, cols)], expected + 1.0)


def test_host_indexing_with_arrays():
    """data[I, 1:3, J] gives an indexedarray equal to NumPy's selection; fill_, assign and copy write through."""
    host = np.arange(125, dtype=np.int32).reshape(5, 5, 5)
    data = wp.array(host)
    idx = wp.array(np.array([4, 0], dtype=np.int32))
    view = data[idx, 1:3, idx]
    assert type(view) is wp.indexedarray and view.shape == (2, 2, 2)
    np.testing.assert_array_equal(view.numpy(), host[np.ix_([4, 0], [1, 2], [4, 0])])
    assert data[idx].shape == (2, 5, 5) and data[2, idx].shape == (2, 5)
    view.fill_(-1)
    assert (data.numpy()[np.ix_([4, 0], [1, 2], [4, 0])] == -1).all() and data.numpy()[1, 1, 1] == 31
    src = wp.array(np.arange(8, dtype=np.int32).reshape(2, 2, 2))
    wp.copy(view, src)
    np.testing.assert_array_equal(view.numpy(), src.numpy())
    np.testing.assert_array_equal(wp.clone(view).numpy(), src.numpy())
    assert view.list() == list(range(8))
    empty = data[wp.empty(0, dtype=int)]
    assert empty.size == 0 and empty.shape == (0, 5, 5) and empty.numpy().shape == (0, 5, 5)


@wp.struct
class Holder:
    values: wp.indexedarray(dtype=float)
    scale: float


@wp.kernel
def read_holder(h: Holder, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = h.values[i] * h.scale


def test_indexedarray_struct_field():
    """A struct field of indexedarray type takes an indexedarray and reads through its indices in kernels."""
    data = wp.array(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
    h = Holder()
    h.values = wp.indexedarray(data, [wp.array(np.array([3, 0], dtype=np.int32))])
    h.scale = 2.0
    out = wp.zeros(2, dtype=float)
    wp.launch(read_holder, dim=2, inputs=[h, out])
    np.testing.assert_allclose(out.numpy(), [8.0, 2.0])
    with pytest.raises(TypeError, match="field 'values' of struct Holder"):
        h.values = data
