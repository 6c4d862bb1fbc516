"""Memory other frameworks own: what an array protocol says about a foreign object, and whether it fits.

`describe(obj, device)` reads the protocol an object speaks (our own arrays aside) into a `Buffer`: its
address, shape, byte strides, scalar type, device, read-only flag, and whatever keeps the memory alive.
In order of preference: a reader registered for the object's framework (PyTorch tensors, read from their
attributes), `__cuda_array_interface__`, `__array_interface__`, `__dlpack__`, and `__array__` (which may
return a temporary copy: `Buffer.copied` says so). `fit` checks a buffer against a dtype (scalar type,
trailing component dimensions, strides, alignment, dimension count) and gives the shape and strides an
array of that dtype has over it. Nothing here copies data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dlpack
from . import types as T
from .device import Device, get_device
from .errors import DeviceError

MAX_DIMS = 4


class Buffer:
    """A block of memory another framework exports (see the module docstring). `strides` are in bytes and
    cover every dimension, component dimensions included; `bf16_bits` marks a protocol without a
    bfloat16 type (NumPy's typestr), whose uint16 data may stand for bfloat16 bits."""

    __slots__ = ("ptr", "shape", "strides", "scalar", "device", "readonly", "owner", "copied", "requires_grad",
                 "bf16_bits", "source")

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], scalar: type[T.ScalarType],
                 device: Device, readonly: bool, owner: Any, source: str, *, copied: bool = False,
                 requires_grad: bool = False, bf16_bits: bool = False) -> None:
        self.ptr, self.shape, self.strides, self.scalar, self.device = ptr, shape, strides, scalar, device
        self.readonly, self.owner, self.source, self.copied = readonly, owner, source, copied
        self.requires_grad, self.bf16_bits = requires_grad, bf16_bits


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides of `shape`."""
    strides, acc = [], itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


# -- readers ----------------------------------------------------------------------------------------

_NP_SCALARS = {st.np_dtype: st for st in T.scalar_types if st is not T.bfloat16}
_typestr_scalars: dict[str, Any] = {}


def _scalar_of_typestr(typestr: str, descr: Any = None) -> type[T.ScalarType]:
    st = _typestr_scalars.get(typestr)
    if st is None:
        dt = np.dtype(descr if descr is not None and typestr.startswith("|V") else typestr)
        st = _NP_SCALARS.get(dt)
        if st is None:
            raise TypeError(f"data of type {dt} ({'complex ' if dt.kind == 'c' else ''}typestr {typestr!r}) has no "
                            "loomwork scalar type" + (" (byte order differs from the machine's)"
                                                      if dt.byteorder not in "=|" else ""))
        _typestr_scalars[typestr] = st
    return st


def _host() -> Device:
    return get_device("cpu")


def read_ndarray(a: np.ndarray, device: Device | None) -> Buffer:
    """A NumPy array's memory (read-only when it is not writeable, e.g. `np.frombuffer(bytes)`)."""
    st = _NP_SCALARS.get(a.dtype)
    if st is None:
        _scalar_of_typestr(a.dtype.str)  # raises, naming the dtype
    return Buffer(a.ctypes.data, a.shape, a.strides, st, _host(), not a.flags.writeable, a, "NumPy array",
                  bf16_bits=True)


def _read_interface(obj: Any, iface: dict, device: Device, source: str) -> Buffer:
    if iface.get("mask") is not None:
        raise TypeError(f"{source}: masked arrays are not supported")
    data = iface.get("data")
    if data is None or not isinstance(data, tuple):  # memory given through the buffer protocol
        return read_ndarray(np.asarray(obj), device)
    st = _scalar_of_typestr(iface["typestr"], iface.get("descr"))
    shape = tuple(iface["shape"])
    strides = iface.get("strides")
    strides = tuple(strides) if strides is not None else contiguous_strides(shape, st.size)
    return Buffer(int(data[0] or 0) + int(iface.get("offset", 0)), shape, strides, st, device, bool(data[1]), obj,
                  source, bf16_bits=True)


