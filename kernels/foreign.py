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
from operator import itemgetter
from typing import Any

import numpy as np

from . import dlpack
from . import types as T
from .device import Device, get_device
from .errors import DeviceError, LoomworkError

MAX_DIMS = 4


class DLPackError(LoomworkError, TypeError, RuntimeError):
    """DLPack data whose element type cannot be read as the dtype asked for (Warp raises a RuntimeError)."""


class DLPackDeviceError(DeviceError, TypeError):
    """DLPack memory on a device kind loomwork does not run on (Warp raises a TypeError)."""


class Buffer(tuple):
    """A block of memory another framework exports (see the module docstring); made with `buffer()`.
    `strides` are in bytes and cover every dimension, component dimensions included; `copied` marks a
    temporary copy (from `__array__`); `bf16_bits` a protocol without a bfloat16 type (NumPy's typestr),
    whose uint16 data may stand for bfloat16 bits. A tuple, since bridges make one per call."""

    __slots__ = ()
    ptr: int = property(itemgetter(0))
    shape: tuple[int, ...] = property(itemgetter(1))
    strides: tuple[int, ...] = property(itemgetter(2))
    scalar: type[T.ScalarType] = property(itemgetter(3))
    device: Device = property(itemgetter(4))
    readonly: bool = property(itemgetter(5))
    owner: Any = property(itemgetter(6))
    source: str = property(itemgetter(7))
    copied: bool = property(itemgetter(8))
    requires_grad: bool = property(itemgetter(9))
    bf16_bits: bool = property(itemgetter(10))


_new_tuple = tuple.__new__


