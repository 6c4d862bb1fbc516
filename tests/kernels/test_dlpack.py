"""DLPack: capsules exported and imported at the C-structure level, round trips with NumPy, PyTorch and JAX for
every scalar type, vectors as trailing dimensions, read-only flags, strides, empty and 0-d arrays, and owners
released exactly once."""

import gc
import sys
import weakref

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import dlpack

SCALARS = [wp.bool, wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64, wp.uint64, wp.float16,
           wp.float32, wp.float64]  # every scalar type NumPy also has (bfloat16 is tested with torch and JAX)


def _values(st, n=6):
    return (np.arange(n) % 2).astype(st.np_dtype) if st is wp.bool else np.arange(n).astype(st.np_dtype)


@pytest.mark.parametrize("st", SCALARS, ids=lambda t: t.__name__)
def test_numpy_round_trip_every_dtype(st):
    """NumPy -> wp.from_dlpack -> np.from_dlpack views one buffer, for every scalar type."""
    src = _values(st).reshape(2, 3)
    a = wp.from_dlpack(src)
    assert a.dtype is st and a.shape == (2, 3) and a.ptr == src.ctypes.data
    back = np.from_dlpack(a)
    assert back.dtype == src.dtype and back.ctypes.data == src.ctypes.data
    np.testing.assert_array_equal(back, src)


def test_capsules_are_named_and_consumed_once():
    """to_dlpack gives a "dltensor" capsule; a consumer renames it "used_dltensor"; importing it again is a
    BufferError; max_version=(1, 0) gives a "dltensor_versioned" capsule."""
    a = wp.array(np.arange(4, dtype=np.float32))
    capsule = wp.to_dlpack(a)
    assert "dltensor" in repr(capsule) and dlpack.capsule_state(capsule) == "fresh"
    b = wp.from_dlpack(capsule)
    assert "used_dltensor" in repr(capsule) and b.ptr == a.ptr
    with pytest.raises(BufferError, match="already consumed"):
        wp.from_dlpack(capsule)
    versioned = a.__dlpack__(max_version=(1, 0))
    assert '"dltensor_versioned"' in repr(versioned)
    np.testing.assert_array_equal(wp.from_dlpack(versioned).numpy(), [0, 1, 2, 3])
    with pytest.raises(TypeError, match="not a DLPack producer"):
        wp.from_dlpack(object())


def test_owners_are_released_exactly_once():
    """A capsule keeps its array alive until its consumer is done (or, never consumed, until it is freed);
    the array is then released once: no leak, no early free."""
    def exported(consume):
        a = wp.array(np.arange(1000, dtype=np.float32))
        ref = weakref.ref(a)
        return ref, consume(a)

    ref, capsule = exported(wp.to_dlpack)  # never consumed
    gc.collect()
    assert ref() is not None
    del capsule
    gc.collect()
    assert ref() is None
    ref, view = exported(lambda a: wp.from_dlpack(wp.to_dlpack(a)))  # consumed by us
    gc.collect()
    assert ref() is not None and view.numpy()[999] == 999.0
    del view
    gc.collect()
    assert ref() is None
    ref, view = exported(np.from_dlpack)  # consumed by NumPy
    gc.collect()
    assert ref() is not None and view[999] == 999.0
    del view
    gc.collect()
    assert ref() is None
    src = np.arange(5, dtype=np.float32)  # imported: the producer's reference is dropped once
    before = sys.getrefcount(src)
    for _ in range(50):
        wp.from_dlpack(src)
    gc.collect()
    assert sys.getrefcount(src) == before


def test_read_only_flag_travels_both_ways():
    """A read-only NumPy array comes in read-only (kernels may not write it); a read-only array goes out in a
    versioned capsule that says so, and a legacy capsule of it is refused."""
    frozen = np.arange(3, dtype=np.float32)
    frozen.flags.writeable = False
    a = wp.from_dlpack(frozen)
    assert a.readonly
    back = np.from_dlpack(a)
    assert not back.flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        wp.to_dlpack(a)


def test_strides_zero_dimensions_and_empty_arrays():
    """Byte strides of sliced data, 0-d arrays (one element), and empty arrays cross both ways."""
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    sliced = base[::2, 1::2]
    a = wp.from_dlpack(sliced)
    assert a.shape == (2, 3) and a.strides == sliced.strides
    np.testing.assert_array_equal(np.from_dlpack(a), sliced)
    assert wp.from_dlpack(np.array(5.0, dtype=np.float32)).shape == (1,)
    for shape in ((0,), (3, 0)):
        empty = wp.from_dlpack(np.zeros(shape, dtype=np.float32))
        assert empty.shape == shape and empty.size == 0
        assert np.from_dlpack(empty).shape == shape


