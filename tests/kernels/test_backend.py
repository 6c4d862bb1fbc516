"""The device-backend interface: the CPU backend used directly, and arrays and launches routed through a
second backend registered by the test."""

import ctypes
import itertools
import struct
import threading

import numpy as np
import pytest

import loomwork as wp
from loomwork.kernels import device as device_module
from loomwork.kernels.backend import Backend, BuildOptions, Launcher, Program
from loomwork.kernels.cpu import CpuBackend
from loomwork.utils import array_sum

FILL_SOURCE = r"""
#include "loomwork.h"
struct fill_args { float* out; float value; };
LW_EXPORT void fill_cpu(const void* blob, long long begin, long long end) {
    fill_args a;
    __builtin_memcpy(&a, (const char*)blob + sizeof(lw::launch_t), sizeof(a));
    for (long long i = begin; i < end; ++i) a.out[i] = a.value + (float)i;
}
"""


@wp.kernel
def scale(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] = x[i] * s


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.struct
class Holder:
    values: wp.array(dtype=float)


@wp.kernel
def first_of(h: Holder, out: wp.array(dtype=float)):
    out[0] = h.values[0]


def _bytes_at(ptr: int, n: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=np.uint8)


def test_cpu_backend_memory():
    """The CPU backend allocates (zeroed or not), copies and zeroes host memory, small and large."""
    backend = wp.get_device("cpu").backend
    assert isinstance(backend, Backend) and backend.name == "cpu" and backend.host_accessible
    for n in (64, 3 << 20):  # below and above the size zeroed on the thread pool
        ptr, owner = backend.allocate(n, zero=True)
        assert owner is not None and not _bytes_at(ptr, n).any()
        src_ptr, src_owner = backend.allocate(n, zero=False)
        pattern = (np.arange(n) % 251 + 1).astype(np.uint8)
        _bytes_at(src_ptr, n)[:] = pattern
        backend.copy(ptr, src_ptr, n)
        np.testing.assert_array_equal(_bytes_at(ptr, n), pattern)
        backend.zero(ptr + 1, n - 2)
        got = _bytes_at(ptr, n)
        assert got[0] == pattern[0] and got[-1] == pattern[-1] and not got[1:-1].any()
    assert backend.synchronize() is None


def test_cpu_backend_compiles_loads_and_launches(tmp_path):
    """compile -> load -> kernel launcher -> header + packed arguments -> launch, through the interface."""
    backend = wp.get_device("cpu").backend
    options = BuildOptions(debug=False, fast_math=False, cache_dir=str(tmp_path), verbose=False)
    program = backend.load(backend.compile(FILL_SOURCE, "fill", options, "a hand-written module"))
    assert isinstance(program, Program)
    launcher = program.kernel("fill")
    assert isinstance(launcher, Launcher)
    n = 100_000  # above the serial threshold: runs on the thread pool
    ptr, owner = backend.allocate(4 * n, zero=True)
    blob = struct.pack("<" + backend.launch_format + "Qf4x", *launcher.header(n, (n,)), ptr, 0.5)
    launcher.launch(blob)
    assert ptr % 64 == 0 and owner is not None  # cache-line aligned (JAX views such memory without a copy)
    np.testing.assert_array_equal(_bytes_at(ptr, 4 * n).view(np.float32), np.arange(n, dtype=np.float32) + 0.5)
    # lw::launch_t: size, ndim, dims, pad, error record (none here)
    assert launcher.header(6, (2, 3))[-8:] == (6, 2, 2, 3, 1, 1, 0, 0)
    assert launcher.header(6, (6,), 1234)[-8:] == (6, 1, 6, 1, 1, 1, 0, 1234)


