"""DLPack capsules: memory handed between frameworks (PyTorch, JAX, NumPy, CuPy...) without a copy.

The DLPack C structures (`DLTensor`, `DLManagedTensor`, `DLManagedTensorVersioned`, standard v1.1) are
written and read here at the byte level, with layouts fixed once, so an exchange costs about a microsecond:

* `export_capsule` lays a managed tensor out in a buffer that also keeps the memory's owner alive and
  wraps it in a PyCapsule named "dltensor" (legacy) or "dltensor_versioned". The consumer renames the
  capsule "used_..." and calls the tensor's deleter when done; a capsule nobody consumed calls it when
  it is freed. Either way the owner is released exactly once.
* `import_capsule` takes a producer's capsule, renames it "used_..." (so a second import is refused),
  and returns what it describes with an owner object whose death calls the producer's deleter once. The
  capsule is read natively in one call (native/dlpack.cpp).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, NamedTuple

from . import types as T
from .cpu import dlpack_library

# DLPack device types (DLDeviceType) and the loomwork device kind each is
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE_KINDS = {KDL_CPU: "cpu", KDL_CUDA_HOST: "cpu", KDL_CUDA: "cuda", KDL_CUDA_MANAGED: "cuda"}
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
                 11: "ROCm host", 12: "external", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon",
                 17: "MAIA"}

# DLPack data type codes (DLDataTypeCode) and bit widths of the scalar types
_CODES = {T.bool_: (6, 8), T.int8: (0, 8), T.int16: (0, 16), T.int32: (0, 32), T.int64: (0, 64),
          T.uint8: (1, 8), T.uint16: (1, 16), T.uint32: (1, 32), T.uint64: (1, 64),
          T.float16: (2, 16), T.float32: (2, 32), T.float64: (2, 64), T.bfloat16: (4, 16)}
_SCALARS = {code: st for st, code in _CODES.items()}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool",
               7: "float8_e3m4", 8: "float8_e4m3"}

READ_ONLY, IS_COPIED = 1, 2  # DLManagedTensorVersioned flags
VERSION = (1, 1)  # the DLPack version we produce and read

# byte layouts on a 64-bit machine: DLTensor is data, device (type, id), ndim, dtype (code, bits, lanes),
# shape*, strides*, byte_offset; DLManagedTensor appends manager_ctx and deleter; the versioned one puts
# version, manager_ctx, deleter and flags before its DLTensor
_TENSOR = "QiiiBBHQQQ"
_LEGACY = struct.Struct("<" + _TENSOR + "QQ")
_VERSIONED = struct.Struct("<IIQQQ" + _TENSOR)
_LEGACY_CTX, _VERSIONED_CTX = 48, 8  # offsets of manager_ctx
_LEGACY_NAME, _LEGACY_USED = b"dltensor", b"used_dltensor"
_VERSIONED_NAME, _VERSIONED_USED = b"dltensor_versioned", b"used_dltensor_versioned"

_api = ctypes.pythonapi


def _c_api(name: str, restype: Any, *argtypes: Any) -> Any:
    """A private binding of a Python C API function: the shared `ctypes.pythonapi.<name>` objects have
    argtypes other libraries set too (jax.ffi.pycapsule sets PyCapsule_New's)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, _api))


_capsule_new = _c_api("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_capsule_name = _c_api("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_incref = _c_api("Py_IncRef", None, ctypes.py_object)
_decref = _c_api("Py_DecRef", None, ctypes.c_void_p)
# a capsule being freed is passed by address: converting it to an object would revive it
_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _callbacks(name: bytes, ctx_offset: int) -> tuple[Any, Any]:
    """The deleter of the managed tensors we export and the destructor of their capsules (which releases a
    tensor no consumer took). Both drop the reference the tensor holds on its holder (which owns the
    tensor's bytes and keeps the array's memory alive), read from its manager_ctx. C keeps their
    addresses and may call them while the interpreter shuts down, so they are made immortal and bind
    everything they use."""
    decref, read_ptr, valid, pointer = _decref, ctypes.c_void_p.from_address, _valid_raw, _pointer_raw

    def delete(managed: int) -> None:
        decref(read_ptr(managed + ctx_offset).value)

    def destroy(capsule: int) -> None:
        if valid(capsule, name):
            delete(pointer(capsule, name))

    fns = (_Deleter(delete), _Deleter(destroy))
    for fn in fns:
        _incref(fn)
    return fns


_legacy_deleter, _legacy_destructor = _callbacks(_LEGACY_NAME, _LEGACY_CTX)
_versioned_deleter, _versioned_destructor = _callbacks(_VERSIONED_NAME, _VERSIONED_CTX)
_LEGACY_FNS = (ctypes.cast(_legacy_deleter, ctypes.c_void_p).value,
               ctypes.cast(_legacy_destructor, ctypes.c_void_p).value)
_VERSIONED_FNS = (ctypes.cast(_versioned_deleter, ctypes.c_void_p).value,
                  ctypes.cast(_versioned_destructor, ctypes.c_void_p).value)

_layouts: dict[tuple[bool, int], tuple[struct.Struct, type]] = {}


def _layout(versioned: bool, ndim: int) -> tuple[struct.Struct, type]:
    """The packing and the buffer type of an exported tensor of `ndim` dimensions: the managed tensor,
    then its shape and strides."""
    key = (versioned, ndim)
    found = _layouts.get(key)
    if found is None:
        head = _VERSIONED if versioned else _LEGACY
        packer = struct.Struct(head.format + f"{ndim}q{ndim}q")
        found = _layouts[key] = (packer, ctypes.c_char * max(packer.size, 1))
    return found


def dtype_code(st: type[T.ScalarType]) -> tuple[int, int]:
    """The DLPack (type code, bits) of a scalar type."""
    return _CODES[st]


class Export(NamedTuple):
    """What an exported tensor says besides its address (worked out once per array): `shape` and `strides`
    in elements, the scalar type and the DLPack (device type, id)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    scalar: type[T.ScalarType]
    device: tuple[int, int]


def export_capsule(ptr: int, layout: Export, owner: Any, versioned: bool, flags: int = 0) -> Any:
    """A DLPack capsule of the memory at `ptr`, keeping `owner` alive until the consumer is done with it."""
    shape, strides, st, device = layout
    ndim = len(shape)
    packer, buffer_type = _layouts.get((versioned, ndim)) or _layout(versioned, ndim)
    tensor = buffer_type()
    holder = [tensor, owner]  # what the managed tensor's reference keeps alive
    base = ctypes.addressof(tensor)
    code, bits = _CODES[st]
    if versioned:
        deleter, destructor = _VERSIONED_FNS
        extents = base + _VERSIONED.size
        packer.pack_into(tensor, 0, VERSION[0], VERSION[1], id(holder), deleter, flags, ptr, device[0], device[1],
                         ndim, code, bits, 1, extents, extents + 8 * ndim, 0, *shape, *strides)
        name = _VERSIONED_NAME
    else:
        deleter, destructor = _LEGACY_FNS
        extents = base + _LEGACY.size
        packer.pack_into(tensor, 0, ptr, device[0], device[1], ndim, code, bits, 1, extents, extents + 8 * ndim, 0,
                         id(holder), deleter, *shape, *strides)
        name = _LEGACY_NAME
    _incref(holder)  # the managed tensor's reference, dropped by its deleter
    return _capsule_new(base, name, destructor)


class Imported(NamedTuple):
    """What a consumed DLPack capsule describes. `strides` are in elements (None: C-contiguous);
    `owner` keeps the memory alive and calls the producer's deleter when it is freed."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    scalar: type[T.ScalarType]
    device_type: int
    device_id: int
    readonly: bool
    owner: Any


class _Managed:
    """Owns a managed tensor received from a producer: its deleter is called once, when this dies."""

    __slots__ = ("ptr", "deleter")

    def __init__(self, ptr: int, deleter: Any) -> None:
        self.ptr, self.deleter = ptr, deleter

    def __del__(self) -> None:
        if self.deleter is not None:
            self.deleter(self.ptr)


_deleters: dict[int, Any] = {}  # a producer's deleter function by address, callable from Python


def _deleter_at(address: int) -> Any:
    fn = _deleters.get(address)
    if fn is None:
        fn = _deleters[address] = _Deleter(address)
    return fn


def capsule_state(obj: Any) -> str | None:
    """"fresh" or "used" for a DLPack capsule (by its name), None for anything else."""
    if type(obj).__name__ != "PyCapsule":
        return None
    name = _capsule_name(obj)
    return "used" if name in (_LEGACY_USED, _VERSIONED_USED) else "fresh" if name in (
        _LEGACY_NAME, _VERSIONED_NAME) else None


#: the native reader's record: data, deleter, managed tensor, then status, device type and id, ndim, type code,
#: bits, lanes, flags, whether strides follow, version major and minor (and padding); shape and strides after it
_RECORD = struct.Struct("<QQQ12i")
_MAX_DIMS = 32
_STATUS_USED, _STATUS_NOT_DLPACK, _STATUS_TOO_NEW, _STATUS_TOO_MANY_DIMS = 1, 2, 3, 4
_readers = threading.local()  # each thread's (native reader, record buffer, its address)


def _reader() -> tuple[Any, Any, int]:
    found = getattr(_readers, "r", None)
    if found is None:
        read = ctypes.PYFUNCTYPE(None, ctypes.py_object, ctypes.c_void_p, ctypes.c_uint32)(
            ("lw_dlpack_import", dlpack_library()))  # a PYFUNCTYPE call keeps the GIL, which the C API needs
        record = ctypes.create_string_buffer(_RECORD.size + 16 * _MAX_DIMS)
        found = _readers.r = (read, record, ctypes.addressof(record))
    return found


def import_capsule(capsule: Any) -> Imported:
    """Consume a producer's DLPack capsule ("dltensor" or "dltensor_versioned")."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"Expected a valid DLPack capsule, got {type(capsule).__name__}")
    read, record, address = _readers.__dict__.get("r") or _reader()
    read(capsule, address, VERSION[0])
    data, deleter, managed, status, dev_type, dev_id, ndim, code, bits, lanes, flags, strided, major, minor, _ = \
        _RECORD.unpack_from(record)
    if status:
        if status == _STATUS_USED:
            raise BufferError("this DLPack capsule was already consumed (a capsule can be imported only once)")
        if status == _STATUS_TOO_NEW:
            raise BufferError(f"DLPack capsule of version {major}.{minor}: loomwork reads version {VERSION[0]}.x")
        if status == _STATUS_TOO_MANY_DIMS:
            raise BufferError(f"a DLPack tensor of {ndim} dimensions: loomwork reads up to {_MAX_DIMS}")
        raise TypeError(f"expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', got "
                        f"{_capsule_name(capsule)!r}")
    st = _SCALARS.get((code, bits))
    if st is None or lanes != 1:
        kind = _CODE_NAMES.get(code, f"code {code}")
        what = f"{kind}{bits}" + (f" x{lanes} lanes" if lanes != 1 else "")
        raise TypeError(f"DLPack data type {what} has no loomwork scalar type")
    if not ndim:
        shape, strides = (), None
    elif strided:
        extents = _int64s(2 * ndim).unpack_from(record, _RECORD.size)
        shape, strides = extents[:ndim], extents[ndim:]
    else:
        shape, strides = _int64s(ndim).unpack_from(record, _RECORD.size), None
    owner = _Managed(managed, _deleters.get(deleter) or _deleter_at(deleter)) if deleter else None
    return _new_tuple(Imported, (data, shape, strides, st, dev_type, dev_id, bool(flags & READ_ONLY), owner))


_int64_structs = [struct.Struct(f"{n}q") for n in range(17)]  # shapes and strides of up to 8 dimensions
_new_tuple = tuple.__new__


def _int64s(n: int) -> struct.Struct:
    return _int64_structs[n] if n < len(_int64_structs) else struct.Struct(f"{n}q")


def device_name(device_type: int) -> str:
    """A DLPack device type's name, for messages."""
    return _DEVICE_NAMES.get(device_type, f"device type {device_type}")