def read_array_interface(obj: Any, device: Device | None) -> Buffer:
    """An object exporting `__array_interface__` (host memory)."""
    return _read_interface(obj, obj.__array_interface__, _host(), f"{type(obj).__name__} (__array_interface__)")


def read_cuda_array_interface(obj: Any, device: Device | None) -> Buffer:
    """An object exporting `__cuda_array_interface__`: memory of the CUDA device asked for (or the current
    CUDA device). Its `stream` (version 3) is waited for before our work uses the memory."""
    iface = obj.__cuda_array_interface__
    if device is None or not device.backend.cuda_array_interface:
        device = get_device("cuda")
    stream = iface.get("stream")
    if stream is not None:
        device.backend.wait_stream(None, int(stream))
    return _read_interface(obj, iface, device, f"{type(obj).__name__} (__cuda_array_interface__)")


def dlpack_device(dev_type: int, dev_id: int) -> Device:
    """Our device for a DLPack (device type, id) pair."""
    kind = dlpack.DEVICE_KINDS.get(int(dev_type))
    if kind is None:
        raise DeviceError(f"DLPack memory on a {dlpack.device_name(dev_type)} device: loomwork reads CPU and "
                          "CUDA memory")
    return get_device(kind if kind == "cpu" else f"{kind}:{int(dev_id)}")


def buffer_of_capsule(imported: dlpack.Imported, source: str) -> Buffer:
    """The buffer a consumed DLPack capsule describes (element strides made byte strides)."""
    size = imported.scalar.size
    strides = (tuple(s * size for s in imported.strides) if imported.strides is not None
               else contiguous_strides(imported.shape, size))
    return Buffer(imported.ptr, imported.shape, strides, imported.scalar,
                  dlpack_device(imported.device_type, imported.device_id), imported.readonly, imported.owner, source)


def dlpack_capsule(obj: Any) -> Any:
    """Ask a DLPack producer for a capsule, ordered after its work on our current stream of its device."""
    dev = dlpack_device(*obj.__dlpack_device__())
    stream = dev.backend.current_stream()
    try:
        return obj.__dlpack__(stream=stream, max_version=dlpack.VERSION)
    except TypeError:  # a producer older than DLPack 1.0's protocol
        return obj.__dlpack__(stream=stream)


def read_dlpack(obj: Any, device: Device | None) -> Buffer:
    """An object exporting `__dlpack__` (JAX arrays, CuPy...), or a DLPack capsule."""
    capsule = obj if dlpack.capsule_state(obj) is not None else dlpack_capsule(obj)
    source = "DLPack capsule" if capsule is obj else f"{type(obj).__name__} (__dlpack__)"
    return buffer_of_capsule(dlpack.import_capsule(capsule), source)


def read_array_method(obj: Any, device: Device | None) -> Buffer:
    """An object with only `__array__`: the array it returns, which may be a temporary copy. Asking
    twice tells: a copy has a new address each time (both are alive while compared)."""
    a = np.asarray(obj)
    b = np.asarray(obj)
    buf = read_ndarray(a, device)
    buf.copied = a.size > 0 and b.ctypes.data != buf.ptr
    buf.source = f"{type(obj).__name__} (__array__)"
    return buf


def _read_any(obj: Any, device: Device | None) -> Buffer:
    """Whichever protocol the object answers (properties may refuse at run time, so each is tried)."""
    if getattr(obj, "__cuda_array_interface__", None) is not None:
        return read_cuda_array_interface(obj, device)
    if getattr(obj, "__array_interface__", None) is not None:
        return read_array_interface(obj, device)
    if hasattr(obj, "__dlpack__") or dlpack.capsule_state(obj) is not None:
        return read_dlpack(obj, device)
    if hasattr(obj, "__array__"):
        return read_array_method(obj, device)
    raise TypeError(f"a {type(obj).__name__} is not an array (it has no __array_interface__, "
                    "__cuda_array_interface__, __dlpack__ or __array__)")