def buffer(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], scalar: type[T.ScalarType], device: Device,
           readonly: bool, owner: Any, source: str, copied: bool = False, requires_grad: bool = False,
           bf16_bits: bool = False) -> Buffer:
    """A `Buffer` (see its docstring)."""
    return _new_tuple(Buffer, (ptr, shape, strides, scalar, device, readonly, owner, source, copied, requires_grad,
                               bf16_bits))


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides of `shape` (Warp's: a zero extent makes the strides before it zero)."""
    strides, acc = [], itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
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
    return buffer(a.ctypes.data, a.shape, a.strides, st, _host(), not a.flags.writeable, a, "NumPy array",
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
    return buffer(int(data[0] or 0), shape, strides, st, device, bool(data[1]), obj, source, bf16_bits=True)


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


_dl_devices: dict[tuple[int, int], Device] = {}


def dlpack_device(dev_type: int, dev_id: int) -> Device:
    """Our device for a DLPack (device type, id) pair."""
    found = _dl_devices.get((dev_type, dev_id))
    if found is None:
        kind = dlpack.DEVICE_KINDS.get(int(dev_type))
        if kind is None:
            raise DLPackDeviceError(f"Unsupported source device for DLPack: device_type={int(dev_type)}, device_id="
                                    f"{int(dev_id)} ({dlpack.device_name(dev_type)}; loomwork reads CPU and CUDA "
                                    "memory)")
        found = _dl_devices[dev_type, dev_id] = get_device(kind if kind == "cpu" else f"{kind}:{int(dev_id)}")
    return found


def buffer_of_capsule(imported: dlpack.Imported, source: str) -> Buffer:
    """The buffer a consumed DLPack capsule describes (element strides made byte strides)."""
    ptr, shape, strides, st, dev_type, dev_id, readonly, owner = imported
    strides = tuple(map(st.size.__mul__, strides)) if strides is not None else contiguous_strides(shape, st.size)
    return _new_tuple(Buffer, (ptr, shape, strides, st, _dl_devices.get((dev_type, dev_id)) or dlpack_device(
        dev_type, dev_id), readonly, owner, source, False, False, False))


def dlpack_capsule(obj: Any) -> Any:
    """Ask a DLPack producer for a capsule, ordered after its work on our current stream of its device."""
    dev = dlpack_device(*obj.__dlpack_device__())
    stream = dev.backend.current_stream()
    try:
        return obj.__dlpack__(stream=stream, max_version=dlpack.VERSION)
    except TypeError:  # a producer older than DLPack 1.0's protocol
        return obj.__dlpack__(stream=stream)


def read_dlpack(obj: Any, device: Device | None) -> Buffer:
    """An object exporting `__dlpack__` (JAX arrays, CuPy...), or a DLPack capsule. Host memory of a framework
    whose bridge reads its objects directly (NumPy, PyTorch) is read that way: the same zero-copy view without
    a capsule's round trip, and host memory has no streams to order."""
    is_capsule = type(obj).__name__ == "PyCapsule"  # import_capsule checks its name
    if not is_capsule:
        quick = reader(obj.__class__)
        if quick is not _read_any:
            buf = quick(obj, device)
            if buf.device.backend.host_accessible:
                return buf
        if not hasattr(obj, "__dlpack__"):
            raise TypeError(f"a {type(obj).__name__} is not a DLPack producer (it has no __dlpack__ and is no "
                            "capsule)")
    capsule = obj if is_capsule else dlpack_capsule(obj)
    source = "DLPack capsule" if is_capsule else f"{type(obj).__name__} (__dlpack__)"
    return buffer_of_capsule(dlpack.import_capsule(capsule), source)


def read_array_method(obj: Any, device: Device | None) -> Buffer:
    """An object with only `__array__`: the array it returns, which may be a temporary copy. Asking
    twice tells: a copy has a new address each time (both are alive while compared)."""
    a = np.asarray(obj)
    b = np.asarray(obj)
    buf = read_ndarray(a, device)
    return buffer(*buf[:7], f"{type(obj).__name__} (__array__)", a.size > 0 and b.ctypes.data != buf.ptr,
                  bf16_bits=True)


def _read_any(obj: Any, device: Device | None) -> Buffer:
    """Whichever protocol the object answers (properties may refuse at run time, so each is tried); an
    object that offers both interfaces is read through the one of the device asked for."""
    if device is not None and device.backend.host_accessible and not device.backend.cuda_array_interface and \
            getattr(obj, "__array_interface__", None) is not None:
        return read_array_interface(obj, device)
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


def known_reader(cls: type) -> Reader | None:
    """The reader of class `cls` when one was already chosen (None otherwise): the quick question."""
    return _readers.get(cls)


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

_fits: dict[tuple, tuple] = {}  # (dtype, buffer type, shape, strides, bf16 bits) -> fit, minus the address


def fit(buf: Buffer, dtype: Any, what: str, expected: Any = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shape and byte strides of an array of `dtype` over `buf`: component dimensions of a vector or
    matrix dtype are the buffer's trailing dimensions and must be contiguous; the data must be aligned to
    the scalar size. Raises naming `what` (e.g. "kernel 'k' argument 'x'", which `expected` describes)
    when the buffer does not fit. What depends only on the layout is checked once per layout."""
    key = (dtype, buf[3], buf[1], buf[2], buf[10])
    found = _fits.get(key)
    if found is None:
        found = _fit_layout(buf, dtype, what, expected)
        if len(_fits) > 4096:
            _fits.clear()
        _fits[key] = found
    if buf[0] % buf[3].size:
        raise ValueError(f"{what}: the {buf.source} is not aligned to its {buf[3].size}-byte "
                         f"{T.type_name(buf[3])} elements (address {buf[0]:#x})")
    return found


def _fit_layout(buf: Buffer, dtype: Any, what: str, expected: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What `fit` checks of a layout (all but the address)."""
    st = T.elem_scalar(dtype)
    if buf.scalar is not st and not (st is T.bfloat16 and buf.bf16_bits and buf.scalar is T.uint16):
        hint = "NumPy holds bfloat16 as uint16 bits" if st is T.bfloat16 else "convert it first"
        raise TypeError(f"{what} expects {expected or T.type_name(st) + ' data'}, got a {buf.source} of "
                        f"{T.type_name(buf.scalar)} ({hint})")
    shape, strides, size = tuple(buf.shape), tuple(buf.strides), st.size
    if T.is_composite(dtype):
        inner = dtype._shape_
        k = len(inner)
        if len(shape) < k or shape[len(shape) - k:] != inner:
            raise ValueError(f"{what}: a {buf.source} of shape {shape} does not hold {T.type_name(dtype)} values "
                             f"(its trailing dimensions must be {inner})")
        if strides[len(shape) - k:] != contiguous_strides(inner, size):
            raise ValueError(f"{what}: the {T.type_name(dtype)} components of the {buf.source} are not contiguous "
                             f"(strides {strides} bytes); make it contiguous first")
        shape, strides = shape[:len(shape) - k], strides[:len(strides) - k]
    if not shape:  # a 0-d array, or a single vector: one element
        shape, strides = (1,), (size,)
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{what}: arrays have 1 to {MAX_DIMS} dimensions, the {buf.source} has shape "
                         f"{tuple(buf.shape)}")
    if any(s % size for s in strides):
        raise ValueError(f"{what}: the strides of the {buf.source} ({tuple(buf.strides)} bytes) are not whole "
                         f"{size}-byte {T.type_name(st)} elements")
    return shape, strides
