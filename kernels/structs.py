"""`@wp.struct`: user record types with scalar, vector, matrix, array and nested-struct fields.

The decorated class becomes a `StructType` subclass: instances hold field values in Python (arrays
are kept alive by reference) and pack to the native layout (`ctypes` mirrors the C++ struct the
module source declares) when passed to a kernel.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import builtins as B
from . import types as T
from .annotations import arg_type
from .array import ArrayDesc, IndexedDesc, array, indexedarray
from .ir import ArrayType, ctype

_ids = itertools.count()


class StructType(T.RecordType):
    """Base of every @wp.struct class. `cls.fields` maps field names to kernel types."""

    is_tuple: bool = False

    def __init__(self, **values: Any) -> None:
        object.__setattr__(self, "_values", {})
        for name, t in self.fields.items():
            self._values[name] = _default(t)
        for name, v in values.items():
            setattr(self, name, v)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"struct {type(self).__name__} has no field '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        t = self.fields.get(name)
        if t is None:
            raise AttributeError(f"struct {type(self).__name__} has no field '{name}'")
        self._values[name] = _convert(type(self).__name__, name, t, value)

    def _pack(self) -> Any:
        """The native value: a ctypes structure with every field filled in."""
        c = self._ctype()
        for name, t in self.fields.items():
            v = self._values[name]
            if isinstance(t, ArrayType):
                layout = IndexedDesc if t.indexed else ArrayDesc
                desc = layout.from_buffer_copy(v._desc_bytes()) if v is not None else layout()
                setattr(c, name, desc)
            elif is_struct(t):
                setattr(c, name, v._pack())
            elif T.is_composite(t):
                setattr(c, name, v)
            else:
                setattr(c, name, T._to_ctype_value(t, v))
        return c

    def arrays(self, prefix: str = "") -> Any:
        """(field path, array) of every array this struct holds, nested structs' too."""
        for name, t in self.fields.items():
            v = self._values[name]
            if isinstance(t, ArrayType) and v is not None:
                yield prefix + name, v
            elif is_struct(t):
                yield from v.arrays(f"{prefix}{name}.")

    def numpy_value(self) -> tuple:
        """The value as one NumPy record of `numpy_dtype()`, as a tuple in field order (nested structs as
        tuples, vectors and matrices as arrays, array fields as their descriptor bytes)."""
        return np.frombuffer(bytes(self._pack()), dtype=np.dtype(self.numpy_dtype()))[0].item()

    @classmethod
    def numpy_dtype(cls) -> dict:
        """The NumPy record layout of one struct value (`names`, `formats`, `offsets`, `itemsize`), as
        arrays of this struct expose it; array fields appear as their raw descriptor bytes."""
        names = list(cls.fields)
        return {"names": names, "formats": [_numpy_format(cls.fields[n]) for n in names],
                "offsets": [getattr(cls._ctype, n).offset for n in names], "itemsize": ctypes.sizeof(cls._ctype)}

    @classmethod
    def from_bytes(cls, raw: bytes, device: Any = None) -> StructType:
        """A struct value from its native bytes (an array element of `device`). An array field becomes a view
        of the memory its descriptor names, which it does not keep alive (as Warp's); indexed arrays and null
        descriptors stay None."""
        c = cls._ctype.from_buffer_copy(raw)
        inst = cls()
        for name, t in cls.fields.items():
            v = getattr(c, name)
            if isinstance(t, ArrayType):
                if not t.indexed and v.data:
                    inst._values[name] = array(ptr=v.data, dtype=t.dtype, shape=tuple(v.shape[:t.ndim]),
                                               strides=tuple(v.strides[:t.ndim]), device=device)
                continue
            if is_struct(t):
                inst._values[name] = t.from_bytes(bytes(v), device)
            elif T.is_composite(t):
                inst._values[name] = t.from_buffer_copy(bytes(v))
            elif t in (T.float16, T.bfloat16):  # stored as their 16 bits
                inst._values[name] = float(T.from_storage(t, np.array(v, dtype=np.uint16).view(t.np_dtype)))
            else:
                inst._values[name] = T._py_value(t, v)
        return inst

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={self._values[n]!r}" for n in self.fields)
        return f"{type(self).__name__}({inner})"


def is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, StructType) and t is not StructType


def _numpy_format(t: Any) -> Any:
    """The NumPy format of one struct field: its scalar type (float16 as float16), (scalar, shape) for
    vectors and matrices, a nested record for structs and for array descriptors (data, grad, shape,
    strides, ndim)."""
    if isinstance(t, ArrayType):
        return np.dtype(field_ctype(t))
    if is_struct(t):
        return np.dtype(t.numpy_dtype())
    if T.is_composite(t):
        return (T.elem_scalar(t).np_dtype, t._shape_)
    return t.np_dtype