def test_cpu_backend_checksums_memory_and_keeps_a_fault_slot_per_thread():
    """digest() changes with any one byte and with two words swapped, not with a restored state; each thread
    has its own fault slot, and take() clears it."""
    backend = wp.get_device("cpu").backend
    data = (np.arange(100_003) % 251).astype(np.uint8)  # more than one block, and bytes past the last word
    ptr, words = data.ctypes.data, data[:16].view(np.uint64)
    before = backend.digest(ptr, data.size)

    def flip_last_byte() -> None:
        data[-1] ^= 1

    def swap_two_words() -> None:
        words[:] = words[::-1].copy()

    for change in (flip_last_byte, swap_two_words):
        saved = data.copy()
        change()
        assert backend.digest(ptr, data.size) != before, change.__name__
        data[...] = saved
        assert backend.digest(ptr, data.size) == before
    slots = []
    thread = threading.Thread(target=lambda: slots.append(backend.fault_slot()))
    thread.start()
    thread.join()
    mine = backend.fault_slot()
    assert mine is backend.fault_slot() and slots[0] is not mine and mine.take() is None


def test_cpu_device_keeps_its_public_properties():
    """Device("cpu") still answers alias, ordinal, is_cpu, is_cuda, name, arch, == and hash."""
    cpu = wp.get_device("cpu")
    assert (cpu.alias, cpu.ordinal, cpu.is_cpu, cpu.is_cuda, cpu.arch) == ("cpu", -1, True, False, 0)
    assert cpu == "cpu" and cpu != "cuda:0" and hash(cpu) == hash("cpu") and isinstance(cpu.name, str) and cpu.name


class RecordingProgram(Program):
    """Wraps a CPU program: every launch of one of its kernels is recorded."""

    def __init__(self, inner: Program, calls: list) -> None:
        self.inner, self.calls = inner, calls

    def kernel(self, name: str, serial_threshold: int | None = None) -> Launcher:
        entry = self.inner.kernel(name, serial_threshold)

        def launch(blob: bytes) -> None:
            self.calls.append(("launch", name))
            entry.launch(blob)

        return Launcher(entry.header, launch)


class RecordingBackend(CpuBackend):
    """A second backend kind on CPU memory that records what loomwork asks of it."""

    name = "rec"

    def __init__(self) -> None:
        self.calls: list = []

    def allocate(self, nbytes, *, zero):
        self.calls.append(("allocate", nbytes, zero))
        return super().allocate(nbytes, zero=zero)

    def copy(self, dst, src, nbytes):
        self.calls.append(("copy", nbytes))
        super().copy(dst, src, nbytes)

    def zero(self, ptr, nbytes):
        self.calls.append(("zero", nbytes))
        super().zero(ptr, nbytes)

    def compile(self, source, name, options, what):
        self.calls.append(("compile", name))
        return super().compile(source, name, options, what)

    def load(self, artifact):
        self.calls.append(("load",))
        return RecordingProgram(super().load(artifact), self.calls)

    def synchronize(self):
        self.calls.append(("synchronize",))


class DeviceMemoryBackend(RecordingBackend):
    """The same, claiming that the host cannot read its memory (as a GPU's): it goes through upload/download."""

    name = "devmem"
    host_accessible = False

    def upload(self, dst, host, nbytes):
        self.calls.append(("upload", nbytes))
        CpuBackend.copy(self, dst, host, nbytes)

    def download(self, host, src, nbytes):
        self.calls.append(("download", nbytes))
        CpuBackend.copy(self, host, src, nbytes)


_kind_numbers = itertools.count()


@pytest.fixture
def register(monkeypatch):
    """Registers a backend class under a fresh kind name (modules stay loaded per device alias) and returns
    that kind's device; the registry and device table are restored afterwards."""
    monkeypatch.setattr(device_module, "_kinds", dict(device_module._kinds))
    monkeypatch.setattr(device_module, "_devices", dict(device_module._devices))

    def add(cls: type) -> wp.kernels.device.Device:
        kind = f"{cls.name}{next(_kind_numbers)}"
        device_module.register_backend(kind, lambda ordinal: cls(), lambda: 1)
        return wp.get_device(kind)

    return add


