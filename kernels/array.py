"""`array`: a typed, strided view of device memory, 1-D to 4-D, and the functions that make one.

An array is a pointer, a shape, byte strides, a dtype and a device, plus whatever keeps the memory
alive (`_owner`). The device's backend allocates, copies and zeroes the memory; where it is host
memory (the CPU: a NumPy buffer) `.numpy()` is a zero-copy view. Arrays also view memory other
frameworks own (anything `foreign.describe` reads: NumPy, PyTorch, JAX, CuPy...), without a copy,
and export theirs through `__array_interface__`, `__cuda_array_interface__` and `__dlpack__`. An
array over read-only memory (`readonly`) refuses every write.
The same class spelled without data (`wp.array(dtype=float, ndim=2)`, `wp.array2d[float]`) is the
annotation of a kernel parameter.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import struct
import typing
import weakref
from typing import Any

import numpy as np

from . import dlpack, foreign
from . import types as T
from .device import Device, get_device
from .errors import CopyError, DeviceError, ShapeError
from .extensions import registry
from .foreign import MAX_DIMS, contiguous_strides
from .memory import tracker
from .stream import TIMING_MEMCPY, TIMING_MEMSET, capturing_graph, submit


class ArrayDesc(ctypes.Structure):
    """What a kernel receives for an array argument; mirrors `lw::array_t<T>` in the native header. Its
    dimension count `ndim` is 0 in a null descriptor (None for an array argument, a zeroed struct field)."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("grad", ctypes.c_uint64),
        ("shape", ctypes.c_int32 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("ndim", ctypes.c_int32),
    ]


class ArrayDescRef(tuple):
    """A kernel argument a bridge made without an array (`wp.from_torch(t, return_ctype=True)`), cheaper to
    make: the bytes of its `ArrayDesc` (`bytes(d)`; `d.desc` is the structure), the dtype, dimension count and
    device launches check, and the objects whose memory it points to: the tuple (packed, dtype, ndim, device,
    refs)."""

    __slots__ = ()

    def __bytes__(self) -> bytes:
        return self[0]

    @property
    def desc(self) -> ArrayDesc:
        return ArrayDesc.from_buffer_copy(self[0])

    @property
    def data(self) -> int:
        """The data pointer (as Warp's `array_t.data`)."""
        return self.desc.data

    @property
    def grad(self) -> int:
        """The gradient pointer, 0 for none (without the flag bit `RETAIN_GRAD_BIT` the kernel reads)."""
        return self.desc.grad & ~RETAIN_GRAD_BIT

    @property
    def shape(self) -> Any:
        """The extents (a ctypes array of MAX_DIMS entries, the first `ndim` used), as Warp's `array_t`."""
        return self.desc.shape

    @property
    def strides(self) -> Any:
        """The byte strides (a ctypes array of MAX_DIMS entries)."""
        return self.desc.strides

    @property
    def dtype(self) -> Any:
        return self[1]

    @property
    def ndim(self) -> int:
        return self[2]

    @property
    def device(self) -> Device:
        return self[3]


class _Storage:
    """What views of one allocation share: a write version (bumped by every tracked write) and who
    wrote last, so a Tape can tell when an array it recorded was overwritten.

    Writes loomwork does not make bump nothing, so the storage also knows whether its memory is
    `exposed` to them (a `.numpy()` view or `__array_interface__` was handed out, or the memory is a
    wrapped NumPy buffer or a `ptr=`/`from_ptr` alias); a Tape then compares a checksum of the
    memory (`digest`). When memory a Tape read while it was private (`watched`) is first exposed,
    its checksum at that moment (the content the Tape saw, if the version is unchanged) is kept as
    `snapshot`: (version, checksum).

    While a graph capture has recorded a write to the memory that has not run yet, `captured` is that
    graph: Python may not read or hand out the memory then (it would see the values from before)."""

    __slots__ = ("version", "writer", "exposed", "watched", "snapshot", "device", "ptr", "nbytes", "captured")

    def __init__(self, device: Device | None = None, ptr: int = 0, nbytes: int = 0) -> None:
        self.version = 0
        self.writer = "Python code"
        self.exposed = False
        self.watched = False
        self.snapshot: tuple[int, int | None] | None = None
        self.device, self.ptr, self.nbytes = device, ptr, nbytes
        self.captured: Any = None

    def check_host_access(self, what: str) -> None:
        """Raise if a graph capture has recorded a write to this memory that has not run yet."""
        if self.captured is not None:
            self.captured.refuse_host_access(what)

    def expose(self) -> None:
        if self.captured is not None:
            self.captured.refuse_host_access("handing the memory to Python (.numpy(), an array protocol)")
        if not self.exposed:
            self.exposed = True
            if self.watched:
                self.snapshot = (self.version, self.digest())

    def digest(self) -> int | None:
        """A checksum of the memory (None: none, or the device's backend cannot compute one)."""
        return self.device.backend.digest(self.ptr, self.nbytes) if self.nbytes and self.device else None

    def bump(self, writer: str) -> None:
        self.version += 1
        self.writer = writer


class _NoInterface(DeviceError, AttributeError):
    """An array protocol this array's device does not offer (so `hasattr` answers False)."""


_EMPTY_BYTE = ctypes.create_string_buffer(1)
_EMPTY_ADDRESS = ctypes.addressof(_EMPTY_BYTE)  # what arrays of no elements show NumPy (it is never read)


class _Interface:
    """Holds an `__array_interface__` dict (and the memory's owner) for NumPy to view."""

    def __init__(self, iface: dict, owner: Any) -> None:
        self.__array_interface__ = iface
        self._owner = owner


def _typestr(st: type[T.ScalarType]) -> str:
    return st.np_dtype.str


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if not 1 <= len(shape) <= MAX_DIMS:
        raise ValueError(f"arrays have 1 to {MAX_DIMS} dimensions, got shape {shape}")
    if any(s < 0 for s in shape):
        raise ShapeError(f"Array shapes must be non-negative, got {shape}")
    if any(s >= 2**31 for s in shape):
        raise ValueError(f"array shape {shape} has an extent of 2^31 or more")
    return shape


def wrap_span(dtype: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(elements, element size, offset of the lowest byte, bytes spanned) of a strided layout."""
    size = 1
    for n in shape:
        size *= n
    itemsize = _sizes.get(dtype) or _size(dtype)
    return (size, itemsize, *byte_span(shape, strides, itemsize))


def byte_span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Where the elements of a strided view lie: (offset of the lowest byte, bytes up to the highest)."""
    if not all(shape):
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s > 0) + itemsize
    return lo, hi - lo


# wp.map's entry for the arrays' arithmetic operators, set by kernels/mapping.py (a module above this one):
# (builtin name, *operands, out=None) -> array
ELEMENTWISE: list = [None]


def _operator(name: str, reverse: bool = False, in_place: bool = False) -> Any:
    def op(self: array, other: Any = None) -> Any:
        operands = (self,) if other is None and name in ("neg", "pos") else (other, self) if reverse else (self, other)
        if not all(isinstance(x, array | T.ScalarType | T._CompositeMixin | int | float) for x in operands):
            return NotImplemented
        result = ELEMENTWISE[0](name, *operands, out=self if in_place else None)
        return self if in_place else result

    op.__name__ = f"__{'r' if reverse else 'i' if in_place else ''}{name}__"
    op.__doc__ = f"Elementwise {name} by a kernel (wp.map), broadcasting as NumPy does."
    return op


def _subscript_dtype(params: Any) -> Any:
    """The dtype of an annotation `wp.array[dtype]` / `wp.array[dtype, ndim]` (ndim an int or Literal[int])."""
    return params[0] if isinstance(params, tuple) else params


def _subscript_ndim(cls: type, params: Any) -> int | None:
    if not isinstance(params, tuple):
        return None
    if len(params) != 2:
        raise TypeError(f"{cls.__name__}[...] takes a dtype and optionally ndim, got {len(params)} parameters")
    ndim = params[1]
    if typing.get_origin(ndim) is typing.Literal:
        (ndim,) = typing.get_args(ndim)
    if not isinstance(ndim, int) or not 1 <= ndim <= 4:
        raise TypeError(f"{cls.__name__}[dtype, ndim]: ndim must be 1 to 4 (an int or Literal[int]), got {ndim!r}")
    if cls._default_ndim is not None and cls._default_ndim != ndim:
        raise TypeError(f"{cls.__name__} has ndim {cls._default_ndim}, not {ndim}")
    return ndim