def test_vectors_and_matrices_are_trailing_dimensions():
    """dtype=wp.vec3 / wp.mat22 is made of the trailing dimensions; exports add them back; a shape that does
    not fit, or components that are not contiguous, are clear errors."""
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    v = wp.from_dlpack(data, dtype=wp.vec3)
    assert v.shape == (4,) and v[1] == wp.vec3(3.0, 4.0, 5.0)
    np.testing.assert_array_equal(np.from_dlpack(v), data)
    m = wp.from_dlpack(np.arange(8, dtype=np.float64).reshape(2, 2, 2), dtype=wp.mat22d)
    assert m.shape == (2,) and np.from_dlpack(m).shape == (2, 2, 2)
    with pytest.raises(ValueError, match=r"shape \(4, 3\) does not hold vec2f"):
        wp.from_dlpack(data, dtype=wp.vec2)
    with pytest.raises(ValueError, match="components of the .* are not contiguous"):
        wp.from_dlpack(np.ascontiguousarray(data.T).T, dtype=wp.vec3)
    with pytest.raises(TypeError, match="Incompatible data types: DLPack float32 and Warp vec3d"):
        wp.from_dlpack(data, dtype=wp.vec3d)


def test_unsupported_dtypes_and_devices_are_refused():
    """Complex data, and memory on a device kind loomwork does not run on, raise clear errors."""
    with pytest.raises(TypeError, match="complex64.* has no loomwork scalar type"):
        wp.from_dlpack(np.zeros(3, dtype=np.complex64))

    class OnMetal:
        def __dlpack_device__(self):
            return (8, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("not asked")

    with pytest.raises(wp.DeviceError, match="device_type=8, device_id=0 \\(Metal"):
        wp.from_dlpack(OnMetal())
    with pytest.raises(TypeError, match="Unsupported source device for DLPack"):  # what Warp raises
        wp.from_dlpack(OnMetal())


def test_integers_reinterpreted_by_dtype_and_incompatible_dtypes_named():
    """dtype= views integers as the other signedness of their size and bools as 8-bit integers, sharing the
    memory; anything else is an error (a TypeError and a RuntimeError, as Warp raises) naming both types."""
    for have, want in ((wp.int8, wp.uint8), (wp.uint16, wp.int16), (wp.int32, wp.uint32), (wp.uint64, wp.int64),
                       (wp.bool, wp.int8)):
        a = wp.array(np.arange(-2, 3).astype(wp.dtype_to_numpy(have)), dtype=have)
        b = wp.from_dlpack(wp.to_dlpack(a), dtype=want)
        assert b.ptr == a.ptr and b.dtype is want and b.shape == a.shape
        np.testing.assert_array_equal(b.numpy(), a.numpy().view(wp.dtype_to_numpy(want)))
    for have, want in ((wp.bool, wp.float32), (wp.int32, wp.float32), (wp.uint8, wp.bool), (wp.int16, wp.int32)):
        with pytest.raises(TypeError, match=f"Incompatible data types: DLPack .* and Warp {want.__name__}"):
            wp.from_dlpack(wp.to_dlpack(wp.zeros(2, dtype=have)), dtype=want)
    with pytest.raises(RuntimeError, match="DLPack bool8 and Warp float32"):
        wp.from_dlpack(wp.to_dlpack(wp.zeros(2, dtype=wp.bool)), dtype=wp.float32)


def test_dlpack_protocol_options():
    """__dlpack__ honours copy=True (an independent copy), dl_device (its own device, or a copy elsewhere), and
    copy=False refuses to move; __dlpack_device__ is (kDLCPU, 0)."""
    a = wp.array(np.arange(3, dtype=np.float32))
    assert a.__dlpack_device__() == (1, 0)
    copied = wp.from_dlpack(a.__dlpack__(max_version=(1, 0), copy=True))
    copied.fill_(9.0)
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2])
    same = wp.from_dlpack(a.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False))
    assert same.ptr == a.ptr
    with pytest.raises(BufferError, match="copy=False cannot move it"):
        a.__dlpack__(dl_device=(2, 0), copy=False)


def test_torch_round_trip_every_dtype():
    """torch -> wp.from_dlpack -> torch.from_dlpack views one buffer, for every dtype torch and loomwork share
    (bfloat16 included), and the documents' capsule forms work."""
    torch = pytest.importorskip("torch")
    from torch.utils import dlpack as torch_dlpack

    for td in (torch.bool, torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
               torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        src = torch.ones(2, 3, dtype=td)
        a = wp.from_dlpack(src)
        assert a.dtype is wp.dtype_from_torch(td) and a.ptr == src.data_ptr()
        back = torch.from_dlpack(a)
        assert back.dtype == td and back.data_ptr() == src.data_ptr()
        assert torch.equal(back, src)
    t = torch.arange(4.0)
    warp_array2 = wp.from_dlpack(torch_dlpack.to_dlpack(t))
    torch_tensor = torch_dlpack.from_dlpack(wp.to_dlpack(warp_array2))
    torch_tensor[0] = 5.0
    assert t[0] == 5.0


def test_jax_round_trip_every_dtype():
    """JAX -> wp.from_dlpack -> jax.dlpack.from_dlpack keeps values and dtype for every type JAX has."""
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'jax[cpu]')")
    import jax.numpy as jnp
    from jax import dlpack as jax_dlpack

    jax.config.update("jax_enable_x64", True)
    try:
        for name in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                     "bfloat16", "float32", "float64"):
            src = jnp.arange(6, dtype=name).reshape(2, 3) if name != "bool" else jnp.ones((2, 3), dtype=bool)
            a = wp.from_dlpack(src)
            assert a.dtype.__name__ == name and a.shape == (2, 3)
            back = jax_dlpack.from_dlpack(a)
            assert back.dtype == src.dtype and bool((back == src).all())
    finally:
        jax.config.update("jax_enable_x64", False)