def test_a_registered_backend_serves_arrays(register):
    """Arrays on another kind of device allocate, copy and zero through its backend, never testing is_cpu."""
    dev = register(RecordingBackend)
    kind = str(dev)[:-2]
    assert str(dev) == f"{kind}:0" and dev.ordinal == 0 and not dev.is_cpu and dev is wp.get_device(f"{kind}:0")
    calls = dev.backend.calls
    a = wp.zeros(8, dtype=float, device=dev)
    assert calls == [("allocate", 32, True)] and a.device is dev
    a.fill_(3.0)
    b = wp.empty_like(a)
    wp.copy(b, a)
    np.testing.assert_array_equal(b.numpy(), np.full(8, 3.0, np.float32))
    a.zero_()
    assert calls[1:] == [("allocate", 32, False), ("copy", 32), ("zero", 32)]
    assert not a.numpy().any()
    with pytest.raises(wp.DeviceError, match=f"'{kind}:1' is not available: this machine has 1 {kind} device"):
        wp.get_device(f"{kind}:1")
    assert dev in wp.get_devices()


def test_a_registered_backend_compiles_loads_and_launches(register):
    """wp.launch on another device kind compiles, loads and launches through its backend; a CPU array
    passed to it is a DeviceError naming the argument."""
    dev = register(RecordingBackend)
    calls = dev.backend.calls
    x = wp.array(np.arange(6, dtype=np.float32), device=dev)
    wp.launch(scale, dim=6, inputs=[x, 2.0], device=dev)
    np.testing.assert_array_equal(x.numpy(), 2.0 * np.arange(6, dtype=np.float32))
    kinds = [c[0] for c in calls]
    assert kinds.count("compile") == 1 and kinds.count("load") == 1 and ("launch", scale.cname) in calls
    wp.launch(scale, dim=6, inputs=[x, 2.0], device=dev)
    assert [c[0] for c in calls].count("compile") == 1 and calls.count(("launch", scale.cname)) == 2
    with pytest.raises(wp.DeviceError, match=f"argument 'x': array is on cpu, launch is on {dev}"):
        wp.launch(scale, dim=6, inputs=[wp.zeros(6, dtype=float), 2.0], device=dev)
    wp.synchronize_device(dev)
    wp.synchronize()
    assert calls[-2:] == [("synchronize",), ("synchronize",)]


def test_a_registered_backend_runs_adjoints(register):
    """Tape.backward on another device kind builds and launches the adjoints through its backend."""
    dev = register(RecordingBackend)
    calls = dev.backend.calls
    x = wp.array(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True, device=dev)
    y = wp.zeros(3, dtype=float, requires_grad=True, device=dev)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x, y], device=dev)
    tape.backward(grads={y: np.ones(3, dtype=np.float32)})
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    assert [c[0] for c in calls].count("compile") == 2 and ("launch", f"{square.cname}_adj") in calls