class array:  # noqa: N801 - Warp's public name
    """A typed n-dimensional array (1-D to 4-D) on a device; see the module docstring."""

    _default_ndim: int | None = None
    # defaults of the attributes views made by `_wrap` leave out (__init__ sets them all)
    _desc: bytes | None = None
    _grad: array | None = None
    _grad_external = False
    _requires_grad = False
    _retain_grad = False
    readonly = False
    pinned = False
    #: called as deleter(ptr, capacity) once an array made over `ptr=` memory with `deleter=` is garbage (None
    #: for every other array: memory loomwork allocates is freed with its owner)
    deleter: typing.Callable[[int, int], None] | None = None

    def __init__(
        self,
        data: Any = None,
        dtype: Any = Any,
        shape: Any = None,
        strides: Any = None,
        ptr: int | None = None,
        capacity: int | None = None,
        device: Any = None,
        copy: bool = True,
        owner: Any = None,
        requires_grad: bool = False,
        ndim: int | None = None,
        pinned: bool = False,
        retain_grad: bool = False,
        deleter: typing.Callable[[int, int], None] | None = None,
    ) -> None:
        ndim = ndim if ndim is not None else self._default_ndim
        if deleter is not None and (ptr is None or not callable(deleter)):
            raise TypeError("wp.array(deleter=...) takes a function (ptr, capacity) and applies to arrays over ptr= "
                            "memory")
        self._desc: bytes | None = None
        self._grad: array | None = None
        self._grad_external = False
        self.readonly = False
        self.device: Device = get_device(device)
        self._owner: Any = owner
        self.pinned = pinned
        annotation = data is None and shape is None and ptr is None
        if annotation and T.is_generic(dtype):  # wp.array(dtype=Any) / (dtype=wp.Float): a generic annotation
            self.dtype = dtype
        else:
            self.dtype = T.normalize_dtype(float if dtype is Any and data is None else dtype) if (
                dtype is not Any or data is None
            ) else None
        if data is not None:
            self._init_from_data(data, shape, copy, device)
        elif ptr is not None:
            if shape is None:
                raise ValueError("wp.array(ptr=...) needs a shape")
            self._init_view(ptr, _normalize_shape(shape), strides, owner)
            if capacity is not None:
                self.capacity = int(capacity)
            if not isinstance(owner, array):  # memory from elsewhere: anyone may write it
                self._storage.expose()
            if deleter is not None:  # views keep this array (their owner) alive, so this runs after theirs
                self.deleter = deleter
                weakref.finalize(self, deleter, self.ptr, self.capacity)
        elif shape is not None:
            self._init_new(_normalize_shape(shape), zero=True, strides=_allocation_strides(strides))
        else:  # an annotation, or an empty array
            self.ptr = None
            self.ndim = ndim or 1
            self.shape = (0,) * self.ndim
            self.strides = (0,) * self.ndim
            self.size = 0
            self.capacity = 0
            self._storage = _Storage()
        if ndim is not None and ndim != self.ndim:
            raise ValueError(f"array built with ndim={ndim} has shape {self.shape}")
        if requires_grad:
            self.requires_grad = True
        if retain_grad:
            self.retain_grad = True

    # -- construction helpers ------------------------------------------------------------

    def _check_host(self, what: str) -> None:
        """Operations done with NumPy need memory the host can read (the device's backend says)."""
        if not self.device.backend.host_accessible:
            raise DeviceError(f"{what} on device {self.device} is not supported yet")

    def _init_new(self, shape: tuple[int, ...], zero: bool, strides: Any = None) -> None:
        """New memory for `shape`: contiguous, or laid out with `strides` (in bytes; negative ones too, the
        memory then starting below `ptr`)."""
        itemsize = T.type_size(self.dtype)
        if strides is None:
            lo, nbytes = 0, int(np.prod(shape)) * itemsize
        else:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"Invalid number of strides, expected {len(shape)} strides, got {len(strides)}")
            lo, nbytes = byte_span(shape, strides, itemsize)
        if not nbytes:  # no elements: no memory, as in Warp (`ptr` None)
            self._init_view(0, shape, strides, None)
            self.ptr = None
            return
        ptr, owner = self.device.allocate(nbytes, zero=zero)
        if tracker.enabled:
            tracker.allocated(owner, nbytes, self.device)
        self._init_view(ptr - lo, shape, strides, owner)
        self.capacity = nbytes

    def _init_view(self, ptr: int, shape: tuple[int, ...], strides: Any, owner: Any) -> None:
        itemsize = T.type_size(self.dtype)
        self.ptr = int(ptr)
        self.shape = shape
        self.ndim = len(shape)
        self.strides = tuple(int(s) for s in strides) if strides is not None else contiguous_strides(
            shape, itemsize
        )
        self.size = int(np.prod(shape))
        self.capacity = self.size * itemsize
        self._owner = owner
        if isinstance(owner, array):
            self._storage, self.readonly = owner._storage, owner.readonly
        else:
            lo, nbytes = byte_span(shape, self.strides, itemsize)
            self._storage = _Storage(self.device, self.ptr + lo, nbytes)

    @classmethod
    def _wrap(cls, ptr: int, dtype: Any, shape: tuple[int, ...], strides: tuple[int, ...], device: Device,
              owner: Any, readonly: bool, span: tuple[int, int, int, int] | None = None) -> array:
        """An array over existing memory, made without `__init__`'s checks: the fast way bridges view a
        buffer whose shape, strides and dtype `foreign.fit` already checked. `span` is `wrap_span`'s answer
        for this layout, when the caller kept it."""
        a = object.__new__(cls)
        size, itemsize, lo, nbytes = span or wrap_span(dtype, shape, strides)
        storage = _Storage(device, ptr + lo, nbytes)
        storage.expose()  # another framework writes this memory too
        a.__dict__ = {"device": device, "_owner": owner, "dtype": dtype, "ptr": ptr, "shape": shape, "ndim": len(shape),
                      "strides": strides, "size": size, "capacity": size * itemsize, "_storage": storage}
        if readonly:
            a.readonly = True
        return a

    def _init_from_data(self, data: Any, shape: Any, copy: bool, device: Any) -> None:
        if self.dtype is not None and T.is_struct_type(self.dtype):
            self._init_structs(data, shape)
            return
        if isinstance(data, array):
            data._storage.check_host_access("copying it into a new array")
            src = data._host()
            if self.dtype is None:
                self.dtype = data.dtype
        elif isinstance(data, np.ndarray) and copy:
            src = data
        elif isinstance(data, np.ndarray) or (
                not isinstance(data, list | tuple | T._CompositeMixin) and foreign.is_foreign_array(data)):
            buf = foreign.describe(data, self.device)
            backend = buf.device.backend
            device_memory = backend.cuda_array_interface or not backend.host_accessible
            st = T.elem_scalar(self.dtype) if self.dtype is not None else buf.scalar
            other_type = buf.scalar is not st and not (st is T.bfloat16 and buf.scalar is T.uint16)
            if device_memory or (not copy and not other_type):  # viewed in place, as in Warp
                self._init_alias(buf, shape, device)
                return
            # (host data of another scalar type, even with copy=False: a converted copy, as Warp makes)
            src = np.asarray(_Interface(_interface_dict(buf.ptr, buf.shape, buf.strides, buf.scalar.np_dtype.str,
                                                        buf.readonly), buf.owner))
        else:
            src = _as_numpy(data, self.dtype)
        if self.dtype is None:
            self.dtype = T.dtype_from_numpy(src.dtype)
        st = T.elem_scalar(self.dtype)
        inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
        src = _strip_inner(src, inner, self.dtype)
        if shape is not None:
            src = src.reshape(_normalize_shape(shape) + inner)
        outer = src.shape[: src.ndim - len(inner)] or (1,)
        src = src.reshape(outer + inner)
        _normalize_shape(outer)
        self._init_new(outer, zero=False)
        if self.device.backend.host_accessible:
            self._host()[...] = T.to_storage(st, src, raw_bits=True)
        else:
            self._write_back(np.ascontiguousarray(T.to_storage(st, src, raw_bits=True)))

    def _init_alias(self, buf: foreign.Buffer, shape: Any, device: Any) -> None:
        """View `buf` in place (copy=False, or CUDA memory): the dtype must fit it and the device be its own."""
        if device is not None and self.device != buf.device:
            raise DeviceError(f"wp.array: the {buf.source} is on {buf.device}, not {self.device}; with copy=False "
                              "an array views the data where it is (pass copy=True to copy it)")
        if self.dtype is None:
            self.dtype = buf.scalar
        self.device = buf.device
        dims, strides = foreign.fit(buf, self.dtype, "wp.array(..., copy=False)")
        if shape is not None:
            dims = _normalize_shape(shape)
            if strides != contiguous_strides(tuple(int(s) for s in buf.shape[:len(strides)]), T.type_size(self.dtype)):
                raise ValueError(f"wp.array(..., copy=False): a new shape {dims} needs contiguous data")
            if int(np.prod(dims)) != int(np.prod(buf.shape[:len(strides)])):
                raise ValueError(f"wp.array(..., copy=False): shape {dims} does not match the data's "
                                 f"{tuple(buf.shape)}")
            strides = None
        self._init_view(buf.ptr, dims, strides, buf.owner)
        self._storage.expose()  # the other framework writes it too
        self.readonly = buf.readonly

    def _init_structs(self, data: Any, shape: Any) -> None:
        """An array of structs from a sequence of struct instances (or a NumPy array of records)."""
        record = np.dtype(self.dtype._ctype)
        if isinstance(data, np.ndarray) and data.dtype in (record, _record_dtype(self.dtype)):
            records = data
        else:
            items = list(data)
            for x in items:
                if not isinstance(x, self.dtype):
                    raise TypeError(f"an array of {self.dtype.__name__} takes {self.dtype.__name__} instances, "
                                    f"got {type(x).__name__}")
            records = np.frombuffer(b"".join(bytes(x._pack()) for x in items), dtype=record)
        self._init_new(_normalize_shape(shape if shape is not None else records.shape or (records.size,)), zero=False)
        records = np.ascontiguousarray(records)
        if records.size != self.size:
            raise ValueError(f"{records.size} {self.dtype.__name__} values for an array of shape {self.shape}")
        # byte for byte: NumPy's view of a ctypes record and the array's own layout name the padding differently
        if self.device.backend.host_accessible:
            ctypes.memmove(self._host().ctypes.data, records.ctypes.data, records.nbytes)
        elif records.nbytes:
            self.device.backend.upload(self.ptr, records.ctypes.data, records.nbytes)

    # -- the array as a value -------------------------------------------------------------

    def __class_getitem__(cls, params: Any) -> array:
        return cls(dtype=_subscript_dtype(params), ndim=_subscript_ndim(cls, params))

    @property
    def is_contiguous(self) -> bool:
        return self.strides == contiguous_strides(self.shape, T.type_size(self.dtype))

    def cptr(self) -> Any:
        """A ctypes pointer to the first element, typed as the elements (structs as their ctypes records):
        for host memory only, as Warp's."""
        if self.ptr is None or not self.device.backend.host_accessible:
            raise DeviceError(f"array.cptr() needs an array in host memory, got one on {self.device}")
        t = self.dtype
        ctype = t._ctype if T.is_struct_type(t) or T.is_scalar(t) else t  # composites are ctypes arrays
        return ctypes.cast(self.ptr, ctypes.POINTER(ctype))

    @property
    def _ref(self) -> Any:
        """Warp's name for the object whose memory this array views (a NumPy array it aliases, say)."""
        return self._owner

    @property
    def requires_grad(self) -> bool:
        """Whether launches on a Tape compute this array's gradient; setting it True gives the array a zeroed
        gradient buffer (when it has none), False drops it."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        value = bool(value)
        if value and self._grad is None and (self.ptr is not None or not self.size):  # laid out as the data
            self._grad = array(dtype=self.dtype, device=self.device)
            self._grad._init_new(self.shape, zero=True, strides=None if self.is_contiguous else self.strides)
        elif not value:
            self._grad = None
            self._retain_grad = False
        self._requires_grad = value
        self._desc = None  # kernels see the new gradient buffer (or none)

    @property
    def retain_grad(self) -> bool:
        """Whether a kernel's adjoint leaves this array's gradient in place after reading it for a store
        into the array. By default (False, as in Warp 1.19) it zeroes it: the value a store replaced gets no
        gradient, which is right when an element is written more than once. True keeps the gradient of an
        intermediate or output readable after backward; then an element written twice counts its gradient
        twice (except where a kernel reads the array before storing into it, or stores into a part of an
        element: those still take it). Needs requires_grad; views of the array do not inherit it. A gradient
        buffer the caller supplied (`a.grad = g`, a tensor's shared `.grad`) is always kept, whatever this says."""
        return self._retain_grad

    @retain_grad.setter
    def retain_grad(self, value: bool) -> None:
        if value and not self._requires_grad:
            raise ValueError("retain_grad=True needs an array with requires_grad=True")
        self._retain_grad = bool(value)
        self._desc = None

    @property
    def grad(self) -> array | None:
        return self._grad

    @grad.setter
    def grad(self, g: array | None) -> None:
        if g is not None and (not isinstance(g, array) or g.shape != self.shape or g.dtype != self.dtype):
            raise ValueError(f"gradient must be an array of shape {self.shape} and dtype {T.type_name(self.dtype)}")
        self._grad = g
        self._grad_external = g is not None  # a buffer the caller owns: tapes never zero it on their own
        self._requires_grad = g is not None
        self._desc = None

    def _desc_bytes(self) -> bytes:
        """The packed `ArrayDesc` passed to kernels (cached, since the metadata never changes, except for
        read-only arrays: launches check each time that no kernel writes them)."""
        d = self._desc
        if d is None:
            empty = self.size == 0  # an empty array reads as null in kernels (wp.unot, `if arr:`)
            grad = (self._grad.ptr or 0) if self._grad is not None and not empty else 0
            if grad and (self._retain_grad or self._grad_external):  # kept by stores' adjoints
                grad |= RETAIN_GRAD_BIT
            d = pack_desc(0 if empty else self.ptr or 0, grad, self.shape, self.strides)
            if not self.readonly:
                self._desc = d
        return d

    def _check_writable(self, what: str) -> None:
        if self.readonly:
            raise ValueError(f"{what}: the array is read-only (it views memory its owner exported read-only)")

    def _interface(self, protocol: str, ptr: int | None = None) -> dict:
        """The dict of `__array_interface__` / `__cuda_array_interface__` (vectors add trailing dimensions), for
        this array's memory or, with `ptr`, a copy of it laid out the same way at `ptr`."""
        ptr = (self.ptr or _EMPTY_ADDRESS) if ptr is None else ptr  # NumPy wants an address even for no elements
        if T.is_struct_type(self.dtype):  # raw records; `_host` views them with the struct's field layout
            return _interface_dict(ptr, self.shape, self.strides, f"|V{T.type_size(self.dtype)}", self.readonly)
        st = T.elem_scalar(self.dtype)
        inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
        return _interface_dict(ptr, self.shape + inner, self.strides + contiguous_strides(inner, st.size),
                               _typestr(st), self.readonly)

    @property
    def __array_interface__(self) -> dict:
        """NumPy's protocol, for arrays in host memory (read-only arrays say so)."""
        if not self.device.backend.host_accessible:
            raise _NoInterface(f"__array_interface__: the array is in the memory of {self.device}, which the host "
                               "cannot read in place (.numpy() gives a host copy)")
        self._storage.expose()
        return self._interface("__array_interface__")

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array protocol (version 3, with the stream consumers order their work after), for arrays
        in CUDA device memory; CuPy, Numba and PyTorch view them in place."""
        backend = self.device.backend
        if not backend.cuda_array_interface:
            raise _NoInterface(f"__cuda_array_interface__: array is on {self.device}, not a CUDA device")
        self._storage.expose()
        iface = self._interface("__cuda_array_interface__")
        iface["stream"] = backend.current_stream()
        return iface

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack (device type, device id) of this array's memory."""
        kind = self.device.backend.dlpack_device_type
        if kind is None:
            raise BufferError(f"arrays on {self.device} cannot be exchanged through DLPack")
        return kind, max(self.device.ordinal, 0)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """A DLPack capsule of this array (the Python array API's protocol): versioned when the consumer
        reads DLPack 1.x (`max_version`), which can also mark it read-only. The consumer's `stream`
        is made to wait for the work queued on ours. `copy=True` exports a copy; `dl_device` another
        device (a copy too, so `copy=False` refuses it)."""
        flags = 0
        src = self
        if dl_device is not None and tuple(int(x) for x in dl_device) != self.__dlpack_device__():
            if copy is False:
                raise BufferError(f"__dlpack__: the array is on {self.device}; copy=False cannot move it to DLPack "
                                  f"device {tuple(dl_device)}")
            src, flags = self.clone(device=foreign.dlpack_device(*dl_device)), dlpack.IS_COPIED
        elif copy:
            src, flags = self.clone(), dlpack.IS_COPIED
        if stream is not None and stream != -1:
            src.device.backend.wait_stream(stream, None)
        return src._capsule(versioned=max_version is not None and max_version[0] >= 1, flags=flags)

    def _capsule(self, versioned: bool, flags: int = 0) -> Any:
        if self.readonly:
            if not versioned:
                raise BufferError("a read-only array is exported only to DLPack 1.x consumers (max_version=(1, 0) "
                                  "or later), whose capsules can say it is read-only")
            flags |= dlpack.READ_ONLY
        layout = self.__dict__.get("_dlpack") or self._dlpack_layout()
        self._storage.expose()
        return dlpack.export_capsule(self.ptr or 0, layout, self, versioned, flags)

    def _dlpack_layout(self) -> dlpack.Export:
        """What DLPack exports of this array say besides the address (the metadata never changes)."""
        if T.is_struct_type(self.dtype):
            raise BufferError(f"arrays of {T.type_name(self.dtype)} (a struct) have no DLPack data type")
        st = T.elem_scalar(self.dtype)
        if any(s % st.size for s in self.strides):
            raise BufferError(f"array strides {self.strides} bytes are not whole {T.type_name(st)} elements")
        inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
        strides = tuple(s // st.size for s in self.strides + contiguous_strides(inner, st.size))
        layout = self._dlpack = dlpack.Export(self.shape + inner, strides, st, self.__dlpack_device__())
        return layout

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array, vectors and matrices adding trailing dimensions: a view of the memory on the
        CPU, a copy of device memory (made once the work queued before it is done) on a GPU."""
        if self.ptr is not None:
            self._storage.expose()
        return self._host()

    def _host(self) -> np.ndarray:
        """`numpy()` for loomwork's own use: the view does not leave it, so the memory stays unexposed."""
        if self.ptr is None:
            if T.is_struct_type(self.dtype):
                return np.zeros(self.shape, dtype=_record_dtype(self.dtype))
            inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
            return np.zeros(self.shape + inner, dtype=T.elem_scalar(self.dtype).np_dtype)
        if self.device.backend.host_accessible:
            host = np.asarray(_Interface(self._interface("__array_interface__"), self))
        else:  # device memory: a copy, once the work queued before has written it
            lo, nbytes = byte_span(self.shape, self.strides, T.type_size(self.dtype))
            buf = np.empty(max(nbytes, 1), dtype=np.uint8)
            if nbytes:
                self.device.backend.download(buf.ctypes.data, self.ptr + lo, nbytes)
            host = np.asarray(_Interface(self._interface("__array_interface__", buf.ctypes.data - lo), buf))
        return host.view(_record_dtype(self.dtype)) if T.is_struct_type(self.dtype) else host

    def _write_back(self, host: np.ndarray) -> None:
        """Store `host` (what `_host()` gave, since changed) into this array's memory, where that is not the
        memory itself (device memory)."""
        if self.device.backend.host_accessible or not self.size:
            return
        lo, nbytes = byte_span(self.shape, self.strides, T.type_size(self.dtype))
        self.device.backend.upload(self.ptr + lo, host.ctypes.data + lo, nbytes)  # `host` has the array's layout

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def list(self) -> list:
        """The elements as a Python list (vectors, matrices and structs as their types)."""
        self._storage.check_host_access("list()")
        if T.is_struct_type(self.dtype):
            return [self.dtype.from_bytes(r.tobytes(), self.device) for r in self._host().reshape(-1)]
        flat = T.from_storage(T.elem_scalar(self.dtype), self._host()).reshape(
            (self.size,) + (self.dtype._shape_ if T.is_composite(self.dtype) else ()))
        if T.is_composite(self.dtype):
            return [self.dtype(x) for x in flat]
        return flat.tolist()

    __add__, __radd__, __iadd__ = _operator("add"), _operator("add", True), _operator("add", in_place=True)
    __sub__, __rsub__, __isub__ = _operator("sub"), _operator("sub", True), _operator("sub", in_place=True)
    __mul__, __rmul__, __imul__ = _operator("mul"), _operator("mul", True), _operator("mul", in_place=True)
    __truediv__, __rtruediv__, __itruediv__ = _operator("div"), _operator("div", True), _operator("div", in_place=True)
    __floordiv__, __rfloordiv__ = _operator("floordiv"), _operator("floordiv", True)
    __ifloordiv__ = _operator("floordiv", in_place=True)
    __mod__, __rmod__, __imod__ = _operator("mod"), _operator("mod", True), _operator("mod", in_place=True)
    __pow__, __rpow__, __ipow__ = _operator("pow"), _operator("pow", True), _operator("pow", in_place=True)
    __neg__, __pos__ = _operator("neg"), _operator("pos")

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"array(shape={self.shape}, dtype={T.type_name(self.dtype)}, device={self.device})"

    def __str__(self) -> str:
        self._storage.check_host_access("str()")
        if self.ptr is None and self.size:
            return repr(self)
        return str(T.from_storage(T.elem_scalar(self.dtype), self._host()))

    # -- views ----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, tuple):
            key = (key,)
        if any(isinstance(k, array | np.ndarray | list) for k in key):
            return self._index_with_arrays(key)
        if len(key) > self.ndim:
            raise IndexError(f"too many indices ({len(key)}) for an array of {self.ndim} dimensions")
        if all(isinstance(k, int | np.integer) for k in key) and len(key) == self.ndim:
            self._storage.check_host_access("element access")
            if T.is_struct_type(self.dtype):
                return self.dtype.from_bytes(self._host()[key].tobytes(), self.device)
            v = T.from_storage(T.elem_scalar(self.dtype), self._host()[key])
            return self.dtype(v) if T.is_composite(self.dtype) else v.item()
        ptr, shape, strides = self.ptr or 0, [], []
        for dim, k in enumerate(key + (slice(None),) * (self.ndim - len(key))):
            n, s = self.shape[dim], self.strides[dim]
            if isinstance(k, int | np.integer):
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(f"index {k} is out of bounds for dimension {dim} of size {n}")
                ptr += (k % n) * s
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                ptr += start * s
                shape.append(len(range(start, stop, step)))
                strides.append(s * step)
            else:
                raise IndexError(f"arrays are indexed by ints and slices, got {type(k).__name__}")
        if not shape:
            shape, strides = [1], [T.type_size(self.dtype)]
        view = array(ptr=ptr, dtype=self.dtype, shape=tuple(shape), strides=tuple(strides),
                     device=self.device, owner=self)
        if self._grad is not None:
            view._grad = self._grad[key]
            view._requires_grad = self._requires_grad
        return view

    def _index_with_arrays(self, key: tuple) -> indexedarray:
        """a[I, 1:3, J]: index arrays (int32) select elements along their dimensions, as Warp does, giving an
        indexedarray over the view that the key's integers and slices make."""
        if len(key) > self.ndim:
            raise IndexError(f"too many indices ({len(key)}) for an array of {self.ndim} dimensions")
        plain, picks = [], []
        for k in key:
            if isinstance(k, array | np.ndarray | list):
                plain.append(slice(None))
                picks.append(k)
            else:
                plain.append(k)
                if not isinstance(k, int | np.integer):
                    picks.append(None)
        view = self[tuple(plain)] if any(not isinstance(k, slice) or k != slice(None) for k in plain) else self
        return indexedarray(view, picks)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_writable("element assignment")
        self._storage.check_host_access("element assignment")
        self._storage.bump("element assignment")
        host = self._host()
        host[key] = T.to_storage(T.elem_scalar(self.dtype), np.asarray(
            value.numpy_value() if isinstance(value, T._CompositeMixin) else value))
        self._write_back(host)

    def reshape(self, shape: Any) -> array:
        """A view with a new shape (contiguous arrays only); one extent may be -1."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1]))
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        shape = _normalize_shape(shape)
        if int(np.prod(shape)) != self.size:
            raise ShapeError(f"cannot reshape array of shape {self.shape} (size {self.size}) into shape {shape} "
                             f"(size {int(np.prod(shape))})")
        if not self.is_contiguous:
            raise ValueError("reshape needs a contiguous array; call .contiguous() first")
        v = array(ptr=self.ptr, dtype=self.dtype, shape=shape, device=self.device, owner=self)
        if self._grad is not None and self._grad.is_contiguous:  # the view's gradient is the same view of .grad
            v._grad, v._requires_grad = self._grad.reshape(shape), self._requires_grad
        return v

    def transpose(self, axes: Any = None) -> array:
        """A view with permuted dimensions (reversed by default), sharing memory and gradient."""
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"transpose axes {axes} are not a permutation of {self.ndim} dimensions")
        v = array(ptr=self.ptr or 0, dtype=self.dtype, shape=tuple(self.shape[a] for a in axes),
                  strides=tuple(self.strides[a] for a in axes), device=self.device, owner=self)
        if self._grad is not None:
            v._grad, v._requires_grad = self._grad.transpose(axes), self._requires_grad
        return v

    def view(self, dtype: Any) -> array:
        """The same memory seen as another dtype, as Warp's `view`: of the same size (int32 <-> uint32, vec4 <->
        quat, vec3 <-> a struct of three floats), or vectors and matrices as their scalars (trailing
        dimensions added) and scalars as vectors or matrices (trailing dimensions of that shape, contiguous,
        taken). The view shares the gradient, seen the same way."""
        dt = T.normalize_dtype(dtype)
        size, src = T.type_size(dt), self.dtype
        if size == T.type_size(src):
            shape, strides = self.shape, self.strides
        elif T.is_scalar(dt) and T.is_composite(src) and T.type_size(T.elem_scalar(src)) == size:
            inner = src._shape_
            shape, strides = self.shape + inner, self.strides + contiguous_strides(inner, size)
        elif T.is_scalar(src) and T.is_composite(dt) and T.type_size(T.elem_scalar(dt)) == T.type_size(src):
            inner, k = dt._shape_, len(dt._shape_)
            if self.ndim < k or self.shape[self.ndim - k:] != inner:
                raise ShapeError(f"view: an array of shape {self.shape} does not end in the shape {inner} of "
                                 f"{T.type_name(dt)}")
            if self.strides[self.ndim - k:] != contiguous_strides(inner, T.type_size(src)):
                raise ShapeError(f"view: the inner strides {self.strides[self.ndim - k:]} of the array are not "
                                 f"those of contiguous {T.type_name(dt)} values")
            shape, strides = self.shape[:self.ndim - k] or (1,), self.strides[:self.ndim - k] or (size,)
        else:
            def sized(role: str, t: Any) -> str:  # a composite on one side is compared by its scalar
                if T.is_composite(t) and T.is_scalar(dt if t is src else src):
                    e = T.elem_scalar(t)
                    return f"{role} scalar dtype {T.type_name(e)} has size {T.type_size(e)}"
                return f"{role} dtype has size {T.type_size(t)}"
            raise TypeError(f"cannot create an array view with dtype {T.type_name(dt)} from source dtype "
                            f"{T.type_name(src)}: {sized('source', src)} bytes, but {sized('target', dt)} bytes")
        v = array(ptr=self.ptr or 0, dtype=dt, shape=shape, strides=strides, device=self.device, owner=self)
        if self._grad is not None:
            v._grad, v._requires_grad = self._grad.view(dt), self._requires_grad
        return v

    def flatten(self) -> array:
        return self.reshape((self.size,))

    def contiguous(self) -> array:
        return self if self.is_contiguous else self.clone()

    # -- in-place operations ----------------------------------------------------------------

    def fill_(self, value: Any) -> array:
        """Set every element to `value` (a scalar, or a vector/matrix for such dtypes)."""
        self._check_writable("fill_")
        if self.size and T.is_struct_type(self.dtype):
            record = value._pack() if isinstance(value, self.dtype) else None
            if record is None and value != 0:
                raise TypeError(f"fill_ of an array of {self.dtype.__name__} takes a {self.dtype.__name__} or 0")
            v = np.frombuffer(bytes(record), dtype=_record_dtype(self.dtype))[0] if record else 0
        elif self.size:
            v = T.to_storage(T.elem_scalar(self.dtype), np.asarray(
                value.numpy_value() if isinstance(value, T._CompositeMixin) else
                value.value if isinstance(value, T.ScalarType) else value))
            shape = getattr(self.dtype, "_shape_", ())
            if len(shape) > 1 and v.ndim == 1 and v.size == int(np.prod(shape)):  # a matrix's values given flat
                v = v.reshape(shape)
        if self.size and not self.device.backend.host_accessible:
            submit(self.device, None, _fill_device, (self, v), ((self._storage, "fill_()"),), "memset",
                   TIMING_MEMSET, (self,))
        elif self.size:
            submit(self.device, None, _set_all, (self._host(), v), ((self._storage, "fill_()"),), "memset",
                   TIMING_MEMSET)
        self._storage.bump("fill_()")
        return self

    fill = fill_

    def zero_(self) -> array:
        """Set every element to zero (contiguous arrays by the device's backend: large ones on every CPU core)."""
        self._check_writable("zero_")
        if self.ptr is not None and self.is_contiguous:
            submit(self.device, None, self.device.backend.zero, (self.ptr, self.size * T.type_size(self.dtype)),
                   ((self._storage, "zero_()"),), "memset", TIMING_MEMSET, (self,))
            self._storage.bump("zero_()")
            return self
        return self.fill_(0)

    def assign(self, src: Any) -> array:
        """Copy the values of `src` (an array, NumPy array or sequence of matching shape) into this array (from an
        array of the same dtype: recorded by a Tape as `wp.copy` is)."""
        self._check_writable("assign")
        st = T.elem_scalar(self.dtype)
        writes = ((self._storage, "assign()"),)
        if not self.device.backend.host_accessible or (isinstance(src, array)
                                                       and not src.device.backend.host_accessible):
            return self._assign_staged(src, st, writes)
        dst = self._host()
        if isinstance(src, array):  # read when the copy runs (a graph capture records it)
            n = src.size * (int(np.prod(src.dtype._shape_)) if T.is_composite(src.dtype) else 1)
            if n != dst.size:
                raise ValueError(f"assign: source has {n} values, array has {dst.size}")
            submit(self.device, None, _assign_array, (dst, src, st), writes, "memcpy", TIMING_MEMCPY)
            if src.dtype == self.dtype and src.size == self.size:  # differentiable on a Tape, as wp.copy
                _record_copy(self, src, 0, 0, self.size)
        else:
            values = np.asarray(src)
            if values.size != dst.size:
                raise ValueError(f"assign: source has {values.size} values, array has {dst.size}")
            v = T.to_storage(st, values.reshape(dst.shape), raw_bits=True)
            if capturing_graph(self.device) is not None:
                v = v.copy()  # the values as they are now, whatever happens to `src` before the graph runs
            submit(self.device, None, _set_all, (dst, v), writes, "memcpy", TIMING_MEMCPY)
        self._storage.bump("assign()")
        return self

    def _assign_staged(self, src: Any, st: Any, writes: tuple) -> array:
        """`assign` where either side is device memory: a device copy where the layouts allow, otherwise the
        values pass through the host when the work runs (so a graph capture records the transfer itself)."""
        comps = int(np.prod(self.dtype._shape_)) if T.is_composite(self.dtype) else 1
        if isinstance(src, array):
            if src.dtype == self.dtype and src.size == self.size and src.is_contiguous and self.is_contiguous:
                copy(self, src)  # recorded by a Tape and a graph capture as wp.copy is
                return self
            n = src.size * (int(np.prod(src.dtype._shape_)) if T.is_composite(src.dtype) else 1)
            payload: Any = src
        else:
            payload = np.array(src)  # the values as they are now, whatever happens to `src` before the work runs
            n = payload.size
        if n != self.size * comps:
            raise ValueError(f"assign: source has {n} values, array has {self.size * comps}")
        submit(self.device, None, _assign_through_host, (self, payload, st), writes, "memcpy", TIMING_MEMCPY,
               (self, payload))
        if isinstance(src, array) and src.dtype == self.dtype and src.size == self.size:
            _record_copy(self, src, 0, 0, self.size)
        self._storage.bump("assign()")
        return self

    def clone(self, device: Any = None, requires_grad: bool | None = None) -> array:
        """A contiguous copy, on `device` (default: the same device)."""
        rg = self.requires_grad if requires_grad is None else requires_grad
        dev = self.device if device is None else get_device(device)
        if dev == self.device and self.ptr is not None:  # a new array and a copy (which a graph capture records)
            out = empty(self.shape, self.dtype, dev, rg)
            if self.size:
                copy(out, self)
            return out
        self._storage.check_host_access("clone()")
        if self.ptr is not None and self.is_contiguous:
            out = empty(self.shape, self.dtype, dev, rg)
            if self.size:
                copy(out, self)
            return out
        return array(self._host(), dtype=self.dtype, device=dev, requires_grad=rg)

    def to(self, device: Any) -> array:
        """This array on `device` (itself when already there)."""
        return self if get_device(device) == self.device else self.clone(device=device)


_sizes: dict[Any, int] = {}  # dtype -> bytes per element, for `_wrap`


@functools.cache
def _record_dtype(struct_type: Any) -> np.dtype:
    """The NumPy dtype of one element of an array of `struct_type` (its `numpy_dtype()` layout)."""
    return np.dtype(struct_type.numpy_dtype())


def _set_all(view: np.ndarray, values: Any) -> None:
    view[...] = values


def _assign_through_host(dst: array, src: Any, st: Any) -> None:
    """`assign` staged through the host: `src` (an array, or NumPy values) into `dst`, one side in device memory."""
    host = dst._host()
    if isinstance(src, array):
        _assign_array(host, src, st)
    else:
        host[...] = T.to_storage(st, src.reshape(host.shape), raw_bits=True)
    dst._write_back(host)  # nothing to do where `host` is the memory itself


def _fill_device(a: array, value: Any) -> None:
    """`fill_` of device memory: a memset where each element repeats one 1-, 2- or 4-byte word, else through
    the host."""
    if a.is_contiguous and not T.is_struct_type(a.dtype):
        v = np.asarray(value)
        raw = np.ascontiguousarray(np.broadcast_to(v, getattr(a.dtype, "_shape_", ()))).tobytes()
        size = T.type_size(a.dtype)
        for width in (1, 2, 4):
            if len(raw) == size and raw == raw[:width] * (size // width):
                if a.device.backend.fill(a.ptr, raw[:width], a.size * size // width):
                    return
                break
    host = a._host()
    host[...] = value
    a._write_back(host)


def _assign_array(dst: np.ndarray, src: array, st: Any) -> None:
    """`dst` (a host view of an array of scalar type `st`) takes the values of `src`: its bits when their
    scalar types agree, its values converted otherwise."""
    src_st = T.elem_scalar(src.dtype)
    values = src._host() if src_st is st else T.from_storage(src_st, src._host())
    dst[...] = T.to_storage(st, values.reshape(dst.shape), raw_bits=True)


def _size(dtype: Any) -> int:
    n = _sizes[dtype] = T.type_size(dtype)
    return n


def _interface_dict(ptr: int, shape: tuple, strides: tuple, typestr: str, readonly: bool) -> dict:
    return {"version": 3, "shape": shape, "strides": strides, "typestr": typestr, "data": (ptr, readonly)}


RETAIN_GRAD_BIT = 1 << 63  # set in a descriptor's gradient pointer: a store's adjoint keeps the gradient
DESC = struct.Struct("<QQ4i4qi4x")  # the bytes of an ArrayDesc: data, grad, shape[4], strides[4], ndim
#: DESC_PACK[n](data, grad, *shape, *strides, n): the bytes of an ArrayDesc of n dimensions (zeros in the rest)
DESC_PACK = [None] + [struct.Struct(f"<QQ{n}i{4 * (4 - n)}x{n}q{8 * (4 - n)}xi4x").pack
                      for n in range(1, MAX_DIMS + 1)]


def pack_desc(data: int, grad: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
    """The bytes of an `ArrayDesc` (the native `lw::array_t`)."""
    return DESC_PACK[len(shape)](data, grad, *shape, *strides, len(shape))


def over_buffer(buf: foreign.Buffer, dtype: Any, what: str) -> array:
    """A zero-copy array of `dtype` over a foreign buffer (checked by `foreign.fit`, whose errors name `what`)."""
    shape, strides = foreign.fit(buf, dtype, what)
    return array._wrap(buf.ptr, dtype, shape, strides, buf.device, buf.owner, buf.readonly)


def _as_numpy(data: Any, dtype: Any) -> np.ndarray:
    st = T.elem_scalar(dtype).value_dtype if dtype is not None else None
    if isinstance(data, T._CompositeMixin):
        return data.numpy_value()
    if isinstance(data, list | tuple) and data and isinstance(data[0], T._CompositeMixin):
        return np.stack([d.numpy_value() for d in data])
    return np.asarray(data, dtype=st)


def _strip_inner(src: np.ndarray, inner: tuple[int, ...], dtype: Any) -> np.ndarray:
    if not inner:
        return src
    k = len(inner)
    if src.shape[src.ndim - k:] == inner:
        return src
    n = int(np.prod(inner))
    if src.ndim and src.shape[-1] % n == 0:  # the last dimension holds whole values, as Warp reads it
        m = src.shape[-1] // n
        return src.reshape(src.shape[:-1] + ((m,) if m != 1 else ()) + inner)
    if src.ndim == 0 and n == 1:
        return src.reshape(inner)
    raise ValueError(f"data of shape {src.shape} does not hold whole values of {T.type_name(dtype)}: its last "
                     f"dimension must be a multiple of {n}")


class IndexedDesc(ctypes.Structure):
    """What a kernel receives for an indexedarray; mirrors `lw::indexedarray_t<T>`."""

    _fields_ = [("arr", ArrayDesc), ("indices", ctypes.c_uint64 * MAX_DIMS), ("shape", ctypes.c_int32 * MAX_DIMS)]


class indexedarray:  # noqa: N801 - Warp's public name
    """A view of `data` through index arrays: element i of dimension d is data[indices[d][i]] (None:
    every index of that dimension). Without data it is the annotation `wp.indexedarray(dtype=...)`."""

    _default_ndim: int | None = None

    def __init__(self, data: array | None = None, indices: Any = None, dtype: Any = Any,
                 ndim: int | None = None) -> None:
        if data is None:  # an annotation
            self.data, self.indices = None, []
            self.dtype = dtype if T.is_generic(dtype) else T.normalize_dtype(float if dtype is Any else dtype)
            self.ndim = ndim or self._default_ndim or 1
            self.shape = (0,) * self.ndim
            return
        if not isinstance(data, array):
            raise TypeError(f"indexedarray: data must be a wp.array, got {type(data).__name__}")
        if not isinstance(indices, list | tuple):
            indices = [indices]
        if len(indices) > data.ndim:
            raise ValueError(f"indexedarray: {len(indices)} index arrays for a {data.ndim}-D array")
        indices = list(indices) + [None] * (data.ndim - len(indices))
        self.data, self.dtype, self.ndim = data, data.dtype, data.ndim
        self.indices: list = []
        shape = []
        for d, idx in enumerate(indices):
            if idx is None:
                self.indices.append(None)
                shape.append(data.shape[d])
                continue
            idx = idx if isinstance(idx, array) else array(np.asarray(idx, dtype=np.int32), dtype=T.int32)
            if idx.dtype is not T.int32 or idx.ndim != 1 or not idx.is_contiguous:
                raise TypeError(f"indexedarray: indices of dimension {d} must be a contiguous 1-D int32 array")
            values = idx._host()
            if values.size and (values.min() < 0 or values.max() >= data.shape[d]):
                raise IndexError(f"indexedarray: indices of dimension {d} must lie in [0, {data.shape[d]})")
            self.indices.append(idx)
            shape.append(idx.size)
        if ndim is not None and ndim != self.ndim:
            raise ValueError(f"indexedarray built with ndim={ndim} over a {self.ndim}-D array")
        self.shape = tuple(shape)
        self.size = int(np.prod(shape))
        self.device = data.device
        self._storage = data._storage  # writes through the view are writes to the data

    def __class_getitem__(cls, params: Any) -> indexedarray:
        return cls(dtype=_subscript_dtype(params), ndim=_subscript_ndim(cls, params))

    def _desc_bytes(self) -> bytes:
        desc = IndexedDesc()
        desc.arr = ArrayDesc.from_buffer_copy(self.data._desc_bytes())
        for d, (idx, n) in enumerate(zip(self.indices, self.shape, strict=True)):
            desc.indices[d] = idx.ptr if idx is not None else 0
            desc.shape[d] = n
        return bytes(desc)

    def _selection(self, what: str) -> tuple[np.ndarray, tuple]:
        """The data on the host (a view on the CPU, a copy of device memory) and the NumPy index that picks
        this view's elements from it."""
        if self.data is None:
            raise TypeError(f"indexedarray.{what}: an indexedarray annotation holds no data")
        self._storage.check_host_access(what)
        picks = [idx._host() if idx is not None else np.arange(n) for idx, n in zip(self.indices, self.data.shape,
                                                                                    strict=True)]
        return self.data._host(), np.ix_(*picks)

    @property
    def requires_grad(self) -> bool:
        return self.data is not None and self.data.requires_grad

    def numpy(self) -> np.ndarray:
        """A copy of the selected elements, gathered with NumPy (vectors add trailing dimensions)."""
        host, sel = self._selection("numpy()")
        return host[sel]

    def contiguous(self) -> array:
        """A new contiguous array holding the selected elements."""
        out = empty(self.shape, self.dtype, self.device, self.requires_grad)
        if self.size:
            out.assign(self.numpy())
        return out

    def clone(self, device: Any = None, requires_grad: bool | None = None) -> array:
        """A contiguous copy of the selected elements, on `device` (default: the data's device)."""
        out = self.contiguous()
        if requires_grad is not None:
            out.requires_grad = requires_grad
        return out if device is None else out.to(device)

    def list(self) -> list:
        """The selected elements as a Python list (vectors, matrices and structs as their types)."""
        return self.contiguous().list()

    def assign(self, src: Any) -> indexedarray:
        """Write the values of `src` (an array, indexedarray, NumPy array or sequence of this shape) into the
        selected elements of the data."""
        self.data._check_writable("indexedarray.assign")
        host, sel = self._selection("assign()")
        values = src.numpy() if isinstance(src, array | indexedarray) else np.asarray(src)
        target = host[sel]
        if values.size != target.size:
            raise ValueError(f"indexedarray.assign: source has {values.size} values, the view has {target.size}")
        if T.is_struct_type(self.dtype):
            host[sel] = values.reshape(target.shape)
        else:
            host[sel] = T.to_storage(T.elem_scalar(self.dtype), values.reshape(target.shape), raw_bits=True)
        if not self.data.device.backend.host_accessible:  # `host` is a copy: write it back whole
            self.data.assign(host)
        self._storage.bump("indexedarray.assign()")
        return self

    def fill_(self, value: Any) -> indexedarray:
        """Set every selected element to `value` (a scalar, vector, matrix or struct of the dtype)."""
        if self.size:
            self.assign(empty(self.shape, self.dtype, self.device).fill_(value))
        return self

    fill = fill_

    def zero_(self) -> indexedarray:
        """Set every selected element to zero."""
        return self.fill_(0)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def is_contiguous(self) -> bool:
        """Always False: the selected elements are gathered through the index arrays."""
        return False

    def __repr__(self) -> str:
        return f"indexedarray(shape={self.shape}, dtype={T.type_name(self.dtype)})"


class indexedarray1d(indexedarray):  # noqa: N801
    _default_ndim = 1


class indexedarray2d(indexedarray):  # noqa: N801
    _default_ndim = 2


class indexedarray3d(indexedarray):  # noqa: N801
    _default_ndim = 3


class indexedarray4d(indexedarray):  # noqa: N801
    _default_ndim = 4


class fixedarray(array):  # noqa: N801 - Warp's public name
    """The annotation of a fixed-size local array (what `wp.zeros(shape, dtype)` makes inside a kernel), e.g.
    a @wp.func's return type `-> wp.fixedarray(shape=(2, 3), dtype=int)`. Not an array of Python scope."""

    def __init__(self, dtype: Any = Any, shape: Any = None) -> None:
        super().__init__(dtype=dtype)
        self.fixed_shape = (shape,) if isinstance(shape, int) else tuple(shape) if shape is not None else None
        self.ndim = len(self.fixed_shape) if self.fixed_shape else 1


class array1d(array):  # noqa: N801
    _default_ndim = 1


class array2d(array):  # noqa: N801
    _default_ndim = 2


class array3d(array):  # noqa: N801
    _default_ndim = 3


class array4d(array):  # noqa: N801
    _default_ndim = 4


# --------------------------------------------------------------------------------------------
# creation functions


def _allocation_strides(strides: Any) -> tuple[int, ...] | None:
    """The strides (bytes) a new array is laid out with: none (contiguous), or non-negative ones, as Warp."""
    if strides is not None and any(int(s) < 0 for s in strides):
        raise NotImplementedError(f"Negative strides are not supported when allocating an array, got {tuple(strides)}")
    return strides


def empty(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
          pinned: bool = False, retain_grad: bool = False, *, n: int | None = None, strides: Any = None) -> array:
    """A new array whose contents are unspecified (`n=length`: Warp's older spelling of a 1-D shape;
    `strides`: its layout in bytes, default contiguous; `retain_grad`: see array.retain_grad)."""
    a = array(dtype=dtype, device=device, pinned=pinned)
    a._init_new(_normalize_shape(shape if n is None else (n,)), zero=False, strides=_allocation_strides(strides))
    a.requires_grad = requires_grad
    a.retain_grad = retain_grad
    return a


def zeros(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
          pinned: bool = False, retain_grad: bool = False, *, n: int | None = None, strides: Any = None) -> array:
    """A new array filled with zeros (`n=length`, `strides`: as `empty`)."""
    return array(dtype=dtype, shape=shape if n is None else (n,), strides=strides, device=device,
                 requires_grad=requires_grad, pinned=pinned, retain_grad=retain_grad)


def full(shape: Any = 0, value: Any = 0, dtype: Any = Any, device: Any = None, requires_grad: bool = False,
         pinned: bool = False, retain_grad: bool = False, *, n: int | None = None) -> array:
    """A new array with every element set to `value` (dtype inferred from it when not given; `n=length`: a
    1-D shape, as `empty`)."""
    shape = shape if n is None else (n,)
    if dtype is Any:
        dtype = _fill_value_type(value)
    a = empty(shape, dtype, device, requires_grad, pinned, retain_grad)
    return a.fill_(value)


def _fill_value_type(value: Any) -> Any:
    """The element type `wp.full` infers from its value: Python and Warp scalars and vectors as their
    types, a struct instance as its struct, a 1-D sequence as a vector and a 2-D one as a matrix of the
    sequence's NumPy scalar type."""
    if T.is_struct_type(type(value)):
        return type(value)
    if isinstance(value, int) and not isinstance(value, builtins.bool):
        return T.int32 if -(2**31) <= value < 2**31 else T.int64
    known = T.python_value_type(value)
    if known is not None:
        return known
    if not hasattr(value, "__len__"):
        raise TypeError(f"wp.full cannot infer an element type from a value of type {type(value).__name__}")
    values = np.asarray(value)
    st = T.dtype_from_numpy(values.dtype)
    if values.ndim == 1:
        return T.vector(values.size, st)
    if values.ndim == 2:
        return T.matrix(values.shape, st)
    raise ValueError(f"wp.full: a value of {values.ndim} dimensions is neither a vector nor a matrix")


def ones(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
         pinned: bool = False, retain_grad: bool = False, *, n: int | None = None) -> array:
    """A new array filled with ones (`n=length`: a 1-D shape, as `empty`)."""
    return full(shape, 1, dtype, device, requires_grad, pinned, retain_grad, n=n)


def empty_like(src: array, device: Any = None, requires_grad: bool | None = None, retain_grad: bool = False) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return empty(src.shape, src.dtype, device or src.device, rg, retain_grad=retain_grad)


def zeros_like(src: array, device: Any = None, requires_grad: bool | None = None, retain_grad: bool = False) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return zeros(src.shape, src.dtype, device or src.device, rg, retain_grad=retain_grad)


def ones_like(src: array, device: Any = None, requires_grad: bool | None = None, retain_grad: bool = False) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return ones(src.shape, src.dtype, device or src.device, rg, retain_grad=retain_grad)


def full_like(src: array, value: Any, device: Any = None, requires_grad: bool | None = None,
              retain_grad: bool = False) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return full(src.shape, value, src.dtype, device or src.device, rg, retain_grad=retain_grad)


def snapshot(a: Any, stream: Any = None) -> Any:
    """A private copy of the memory an array argument refers to, with the same shape and strides (so the
    original's gradient fits it), taken before a launch on `stream` changes it (a Tape replays the launch's
    adjoint from it; in a graph capture the copy is recorded too, so each replay takes it afresh); an
    indexedarray's data is copied, its indices shared. None for what this cannot copy."""
    if isinstance(a, indexedarray):
        data = snapshot(a.data, stream)
        return None if data is None else indexedarray(data, a.indices)
    if not isinstance(a, array) or a.ptr is None:
        return None
    lo, nbytes = byte_span(a.shape, a.strides, T.type_size(a.dtype))
    ptr, owner = a.device.backend.allocate(max(nbytes, 1), zero=False)
    copy = array(ptr=ptr - lo, dtype=a.dtype, shape=a.shape, strides=a.strides, device=a.device, owner=owner)
    if nbytes:
        submit(a.device, stream, a.device.backend.copy, (ptr, a.ptr + lo, nbytes), ((copy._storage, "a Tape"),),
               "memcpy (a Tape's copy)", TIMING_MEMCPY, (copy, a))
    return copy


def clone(src: array, device: Any = None, requires_grad: bool | None = None, retain_grad: bool = False) -> array:
    """A contiguous copy of `src` (`retain_grad`: see array.retain_grad)."""
    out = src.clone(device=device, requires_grad=requires_grad)
    out.retain_grad = retain_grad
    return out


def copy(dest: array, src: array, dest_offset: int = 0, src_offset: int = 0, count: int = 0,
         stream: Any = None) -> None:
    """Copy `count` elements (default: all of `src`) from `src` to `dest`, at flat element offsets (on
    `stream`, default: the current stream of `dest`'s device)."""
    if isinstance(dest, indexedarray) or isinstance(src, indexedarray):
        _copy_indexed(dest, src, dest_offset, src_offset, count)
        return
    if not isinstance(dest, array) or not isinstance(src, array):
        raise TypeError(f"wp.copy takes two arrays, got {type(dest).__name__} and {type(src).__name__}")
    if T.type_size(dest.dtype) != T.type_size(src.dtype):
        raise CopyError(f"wp.copy: element sizes differ (destination dtype={T.type_name(dest.dtype)}, source "
                        f"dtype={T.type_name(src.dtype)})")
    _check_copy_range(dest, src, dest_offset, src_offset, count)
    dest._check_writable("wp.copy")
    count = count or src.size - src_offset
    if src_offset + count > src.size or dest_offset + count > dest.size:
        raise CopyError(
            f"wp.copy: {count} elements from offset {src_offset} of {src.size} to offset {dest_offset} of {dest.size}"
            " is out of range"
        )
    writes = ((dest._storage, "wp.copy()"),)
    name = f"memcpy {src.device} -> {dest.device}"
    if count and dest.dtype == src.dtype and dest.is_contiguous and src.is_contiguous:
        size = T.type_size(dest.dtype)
        to, frm = dest.device.backend, src.device.backend
        if to.host_accessible and not frm.host_accessible:
            transfer = frm.download
        elif frm.host_accessible and not to.host_accessible:
            transfer = to.upload
        else:  # one device, host memory, or two GPUs (unified addressing: a peer copy)
            transfer = to.copy
        submit(dest.device, stream, transfer,
               (dest.ptr + dest_offset * size, src.ptr + src_offset * size, count * size), writes, name, TIMING_MEMCPY,
               (dest, src))
    else:
        submit(dest.device, stream, _copy_elements, (dest, src, dest_offset, src_offset, count), writes, name,
               TIMING_MEMCPY)
    dest._storage.bump("wp.copy()")
    _record_copy(dest, src, dest_offset, src_offset, count)


def _check_copy_range(dest: array, src: array, dest_offset: Any, src_offset: Any, count: Any) -> None:
    """wp.copy's offsets and count: non-negative integers; multidimensional arrays neither of which is
    contiguous, copied whole, have the same shape (the elements pair up by index, not by memory order)."""
    for name, v in (("Source offset", src_offset), ("Destination offset", dest_offset), ("count", count)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise CopyError(f"wp.copy: offsets and count must be integers, got {name} = {v!r}")
        if v < 0:
            raise CopyError(f"wp.copy: {name} must be non-negative, got {v}")
    if (not count and not src_offset and not dest_offset and not src.is_contiguous and not dest.is_contiguous
            and max(src.ndim, dest.ndim) > 1 and dest.shape != src.shape):
        raise CopyError(f"wp.copy: arrays that are not contiguous must have the same shape (destination shape="
                        f"{dest.shape}, source shape={src.shape})")


def _copy_indexed(dest: array | indexedarray, src: array | indexedarray, dest_offset: int, src_offset: int,
                  count: int) -> None:
    """`wp.copy` where either side is an indexedarray: gather the source into a contiguous array, copy
    into a contiguous image of the destination, and scatter that back (host-accessible memory)."""
    for a, role in ((dest, "destination"), (src, "source")):
        if not isinstance(a, array | indexedarray):
            raise TypeError(f"wp.copy: the {role} must be an array or indexedarray, got {type(a).__name__}")
    flat_src = src.contiguous() if isinstance(src, indexedarray) else src
    if isinstance(dest, indexedarray):
        image = dest.contiguous()
        copy(image, flat_src, dest_offset, src_offset, count)
        dest.assign(image)
    else:
        copy(dest, flat_src, dest_offset, src_offset, count)


def _record_copy(dest: array, src: array, dest_offset: int, src_offset: int, count: int) -> None:
    """On a recording Tape, a copy between arrays with gradients is differentiable (so is `clone`, a copy):
    its backward step adds the destination's gradient into the source's, then zeroes the copied region of
    the destination's gradient unless `dest.retain_grad` (the values the copy replaced get none), as a
    kernel's store does."""
    if not (registry.recording and registry.local.recorders and count and src.grad is not None
            and dest.grad is not None and src.dtype == dest.dtype):
        return

    def backward() -> None:
        if src.grad.is_contiguous and dest.grad.is_contiguous:
            s = src.grad.flatten()[src_offset:src_offset + count]
            d = dest.grad.flatten()[dest_offset:dest_offset + count]
            ELEMENTWISE[0]("add", s, d, out=s)
            if not dest.retain_grad:
                d.zero_()
        else:  # strided: index the views element by element (a reshape of them would be a copy)
            s, d = src.grad.numpy(), dest.grad.numpy()
            si = np.unravel_index(np.arange(src_offset, src_offset + count), src.shape)
            di = np.unravel_index(np.arange(dest_offset, dest_offset + count), dest.shape)
            s[si] += d[di]
            src.grad._storage.bump("Tape.backward")
            if not dest.retain_grad:
                d[di] = 0
                dest.grad._storage.bump("Tape.backward")

    for tape in registry.local.recorders:
        tape.record_func(backward, [dest, src], writes=(dest,))


def _copy_elements(dest: array, src: array, dest_offset: int, src_offset: int, count: int) -> None:
    """`wp.copy` element by element, through NumPy (strided arrays, different dtypes of one size, memory of
    different devices)."""
    host = dest._host()
    d = host.reshape((dest.size,) + host.shape[dest.ndim:])
    s = src._host()
    s = s.reshape((src.size,) + s.shape[src.ndim:])
    d[dest_offset:dest_offset + count] = s[src_offset:src_offset + count].reshape(d[:count].shape)
    if not dest.is_contiguous:
        host[...] = d.reshape(host.shape)
    dest._write_back(host)


def from_ptr(ptr: int, length: int = 0, dtype: Any = float, shape: Any = None, device: Any = None) -> array:
    """An array over memory this process already owns at address `ptr` (not copied, not freed)."""
    if not isinstance(ptr, int) or ptr <= 0:
        raise ValueError(f"from_ptr needs a non-null integer address, got {ptr!r}")
    return array(ptr=ptr, dtype=dtype, shape=shape if shape is not None else (length,), device=device)


def from_numpy(arr: Any, dtype: Any = None, shape: Any = None, device: Any = None,
               requires_grad: bool = False) -> array:
    """A new array holding a copy of `arr` (a NumPy array or any object with an array protocol, read in
    place before the copy; dtype inferred when not given)."""
    return array(arr, dtype=dtype if dtype is not None else Any, shape=shape, device=device,
                 requires_grad=requires_grad)
