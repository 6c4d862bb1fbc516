"""Launch arguments from other frameworks (NumPy here): temporaries kept alive, read-only and copied outputs
refused, None only for arrays a kernel does not touch, and what the kernel writes always reaches the caller."""

import gc

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import device as device_module
from loomwork.kernels.cpu import CpuBackend


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def maybe_scale(x: wp.array(dtype=float), scale: wp.array(dtype=float), unused: wp.array(dtype=float),
                y: wp.array(dtype=float)):
    i = wp.tid()
    s = 1.0
    if not wp.unot(scale):
        s = scale[0]
    y[i] = s * x[i]


@wp.kernel
def add_vec(v: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = v[i][0] + v[i][1] + v[i][2]


class FreshCopy:
    """An object whose __array__ returns a new array on every call (the temporary np.asarray makes)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values.copy()


class SharedView:
    """An object whose __array__ returns a view of memory it keeps."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


def test_array_method_temporary_lives_through_the_launch():
    """A large input whose __array__ makes a temporary copy is read correctly: the copy outlives the launch
    (it used to be freed first: a crash for large arrays, garbage for small ones)."""
    n = 1 << 22
    values = np.arange(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    for _ in range(3):
        wp.launch(double, dim=n, inputs=[FreshCopy(values), out])
        gc.collect()
        np.testing.assert_array_equal(out, 2.0 * values)


def test_array_method_output_that_is_a_copy_is_refused():
    """An output whose __array__ returns a copy would lose the kernel's writes: a LaunchError naming it.
    An __array__ that shares its memory is written in place."""
    x = np.ones(8, dtype=np.float32)
    with pytest.raises(wp.LaunchError, match=r"kernel 'double' .* argument 'y': the FreshCopy \(__array__\) returned "
                                             "a temporary copy"):
        wp.launch(double, dim=8, inputs=[x, FreshCopy(np.zeros(8, dtype=np.float32))])
    shared = SharedView(np.zeros(8, dtype=np.float32))
    wp.launch(double, dim=8, inputs=[x, shared])
    np.testing.assert_array_equal(shared.values, 2.0)


def test_read_only_buffers_are_refused_as_outputs():
    """A NumPy array with writeable=False, or np.frombuffer of bytes, is fine to read but refused as an output."""
    frozen = np.ones(8, dtype=np.float32)
    frozen.flags.writeable = False
    out = np.zeros(8, dtype=np.float32)
    wp.launch(double, dim=8, inputs=[frozen, out])
    np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(wp.LaunchError, match="argument 'y' is a read-only NumPy array"):
        wp.launch(double, dim=8, inputs=[out, frozen])
    with pytest.raises(wp.LaunchError, match="argument 'y' is a read-only NumPy array"):
        wp.launch(double, dim=8, inputs=[out, np.frombuffer(bytes(32), dtype=np.float32)])
    assert (frozen == 1.0).all()


def test_read_only_arrays_of_ours_refuse_writes():
    """An array viewing read-only memory (copy=False) is read-only: launches writing it and in-place
    methods raise; reading it works, and a copy of it is writable."""
    frozen = np.arange(4, dtype=np.float32)
    frozen.flags.writeable = False
    view = wp.array(frozen, copy=False)
    assert view.readonly and view[1:].readonly and not view.numpy().flags.writeable
    out = wp.zeros(4, dtype=float)
    wp.launch(double, dim=4, inputs=[view, out])
    np.testing.assert_array_equal(out.numpy(), 2.0 * frozen)
    with pytest.raises(wp.LaunchError, match="argument 'y' is read-only"):
        wp.launch(double, dim=4, inputs=[out, view])
    for method in (view.zero_, lambda: view.fill_(1.0), lambda: view.assign(frozen)):
        with pytest.raises(ValueError, match="read-only"):
            method()
    with pytest.raises(ValueError, match="read-only"):
        wp.copy(view, out)
    assert not view.clone().readonly
    np.testing.assert_array_equal(frozen, np.arange(4))


def test_none_is_refused_for_arrays_a_kernel_touches():
    """None for an array the kernel reads or writes is a LaunchError naming the kernel and the argument (it
    used to crash in release builds); None is fine for an array the kernel never touches, or tests with
    wp.unot."""
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, dtype=np.float32)
    with pytest.raises(wp.LaunchError, match=r"kernel 'double' \(defined at .*test_launch_arguments.py:\d+\) argument "
                                             "'x' is None, but the kernel reads it"):
        wp.launch(double, dim=4, inputs=[None, y])
    with pytest.raises(wp.LaunchError, match="argument 'y' is None, but the kernel writes it"):
        wp.launch(double, dim=4, inputs=[x, None])
    wp.launch(maybe_scale, dim=4, inputs=[x, None, None, y])
    np.testing.assert_array_equal(y, x)
    wp.launch(maybe_scale, dim=4, inputs=[x, np.array([3.0], np.float32), None, y])
    np.testing.assert_array_equal(y, 3.0 * x)


def test_wrong_launch_arguments_are_runtime_errors_as_in_warp():
    """Warp raises RuntimeError for launch arguments of the wrong kind; loomwork's LaunchError is one (and still a
    TypeError), so a Warp program's `except RuntimeError` keeps working."""
    for bad in ([None, None], [np.zeros(4, np.float32)], ["x", np.zeros(4, np.float32)]):
        with pytest.raises(RuntimeError) as info:
            wp.launch(double, dim=4, inputs=bad)
        assert isinstance(info.value, wp.LaunchError) and isinstance(info.value, TypeError)


@wp.kernel
def vec_param(v: wp.vec3, out: wp.array(dtype=wp.vec3)):
    out[0] = v


def test_a_single_value_for_a_vector_parameter_is_refused():
    """A scalar passed for a vector, matrix, quaternion or transform parameter is refused (not spread over the
    components), by wp.launch and by a recorded Launch's setters, as Warp 1.19 refuses it; the argument and both
    types are named."""
    out = wp.zeros(1, dtype=wp.vec3)
    for value in (123, 1.5, wp.float32(1.5), wp.int32(2)):
        with pytest.raises(wp.LaunchError, match=r"argument 'v' expects vec3f but got a single value"):
            wp.launch(vec_param, 1, inputs=[value, out])
    cmd = wp.Launch(vec_param, wp.get_device("cpu"))
    with pytest.raises(wp.LaunchError, match=r"argument 'v' expects vec3f but got a single value"):
        cmd.set_param_by_name("v", 123)
    with pytest.raises(ValueError, match="Failed to convert argument for param v to vec3f"):
        wp.launch(vec_param, 1, inputs=[None, out])
    wp.launch(vec_param, 1, inputs=[np.float32(2.0), out])  # a NumPy scalar still fills it (Warp: deprecated)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 2.0, 2.0]])
    wp.launch(vec_param, 1, inputs=[(1.0, 2.0, 3.0), out])
    np.testing.assert_array_equal(out.numpy(), [[1.0, 2.0, 3.0]])


def test_copy_false_views_what_it_can():
    """wp.array(data, copy=False) views the data where it can; host data of another scalar type becomes a
    converted copy (as Warp does: each its own); components that are not contiguous are an error."""
    src = np.ones(4)
    a, b = wp.array(src, dtype=float, copy=False), wp.array(src * 2, dtype=float, copy=False)
    assert a.ptr != src.ctypes.data and a.ptr != b.ptr and a.numpy().tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="components of the NumPy array are not contiguous"):
        wp.array(np.zeros((3, 4), np.float32).T, dtype=wp.vec3, copy=False)
    view = wp.array(np.zeros((4, 3), np.float32), dtype=wp.vec3, copy=False)
    assert view.shape == (4,) and view.dtype is wp.vec3


