"""`array`: a typed, strided view of device memory, 1-D to 4-D, and the functions that make one.

An array is a pointer, a shape, byte strides, a dtype and a device, plus whatever keeps the memory
alive (`_owner`). The device's backend allocates, copies and zeroes the memory; where it is host
memory (the CPU: a NumPy buffer) `.numpy()` is a zero-copy view.
The same class spelled without data (`wp.array(dtype=float, ndim=2)`, `wp.array2d[float]`) is the
annotation of a kernel parameter.
"""

from __future__ import annotations

import builtins
import ctypes
from typing import Any

import numpy as np

from . import types as T
from .device import Device, get_device
from .errors import DeviceError

MAX_DIMS = 4


class ArrayDesc(ctypes.Structure):
    """What a kernel receives for an array argument; mirrors `lw::array_t<T>` in the native header."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("grad", ctypes.c_uint64),
        ("shape", ctypes.c_int32 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class _Storage:
    """What views of one allocation share: a write version (bumped by every tracked write) and who
    wrote last, so a Tape can tell when an array it recorded was overwritten.

    Writes loomwork does not make bump nothing, so the storage also knows whether its memory is
    `exposed` to them (a `.numpy()` view or `__array_interface__` was handed out, or the memory is a
    wrapped NumPy buffer or a `ptr=`/`from_ptr` alias); a Tape then compares a checksum of the
    memory (`digest`). When memory a Tape read while it was private (`watched`) is first exposed,
    its checksum at that moment (the content the Tape saw, if the version is unchanged) is kept as
    `snapshot`: (version, checksum)."""

    __slots__ = ("version", "writer", "exposed", "watched", "snapshot", "device", "ptr", "nbytes")

    def __init__(self, device: Device | None = None, ptr: int = 0, nbytes: int = 0) -> None:
        self.version = 0
        self.writer = "Python code"
        self.exposed = False
        self.watched = False
        self.snapshot: tuple[int, int | None] | None = None
        self.device, self.ptr, self.nbytes = device, ptr, nbytes

    def expose(self) -> None:
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
        raise ValueError(f"array shape {shape} has a negative extent")
    if any(s >= 2**31 for s in shape):
        raise ValueError(f"array shape {shape} has an extent of 2^31 or more")
    return shape


def byte_span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Where the elements of a strided view lie: (offset of the lowest byte, bytes up to the highest)."""
    if not all(shape):
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s > 0) + itemsize
    return lo, hi - lo


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, acc = [], itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class array:  # noqa: N801 - Warp's public name
    """A typed n-dimensional array (1-D to 4-D) on a device; see the module docstring."""

    _default_ndim: int | None = None

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
    ) -> None:
        ndim = ndim if ndim is not None else self._default_ndim
        self._desc: bytes | None = None
        self._grad: array | None = None
        self._grad_external = False
        self.requires_grad = False
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
            self._init_from_data(data, shape, copy)
        elif ptr is not None:
            if shape is None:
                raise ValueError("wp.array(ptr=...) needs a shape")
            self._init_view(ptr, _normalize_shape(shape), strides, owner)
            if not isinstance(owner, array):  # memory from elsewhere: anyone may write it
                self._storage.expose()
        elif shape is not None:
            self._init_new(_normalize_shape(shape), zero=True)
        else:  # an annotation, or an empty array
            self.ptr = None
            self.ndim = ndim or 1
            self.shape = (0,) * self.ndim
            self.strides = (0,) * self.ndim
            self.size = 0
            self.capacity = 0
            self._storage = _Storage()
            self._inner_contiguous = True
        if ndim is not None and ndim != self.ndim:
            raise ValueError(f"array built with ndim={ndim} has shape {self.shape}")
        if requires_grad:
            self.requires_grad = True
            if self.ptr is not None or self.size == 0:
                self._grad = zeros_like(self, requires_grad=False) if self.ptr is not None else None

    # -- construction helpers ------------------------------------------------------------

    def _check_host(self, what: str) -> None:
        """Operations done with NumPy need memory the host can read (the device's backend says)."""
        if not self.device.backend.host_accessible:
            raise DeviceError(f"{what} on device {self.device} is not supported yet")

    def _init_new(self, shape: tuple[int, ...], zero: bool) -> None:
        nbytes = max(int(np.prod(shape)) * T.type_size(self.dtype), 1)
        ptr, owner = self.device.backend.allocate(nbytes, zero=zero)
        self._init_view(ptr, shape, None, owner)
        self.capacity = nbytes

    def _init_view(self, ptr: int, shape: tuple[int, ...], strides: Any, owner: Any) -> None:
        itemsize = T.type_size(self.dtype)
        self.ptr = int(ptr)
        self.shape = shape
        self.ndim = len(shape)
        self.strides = tuple(int(s) for s in strides) if strides is not None else _contiguous_strides(
            shape, itemsize
        )
        self.size = int(np.prod(shape))
        self.capacity = self.size * itemsize
        self._owner = owner
        if isinstance(owner, array):
            self._storage = owner._storage
        else:
            lo, nbytes = byte_span(shape, self.strides, itemsize)
            self._storage = _Storage(self.device, self.ptr + lo, nbytes)
        self._inner_contiguous = self.strides[-1] == itemsize or shape[-1] <= 1

    def _init_from_data(self, data: Any, shape: Any, copy: bool) -> None:
        if self.dtype is not None and T.is_struct_type(self.dtype):
            self._init_structs(data, shape)
            return
        if isinstance(data, array):
            src = data._host()
            if self.dtype is None:
                self.dtype = data.dtype
        else:
            src = data if isinstance(data, np.ndarray) else _as_numpy(data, self.dtype)
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
        in_place = not copy and isinstance(data, np.ndarray) and self.device.backend.host_accessible
        if in_place and src.dtype == st.np_dtype:
            item_strides = src.strides[len(outer):]
            expect = _contiguous_strides(inner, st.size)[:len(inner)] if inner else ()
            if item_strides == expect:
                self._init_view(src.ctypes.data, outer, src.strides[: len(outer)], src)
                self._storage.expose()  # the caller's NumPy array writes it too
                return
        self._init_new(outer, zero=False)
        self._host()[...] = T.to_storage(st, src, raw_bits=True)

    def _init_structs(self, data: Any, shape: Any) -> None:
        """An array of structs from a sequence of struct instances (or a NumPy array of records)."""
        record = np.dtype(self.dtype._ctype)
        if isinstance(data, np.ndarray) and data.dtype == record:
            records = data
        else:
            items = list(data)
            for x in items:
                if not isinstance(x, self.dtype):
                    raise TypeError(f"an array of {self.dtype.__name__} takes {self.dtype.__name__} instances, "
                                    f"got {type(x).__name__}")
            records = np.frombuffer(b"".join(bytes(x._pack()) for x in items), dtype=record)
        self._init_new(_normalize_shape(shape if shape is not None else records.shape or (records.size,)), zero=False)
        self._host()[...] = records.reshape(self.shape)

    # -- the array as a value -------------------------------------------------------------

    def __class_getitem__(cls, dtype: Any) -> array:
        return cls(dtype=dtype)

    @property
    def is_contiguous(self) -> bool:
        return self.strides == _contiguous_strides(self.shape, T.type_size(self.dtype))

    @property
    def grad(self) -> array | None:
        return self._grad

    @grad.setter
    def grad(self, g: array | None) -> None:
        if g is not None and (not isinstance(g, array) or g.shape != self.shape or g.dtype != self.dtype):
            raise ValueError(f"gradient must be an array of shape {self.shape} and dtype {T.type_name(self.dtype)}")
        self._grad = g
        self._grad_external = g is not None  # a buffer the caller owns: tapes never zero it on their own
        self._desc = None

    def _desc_bytes(self) -> bytes:
        """The packed `ArrayDesc` passed to kernels (cached: the metadata never changes)."""
        d = self._desc
        if d is None:
            desc = ArrayDesc()
            empty = self.size == 0  # an empty array reads as null in kernels (wp.unot, `if arr:`)
            desc.data = 0 if empty else self.ptr or 0
            desc.grad = (self._grad.ptr or 0) if self._grad is not None and not empty else 0
            for i, (s, st) in enumerate(zip(self.shape, self.strides, strict=True)):
                desc.shape[i] = s
                desc.strides[i] = st
            d = self._desc = bytes(desc)
        return d

    @property
    def __array_interface__(self) -> dict:
        self._storage.expose()
        return self._interface()

    def _interface(self) -> dict:
        self._check_host("__array_interface__")
        if T.is_struct_type(self.dtype):  # a structured NumPy view, one record per struct
            record = np.dtype(self.dtype._ctype)
            return {"version": 3, "shape": self.shape, "strides": self.strides, "typestr": f"|V{record.itemsize}",
                    "descr": record.descr, "data": (self.ptr or 0, False)}
        st = T.elem_scalar(self.dtype)
        inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
        inner_strides = _contiguous_strides(inner, st.size) if inner else ()
        return {
            "version": 3,
            "shape": self.shape + inner,
            "strides": self.strides + inner_strides,
            "typestr": _typestr(st),
            "data": (self.ptr or 0, False),
        }

    def numpy(self) -> np.ndarray:
        """A NumPy view of the data (zero-copy on the CPU); vectors add trailing dimensions."""
        if self.ptr is not None:
            self._storage.expose()
        return self._host()

    def _host(self) -> np.ndarray:
        """`numpy()` for loomwork's own use: the view does not leave it, so the memory stays unexposed."""
        if self.ptr is None:
            inner = self.dtype._shape_ if T.is_composite(self.dtype) else ()
            return np.zeros(self.shape + inner, dtype=T.elem_scalar(self.dtype).np_dtype)
        return np.asarray(_Interface(self._interface(), self))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def list(self) -> list:
        """The elements as a Python list (vectors and matrices as their types)."""
        flat = T.from_storage(T.elem_scalar(self.dtype), self._host()).reshape(
            (self.size,) + (self.dtype._shape_ if T.is_composite(self.dtype) else ()))
        if T.is_composite(self.dtype):
            return [self.dtype(x) for x in flat]
        return flat.tolist()

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"array(shape={self.shape}, dtype={T.type_name(self.dtype)}, device={self.device})"

    def __str__(self) -> str:
        return str(T.from_storage(T.elem_scalar(self.dtype), self._host())) if self.ptr is not None else repr(self)

    # -- views ----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError(f"too many indices ({len(key)}) for an array of {self.ndim} dimensions")
        if all(isinstance(k, int | np.integer) for k in key) and len(key) == self.ndim:
            self._check_host("element access")
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
            view.requires_grad = self.requires_grad
        return view

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_host("element assignment")
        self._storage.bump("element assignment")
        self._host()[key] = T.to_storage(T.elem_scalar(self.dtype), np.asarray(
            value.numpy_value() if isinstance(value, T._CompositeMixin) else value))

    def reshape(self, shape: Any) -> array:
        """A view with a new shape (contiguous arrays only); one extent may be -1."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1]))
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        shape = _normalize_shape(shape)
        if int(np.prod(shape)) != self.size:
            raise ValueError(f"cannot reshape an array of {self.size} elements to {shape}")
        if not self.is_contiguous:
            raise ValueError("reshape needs a contiguous array; call .contiguous() first")
        return array(ptr=self.ptr, dtype=self.dtype, shape=shape, device=self.device, owner=self)

    def transpose(self, axes: Any = None) -> array:
        """A view with permuted dimensions (reversed by default), sharing memory and gradient."""
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"transpose axes {axes} are not a permutation of {self.ndim} dimensions")
        v = array(ptr=self.ptr or 0, dtype=self.dtype, shape=tuple(self.shape[a] for a in axes),
                  strides=tuple(self.strides[a] for a in axes), device=self.device, owner=self)
        if self._grad is not None:
            v._grad = self._grad.transpose(axes)
        return v

    def view(self, dtype: Any) -> array:
        """The same memory seen as another dtype of the same size (e.g. vec3 <-> a struct of three floats)."""
        dt = T.normalize_dtype(dtype)
        if T.type_size(dt) != T.type_size(self.dtype):
            raise TypeError(f"view: {T.type_name(dt)} ({T.type_size(dt)} bytes) and {T.type_name(self.dtype)} "
                            f"({T.type_size(self.dtype)} bytes) differ in size")
        return array(ptr=self.ptr or 0, dtype=dt, shape=self.shape, strides=self.strides, device=self.device,
                     owner=self)

    def flatten(self) -> array:
        return self.reshape((self.size,))

    def contiguous(self) -> array:
        return self if self.is_contiguous else self.clone()

    # -- in-place operations ----------------------------------------------------------------

    def fill_(self, value: Any) -> array:
        """Set every element to `value` (a scalar, or a vector/matrix for such dtypes)."""
        self._check_host("fill_")
        self._storage.bump("fill_()")
        if self.size and T.is_struct_type(self.dtype):
            record = value._pack() if isinstance(value, self.dtype) else None
            if record is None and value != 0:
                raise TypeError(f"fill_ of an array of {self.dtype.__name__} takes a {self.dtype.__name__} or 0")
            self._host()[...] = np.frombuffer(bytes(record), dtype=np.dtype(self.dtype._ctype))[0] if record else 0
            return self
        if self.size:
            v = np.asarray(value.numpy_value() if isinstance(value, T._CompositeMixin) else
                           value.value if isinstance(value, T.ScalarType) else value)
            self._host()[...] = T.to_storage(T.elem_scalar(self.dtype), v)
        return self

    fill = fill_

    def zero_(self) -> array:
        """Set every element to zero (contiguous arrays by the device's backend: large ones on every CPU core)."""
        if self.ptr is not None and self.is_contiguous:
            self._storage.bump("zero_()")
            self.device.backend.zero(self.ptr, self.size * T.type_size(self.dtype))
            return self
        return self.fill_(0)

    def assign(self, src: Any) -> array:
        """Copy the values of `src` (an array, NumPy array or sequence of matching shape) into this array."""
        self._check_host("assign")
        self._storage.bump("assign()")
        st = T.elem_scalar(self.dtype)
        if isinstance(src, array):  # bits when the types agree, values otherwise
            src_st = T.elem_scalar(src.dtype)
            values = src._host() if src_st is st else T.from_storage(src_st, src._host())
        else:
            values = np.asarray(src)
        dst = self._host()
        if values.size != dst.size:
            raise ValueError(f"assign: source has {values.size} values, array has {dst.size}")
        dst[...] = T.to_storage(st, values.reshape(dst.shape), raw_bits=True)
        return self

    def clone(self, device: Any = None, requires_grad: bool | None = None) -> array:
        """A contiguous copy, on `device` (default: the same device)."""
        rg = self.requires_grad if requires_grad is None else requires_grad
        return array(self._host(), dtype=self.dtype, device=device or self.device, requires_grad=rg)

    def to(self, device: Any) -> array:
        """This array on `device` (itself when already there)."""
        return self if get_device(device) == self.device else self.clone(device=device)


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
    if src.size % n == 0 and src.size:
        return src.reshape((-1,) + inner)
    raise ValueError(f"data of shape {src.shape} does not hold whole values of {T.type_name(dtype)}")


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

    def __class_getitem__(cls, dtype: Any) -> indexedarray:
        return cls(dtype=dtype)

    def _desc_bytes(self) -> bytes:
        desc = IndexedDesc()
        desc.arr = ArrayDesc.from_buffer_copy(self.data._desc_bytes())
        for d, (idx, n) in enumerate(zip(self.indices, self.shape, strict=True)):
            desc.indices[d] = idx.ptr if idx is not None else 0
            desc.shape[d] = n
        return bytes(desc)

    def numpy(self) -> np.ndarray:
        """A copy of the selected elements, gathered with NumPy."""
        sel = tuple(idx._host() if idx is not None else slice(None) for idx in self.indices)
        return self.data._host()[np.ix_(*[s if isinstance(s, np.ndarray) else np.arange(n)
                                          for s, n in zip(sel, self.data.shape, strict=False)])]

    def __len__(self) -> int:
        return self.shape[0]

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


def empty(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
          pinned: bool = False) -> array:
    """A new array whose contents are unspecified."""
    a = array(dtype=dtype, device=device, pinned=pinned)
    a._init_new(_normalize_shape(shape), zero=False)
    if requires_grad:
        a.requires_grad = True
        a._grad = zeros_like(a)
    return a


def zeros(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
          pinned: bool = False) -> array:
    """A new array filled with zeros."""
    return array(dtype=dtype, shape=shape, device=device, requires_grad=requires_grad, pinned=pinned)


def full(shape: Any = 0, value: Any = 0, dtype: Any = Any, device: Any = None, requires_grad: bool = False,
         pinned: bool = False) -> array:
    """A new array with every element set to `value` (dtype inferred from it when not given)."""
    if dtype is Any:
        dtype = T.python_value_type(value) or float
        if isinstance(value, int) and not isinstance(value, builtins.bool):
            dtype = T.int32 if -(2**31) <= value < 2**31 else T.int64
    a = empty(shape, dtype, device, requires_grad, pinned)
    return a.fill_(value)


def ones(shape: Any = 0, dtype: Any = float, device: Any = None, requires_grad: bool = False,
         pinned: bool = False) -> array:
    """A new array filled with ones."""
    return full(shape, 1, dtype, device, requires_grad, pinned)


def empty_like(src: array, device: Any = None, requires_grad: bool | None = None) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return empty(src.shape, src.dtype, device or src.device, rg)


def zeros_like(src: array, device: Any = None, requires_grad: bool | None = None) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return zeros(src.shape, src.dtype, device or src.device, rg)


def ones_like(src: array, device: Any = None, requires_grad: bool | None = None) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return ones(src.shape, src.dtype, device or src.device, rg)


def full_like(src: array, value: Any, device: Any = None, requires_grad: bool | None = None) -> array:
    rg = src.requires_grad if requires_grad is None else requires_grad
    return full(src.shape, value, src.dtype, device or src.device, rg)


def clone(src: array, device: Any = None, requires_grad: bool | None = None) -> array:
    """A contiguous copy of `src`."""
    return src.clone(device=device, requires_grad=requires_grad)


def copy(dest: array, src: array, dest_offset: int = 0, src_offset: int = 0, count: int = 0) -> None:
    """Copy `count` elements (default: all of `src`) from `src` to `dest`, at flat element offsets."""
    if not isinstance(dest, array) or not isinstance(src, array):
        raise TypeError("wp.copy takes two arrays")
    if T.type_size(dest.dtype) != T.type_size(src.dtype):
        raise TypeError(f"wp.copy: element sizes differ ({T.type_name(src.dtype)} -> {T.type_name(dest.dtype)})")
    dest._storage.bump("wp.copy()")
    count = count or src.size - src_offset
    if src_offset + count > src.size or dest_offset + count > dest.size or min(count, src_offset, dest_offset) < 0:
        raise ValueError(
            f"wp.copy: {count} elements from offset {src_offset} of {src.size} to offset {dest_offset} of {dest.size}"
            " is out of range"
        )
    if count and dest.dtype == src.dtype and dest.device == src.device and dest.is_contiguous and src.is_contiguous:
        size = T.type_size(dest.dtype)
        dest.device.backend.copy(dest.ptr + dest_offset * size, src.ptr + src_offset * size, count * size)
        return
    dest._check_host("copy")
    src._check_host("copy")
    d = dest._host().reshape((dest.size,) + dest._host().shape[dest.ndim:])
    s = src._host().reshape((src.size,) + src._host().shape[src.ndim:])
    d[dest_offset:dest_offset + count] = s[src_offset:src_offset + count].reshape(d[:count].shape)
    if not dest.is_contiguous:
        dest._host()[...] = d.reshape(dest._host().shape)


def from_ptr(ptr: int, length: int = 0, dtype: Any = float, shape: Any = None, device: Any = None) -> array:
    """An array over memory this process already owns at address `ptr` (not copied, not freed)."""
    if not isinstance(ptr, int) or ptr <= 0:
        raise ValueError(f"from_ptr needs a non-null integer address, got {ptr!r}")
    return array(ptr=ptr, dtype=dtype, shape=shape if shape is not None else (length,), device=device)


def from_numpy(arr: Any, dtype: Any = None, shape: Any = None, device: Any = None,
               requires_grad: bool = False) -> array:
    """A new array holding a copy of NumPy array `arr` (dtype inferred when not given)."""
    a = np.asarray(arr)
    return array(a, dtype=dtype if dtype is not None else Any, shape=shape, device=device,
                 requires_grad=requires_grad)