def test_host_access_is_asked_of_the_backend(register):
    """Where the backend says the host cannot read its memory, NumPy protocols, host arrays in launches,
    structs and the utilities refuse clearly; allocation, copies, zeroing and launches still work, and
    `numpy()`, element access and fill_ go through the backend's upload and download."""
    dev = register(DeviceMemoryBackend)
    a = wp.zeros(4, dtype=float, device=dev)
    b = wp.empty(4, dtype=float, device=dev)
    wp.copy(b, a)
    b.zero_()
    wp.launch(scale, dim=4, inputs=[b, 2.0], device=dev)
    assert [c[0] for c in dev.backend.calls].count("launch") == 1
    with pytest.raises(wp.DeviceError, match=f"the array is in the memory of {dev}, which the host cannot read"):
        np.asarray(a.__array_interface__)
    a.fill_(1.5)  # no native fill: through the host (a download, then an upload)
    b[2] = 7.0
    np.testing.assert_array_equal(a.numpy(), np.full(4, 1.5, np.float32))
    np.testing.assert_array_equal(b.numpy(), [0.0, 0.0, 7.0, 0.0])
    assert b[2] == 7.0 and a.list() == [1.5] * 4
    kinds = [c[0] for c in dev.backend.calls]
    assert "download" in kinds and "upload" in kinds
    c = wp.array(np.arange(4, dtype=np.float32), device=dev)  # host data uploaded
    np.testing.assert_array_equal(c.to("cpu").numpy(), np.arange(4, dtype=np.float32))
    with pytest.raises(wp.DeviceError, match=f"argument 'x': a ndarray in host memory was passed to a launch on {dev}"):
        wp.launch(scale, dim=4, inputs=[np.zeros(4, np.float32), 2.0], device=dev)
    # library routines run on host copies of device memory, the arrays they write copied back
    assert array_sum(a) == 6.0 and array_sum(wp.array(np.ones((2, 3), np.float32), device=dev), axis=1).device == dev
    keys = wp.array(np.array([3, 1, 2, 0], np.int32), device=dev)
    vals = wp.array(np.arange(4, dtype=np.int32), device=dev)
    out = wp.zeros(1, dtype=float, device=dev)
    assert array_sum(a, out=out) is out and out.numpy()[0] == 6.0
    wp.utils.radix_sort_pairs(keys, vals, 4)
    assert keys.numpy().tolist() == [0, 1, 2, 3] and vals.numpy().tolist() == [3, 1, 2, 0]
    wp.config.verify_fp = True  # checked through a read-back of the device memory
    try:
        with pytest.raises(wp.KernelRuntimeError, match="array 'x' holds a NaN or an infinity before the launch"):
            wp.launch(scale, dim=4, inputs=[wp.array(np.full(4, np.nan, np.float32), device=dev), 2.0], device=dev)
    finally:
        wp.config.verify_fp = False
    h = Holder(values=a)  # structs hold device arrays; a launch elsewhere names the field
    with pytest.raises(wp.DeviceError, match=f"argument 'h': field 'values' is an array on {dev}, launch is on cpu"):
        wp.launch(first_of, dim=1, inputs=[h, wp.zeros(1, dtype=float, device="cpu")], device="cpu")


@wp.kernel
def count_down(x: wp.array(dtype=float), n: wp.array(dtype=wp.int32)):
    x[0] = x[0] * 2.0
    n[0] = n[0] - 1


def test_assign_on_device_memory_reads_its_source_when_it_runs(register):
    """`assign` between arrays the host cannot read, inside a graph capture, copies the values the source has
    when the graph runs (a same-layout assign is a device copy; another dtype goes through the host then)."""
    dev = register(DeviceMemoryBackend)
    a, b = wp.zeros(3, dtype=float, device=dev), wp.zeros(3, dtype=float, device=dev)
    i = wp.zeros(3, dtype=wp.int32, device=dev)
    with wp.ScopedCapture(dev) as capture:
        a.assign(b)
        i.assign(wp.array(np.array([1, 2, 3], np.int32)))
    b.fill_(4.0)
    wp.capture_launch(capture.graph)
    assert a.numpy().tolist() == [4.0] * 3 and i.numpy().tolist() == [1, 2, 3]
    h = wp.zeros(3, dtype=wp.float64)
    h.assign(b)  # device memory into host memory of another dtype
    assert h.numpy().tolist() == [4.0] * 3


def test_conditionals_read_device_memory_conditions(register):
    """capture_while / capture_if on a device the host cannot read: the condition is downloaded at each
    decision, in a capture's replay too."""
    dev = register(DeviceMemoryBackend)
    x = wp.array(np.ones(1, np.float32), device=dev)
    n = wp.array(np.array([3], np.int32), device=dev)
    wp.capture_while(n, lambda: wp.launch(count_down, 1, inputs=[x, n], device=dev))
    assert x.numpy()[0] == 8.0 and n.numpy()[0] == 0
    with wp.ScopedCapture(dev) as capture:
        wp.capture_while(n, lambda: wp.launch(count_down, 1, inputs=[x, n], device=dev))
        wp.capture_if(n, on_false=lambda: wp.launch(scale, 1, inputs=[x, 0.5], device=dev))
    n.assign(np.array([2], np.int32))
    wp.capture_launch(capture.graph)
    assert x.numpy()[0] == 16.0 and n.numpy()[0] == 0