def test_bad_vector_shapes_and_unaligned_strides_are_named():
    """A NumPy array whose trailing dimension is not the vector's, or whose elements are misaligned (a field
    of a packed record), is a clear error naming the argument."""
    out = np.zeros(4, dtype=np.float32)
    with pytest.raises(ValueError, match=r"argument 'v': a NumPy array of shape \(4, 2\) does not hold vec3f"):
        wp.launch(add_vec, dim=4, inputs=[np.zeros((4, 2), np.float32), out])
    with pytest.raises(ValueError, match="argument 'v': the vec3f components of the NumPy array are not contiguous"):
        wp.launch(add_vec, dim=4, inputs=[np.zeros((3, 4), np.float32).T, out])
    packed = np.zeros(4, dtype=np.dtype([("tag", "u1"), ("x", "<f4")]))["x"]
    with pytest.raises(ValueError, match="argument 'x'.* not (aligned|whole)"):
        wp.launch(double, dim=4, inputs=[packed, out])
    reversed_view = np.arange(4, dtype=np.float32)[::-1]  # negative strides of the array dimension are fine
    wp.launch(double, dim=4, inputs=[reversed_view, out])
    np.testing.assert_array_equal(out, [6.0, 4.0, 2.0, 0.0])


class CudaOnly:
    """An object exporting only __cuda_array_interface__ (as a CuPy array does)."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1 << 20, False), "version": 3,
                                "strides": None, "stream": None}


@pytest.mark.skipif(wp.is_cuda_available(), reason="checks the message on a machine without CUDA")
def test_cuda_array_interface_without_cuda_is_a_clear_error():
    """A CUDA array where no CUDA device exists: a DeviceError naming the argument, never a crash."""
    with pytest.raises(wp.DeviceError, match="argument 'x': .*no CUDA device"):
        wp.launch(double, dim=4, inputs=[CudaOnly(), np.zeros(4, np.float32)])
    with pytest.raises(wp.DeviceError, match="no CUDA device"):
        wp.array(CudaOnly())


class StreamedMemory(CpuBackend):
    """A device kind whose memory other frameworks reach through __cuda_array_interface__ (CPU memory in this
    test, so it runs anywhere), with a current stream; it records the streams it is asked to wait for."""

    name = "streamed"
    cuda_array_interface = True
    dlpack_device_type = 2  # kDLCUDA

    def __init__(self) -> None:
        self.waits: list = []

    def current_stream(self) -> int:
        return 7

    def wait_stream(self, waiter, producer) -> None:
        self.waits.append((waiter, producer))


@pytest.fixture
def streamed(monkeypatch):
    monkeypatch.setattr(device_module, "_kinds", dict(device_module._kinds))
    monkeypatch.setattr(device_module, "_devices", dict(device_module._devices))
    device_module.register_backend("streamed", lambda ordinal: StreamedMemory(), lambda: 1)
    return wp.get_device("streamed")


class Producer:
    """A foreign CUDA array (as CuPy or Numba export it), with the stream its data is written on."""

    def __init__(self, values: np.ndarray, stream) -> None:
        self.values = values
        self.__cuda_array_interface__ = {"shape": values.shape, "typestr": values.dtype.str, "version": 3,
                                         "data": (values.ctypes.data, False), "strides": None, "stream": stream}


def test_cuda_array_interface_both_ways(streamed):
    """Through __cuda_array_interface__ (the CuPy / Numba path, run here on a stand-in device): a foreign array
    is viewed in place, its stream waited for, passed straight to launches; our arrays export the interface
    with their device's current stream, and DLPack says kDLCUDA."""
    values = np.arange(4, dtype=np.float32)
    a = wp.array(Producer(values, stream=5), device=streamed)
    assert a.ptr == values.ctypes.data and a.device is streamed and streamed.backend.waits == [(None, 5)]
    out = wp.zeros(4, dtype=float, device=streamed)
    wp.launch(double, dim=4, inputs=[Producer(values, stream=None), out], device=streamed)
    np.testing.assert_array_equal(out.numpy(), 2.0 * values)
    iface = out.__cuda_array_interface__
    assert iface["data"] == (out.ptr, False) and iface["shape"] == (4,) and iface["stream"] == 7
    assert out.__dlpack_device__() == (2, 0)
    assert not hasattr(wp.zeros(2, dtype=float), "__cuda_array_interface__")