Reader = Callable[[Any, "Device | None"], Buffer]
#: readers a framework's bridge registers: top-level module name -> (class -> its reader, or None)
_framework_readers: dict[str, Callable[[type], Reader | None]] = {}
_readers: dict[type, Reader] = {np.ndarray: read_ndarray}


def register_reader(module: str, reader_for: Callable[[type], Reader | None]) -> None:
    """Let the bridge of framework `module` (e.g. "torch") read its objects its own, faster way:
    `reader_for(cls)` gives the reader of objects of class `cls` (None: the generic protocols)."""
    _framework_readers[module] = reader_for
    _readers.clear()
    _readers[np.ndarray] = read_ndarray


def reader(cls: type) -> Reader:
    """How objects of class `cls` are read (chosen once per class)."""
    found = _readers.get(cls)
    if found is None:
        pick = _framework_readers.get(cls.__module__.partition(".")[0])
        found = (pick(cls) if pick is not None else None) or (
            read_ndarray if issubclass(cls, np.ndarray) else _read_any)
        _readers[cls] = found
    return found


def describe(obj: Any, device: Device | None = None) -> Buffer:
    """The memory of a foreign array object; `device` is where it is wanted (CUDA array interfaces do not
    say which device their pointer is on)."""
    return reader(obj.__class__)(obj, device)


def is_foreign_array(obj: Any) -> bool:
    """Whether `obj` speaks an array protocol (without reading it)."""
    return (obj.__class__ in _readers or hasattr(obj, "__array_interface__") or hasattr(obj, "__dlpack__")
            or hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__array__")
            or dlpack.capsule_state(obj) is not None)


# -- fitting a buffer to a dtype ---------------------------------------------------------------------------

def fit(buf: Buffer, dtype: Any, what: str, expected: str | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shape and byte strides of an array of `dtype` over `buf`: component dimensions of a vector or
    matrix dtype are the buffer's trailing dimensions and must be contiguous; the data must be aligned to
    the scalar size. Raises naming `what` (e.g. "kernel 'k' argument 'x'", which `expected` describes)
    when the buffer does not fit."""
    st = T.elem_scalar(dtype)
    if buf.scalar is not st and not (st is T.bfloat16 and buf.bf16_bits and buf.scalar is T.uint16):
        hint = "NumPy holds bfloat16 as uint16 bits" if st is T.bfloat16 else "convert it first"
        raise TypeError(f"{what} expects {expected or T.type_name(st) + ' data'}, got a {buf.source} of "
                        f"{T.type_name(buf.scalar)} ({hint})")
    shape, strides, size = buf.shape, buf.strides, st.size
    if T.is_composite(dtype):
        inner = dtype._shape_
        k = len(inner)
        if len(shape) < k or tuple(shape[len(shape) - k:]) != inner:
            raise ValueError(f"{what}: a {buf.source} of shape {tuple(shape)} does not hold {T.type_name(dtype)} "
                             f"values (its trailing dimensions must be {inner})")
        if tuple(strides[len(shape) - k:]) != contiguous_strides(inner, size):
            raise ValueError(f"{what}: the {T.type_name(dtype)} components of the {buf.source} are not contiguous "
                             f"(strides {tuple(strides)} bytes); make it contiguous first")
        shape, strides = tuple(shape[:len(shape) - k]), tuple(strides[:len(strides) - k])
    if not shape:  # a 0-d array, or a single vector: one element
        shape, strides = (1,), (size,)
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{what}: arrays have 1 to {MAX_DIMS} dimensions, the {buf.source} has shape "
                         f"{tuple(buf.shape)}")
    if buf.ptr % size or any(s % size for s in strides):
        raise ValueError(f"{what}: the {buf.source} is not aligned to its {size}-byte {T.type_name(st)} elements "
                         f"(address {buf.ptr:#x}, strides {tuple(buf.strides)} bytes)")
    return tuple(shape), tuple(strides)