def _default(t: Any) -> Any:
    if isinstance(t, ArrayType):
        return None
    if is_struct(t):
        return t()
    if T.is_composite(t):
        return t()
    return T._py_value(t, 0)


def _convert(struct_name: str, name: str, t: Any, value: Any) -> Any:
    where = f"field '{name}' of struct {struct_name}"
    if isinstance(t, ArrayType):
        if value is None:
            return None
        kind = indexedarray if t.indexed else array
        if not isinstance(value, kind) or value.dtype != t.dtype or value.ndim != t.ndim:
            raise TypeError(f"{where} expects {t}, got {value!r}")
        return value
    if is_struct(t):
        if not isinstance(value, t):
            raise TypeError(f"{where} expects a {t.__name__}, got {type(value).__name__}")
        return value
    if T.is_composite(t):
        try:
            return value if type(value) is t else t(value.numpy_value() if isinstance(value, T._CompositeMixin)
                                                    else value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{where} expects {T.type_name(t)}: {e}") from None
    if isinstance(value, array | T._CompositeMixin) or not np.isscalar(value if not isinstance(
            value, T.ScalarType) else value.value):
        raise TypeError(f"{where} expects {T.type_name(t)}, got {type(value).__name__}")
    return T._py_value(t, value)


def struct(cls: type) -> type:
    """Decorator: turn an annotated class into a struct type usable in kernels and as kernel arguments."""
    annotations = dict(getattr(cls, "__annotations__", {}))
    if not annotations:
        raise TypeError(f"@wp.struct {cls.__name__} declares no fields (annotate them: `x: float`)")
    fields: dict[str, Any] = {}
    for name, ann in annotations.items():
        if isinstance(ann, str):
            ann = eval(ann, vars(sys.modules[cls.__module__]))  # noqa: S307 - the user's own annotation
        try:
            fields[name] = arg_type(ann)
        except TypeError as e:
            raise TypeError(f"@wp.struct {cls.__name__}: field '{name}': {e}") from None
    ctype_fields = [(n, field_ctype(t)) for n, t in fields.items()]
    layout = type(f"{cls.__name__}_ctype", (ctypes.Structure,), {"_fields_": ctype_fields})
    cname = f"lw::s_{re.sub(r'[^0-9A-Za-z_]', '_', cls.__qualname__)}_{next(_ids)}"
    attrs = {"fields": fields, "cname": cname, "_ctype": layout, "__module__": cls.__module__,
             "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    return type(cls.__name__, (StructType,), attrs)


def field_ctype(t: Any) -> Any:
    """The ctypes type a value of kernel type `t` occupies in an argument block or a struct."""
    if isinstance(t, ArrayType):
        return IndexedDesc if t.indexed else ArrayDesc
    if T.is_composite(t):
        return t
    return t._ctype  # scalars and records


def struct_differentiable(t: Any) -> bool:
    """Whether a struct (or field type) carries adjoints: some non-array field of float type."""
    if is_struct(t):
        return any(not isinstance(f, ArrayType) and struct_differentiable(f) for f in t.fields.values())
    return T.elem_scalar(t).is_float if (T.is_scalar(t) or T.is_composite(t)) else False


_tuple_types: dict[tuple, type] = {}


def tuple_type(types: tuple) -> type:
    """The record type of a function's multiple return values (`return a, b`): a struct with fields
    f0, f1, ... that the caller unpacks (`a, b = f(x)`) or indexes with constants (`r[0]`)."""
    t = _tuple_types.get(types)
    if t is None:
        fields = {f"f{i}": ft for i, ft in enumerate(types)}
        ctype_fields = [(n, field_ctype(ft)) for n, ft in fields.items()]
        layout = type("tuple_ctype", (ctypes.Structure,), {"_fields_": ctype_fields})
        cname = "lw::tuple_" + "_".join(re.sub(r"[^0-9A-Za-z]", "_", ctype(ft)) for ft in types)
        name = f"tuple[{', '.join(T.type_name(ft) for ft in types)}]"
        t = type(name, (StructType,), {"fields": fields, "cname": cname, "_ctype": layout, "is_tuple": True})
        _tuple_types[types] = t
    return t


def is_tuple(t: Any) -> bool:
    return is_struct(t) and t.is_tuple


@dataclass(frozen=True)
class StructOf(B.Pattern):
    """Any struct type, the same wherever `var` recurs (for builtins that only pass values along)."""

    var: str = "V"

    def match(self, t: Any, b: dict) -> bool:
        return is_struct(t) and self.bind(b, self.var, t)

    def __str__(self) -> str:
        return "struct"


B.add("select", (B.Exact(T.bool_), StructOf(), StructOf()), "V", group="Utility",
      doc="select(cond, a, b): b where cond holds, else a (structs too)")
B.add("where", (B.Exact(T.bool_), StructOf(), StructOf()), "V", group="Utility",
      doc="where(cond, a, b): a where cond holds, else b (structs too)")