@pytest.mark.skipif(not wp.is_cuda_available(), reason="CuPy and Numba interop needs a CUDA device (the path is "
                                                       "tested on a stand-in device above)")
def test_cupy_and_numba_cross_both_ways():
    """CuPy and Numba arrays become arrays in place, and ours become theirs."""
    cp = pytest.importorskip("cupy")
    numba_cuda = pytest.importorskip("numba.cuda")
    x = cp.arange(8, dtype=cp.float32)
    a = wp.array(x, device="cuda:0")
    assert a.ptr == x.data.ptr
    y = cp.asarray(a)
    assert y.data.ptr == a.ptr
    z = numba_cuda.as_cuda_array(a)
    assert z.__cuda_array_interface__["data"][0] == a.ptr


@wp.kernel
def scaled_range(out: wp.array(dtype=float), scale: float):
    i = wp.tid()
    out[i] = float(i) * scale


def test_recorded_launch_commands():
    """wp.launch(record_cmd=True) returns a Launch that runs later, with parameters (by index or name) and the
    grid changed in between; a wrong name or index is named."""
    out = wp.zeros(6)
    cmd = wp.launch(scaled_range, dim=3, inputs=[out, 2.0], record_cmd=True)
    assert isinstance(cmd, wp.Launch) and out.numpy().tolist() == [0.0] * 6
    cmd.launch()
    assert out.numpy().tolist() == [0.0, 2.0, 4.0, 0.0, 0.0, 0.0]
    cmd.set_dim(6)
    cmd.set_param_by_name("scale", 1.0)
    cmd.launch()
    assert out.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(wp.LaunchError, match="no parameter 'nope'"):
        cmd.set_param_by_name("nope", 1.0)
    with pytest.raises(IndexError):
        cmd.set_param_at_index(5, 1.0)


def test_a_modules_cpu_serial_threshold_reaches_its_launches():
    """set_module_options({"cpu_serial_threshold": n}) replaces wp.config's for that module's launches on the
    CPU (deterministic mode still runs every launch serially); results are unchanged."""
    @wp.kernel(module="unique", module_options={"cpu_serial_threshold": 16})
    def heavy(out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = float(i) * 2.0

    out = wp.zeros(100, dtype=float)
    wp.launch(heavy, dim=100, inputs=[out])
    np.testing.assert_array_equal(out.numpy(), np.arange(100) * 2.0)
    lm = heavy.module.load(wp.get_device("cpu"))
    assert lm.kernel(heavy.key).serial_threshold == 16 and lm.kernel(heavy.key).header(100, (100,))[2] == 16
    with pytest.raises(ValueError, match="cpu_serial_threshold"):
        wp.set_module_options({"cpu_serial_threshold": -1}, module=heavy.module.name)


def test_tiled_kernels_use_the_pool_from_two_blocks():
    """A tiled kernel's launch of two blocks or more runs on the thread pool (each block is a whole tile
    computation), where plain kernels keep wp.config's threshold; a module's own threshold applies to both."""
    @wp.kernel(module="unique")
    def tiled(a: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        wp.tile_store(out, wp.tile_load(a, shape=4, offset=i * 4) * 2.0, offset=i * 4)

    @wp.kernel(module="unique")
    def plain(out: wp.array(dtype=float)):
        out[wp.tid()] = 1.0

    a, out = wp.array(np.arange(32, dtype=np.float32)), wp.zeros(32, dtype=float)
    wp.launch_tiled(tiled, dim=8, inputs=[a, out], block_dim=4)
    np.testing.assert_array_equal(out.numpy(), np.arange(32) * 2.0)
    wp.launch(plain, dim=1, inputs=[out])
    cpu = wp.get_device("cpu")
    assert tiled.module.load(cpu).kernel(tiled.key).header(8, (8,))[2] == 2
    assert plain.module.load(cpu).kernel(plain.key).header(8, (8,))[2] == wp.config.cpu_serial_threshold

    @wp.kernel(module="unique", module_options={"cpu_serial_threshold": 64})
    def tiled_own(a: wp.array(dtype=float), out: wp.array(dtype=float)):
        wp.tile_store(out, wp.tile_load(a, shape=4))

    wp.launch_tiled(tiled_own, dim=1, inputs=[a, out], block_dim=4)
    assert tiled_own.module.load(cpu).kernel(tiled_own.key).header(8, (8,))[2] == 64


@wp.kernel
def _fill_scaled(out: wp.array(dtype=float), s: float, v: wp.vec2):
    i = wp.tid()
    out[i] = float(i) * s + v[1]


def test_launch_made_directly_starts_at_zero():
    """wp.Launch(kernel, device), as Warp: parameters start at zero (arrays unset), the grid empty; set them
    and launch; adjoint=True gives adjoint parameters to set as well."""
    out = wp.full(6, -1.0)
    cmd = wp.Launch(_fill_scaled, "cpu")
    cmd.set_param_by_name("out", out)
    cmd.launch()  # an empty grid runs nothing
    np.testing.assert_array_equal(out.numpy(), np.full(6, -1.0))
    cmd.set_dim(4)
    cmd.launch()
    np.testing.assert_array_equal(out.numpy(), [0.0, 0.0, 0.0, 0.0, -1.0, -1.0])
    cmd.set_param_by_name("s", 2.0)
    cmd.set_param_by_name("v", wp.vec2(0.0, 1.0))
    cmd.launch()
    np.testing.assert_array_equal(out.numpy(), [1.0, 3.0, 5.0, 7.0, -1.0, -1.0])
    x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True)
    y = wp.zeros(4, requires_grad=True)
    adj = wp.Launch(scaled_range_adjoint_source, "cpu", adjoint=True)
    adj.set_param_by_name("x", x)
    adj.set_param_by_name("y", y)
    adj.set_param_by_name("y", wp.ones(4), adjoint=True)
    adj.set_param_by_name("x", x.grad, adjoint=True)
    adj.set_dim(4)
    adj.launch()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0, 8.0])
    with pytest.raises(wp.LaunchError, match="expects a @wp.kernel"):
        wp.Launch(print, "cpu")


@wp.kernel
def scaled_range_adjoint_source(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def _write_rotation_parts(q: wp.quat, t: wp.transform, out: wp.array(dtype=float)):
    out[0] = q[3]
    out[1] = t[6]


def test_quaternion_and_transform_parameters_of_a_launch_made_directly_start_at_zero():
    """A Launch's quaternion and transform parameters start at zero, as its other parameters (not identity)."""
    out = wp.full(2, -1.0)
    cmd = wp.Launch(_write_rotation_parts, "cpu")
    cmd.set_param_by_name("out", out)
    cmd.set_dim(1)
    cmd.launch()
    assert out.numpy().tolist() == [0.0, 0.0]
