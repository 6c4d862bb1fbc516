"""Value types of the kernel language: scalars, vectors, matrices.

Every type carries what the rest of the pipeline needs: its C++ name, its ctypes layout (to pack
launch arguments) and its NumPy dtype (to view arrays). Vectors and matrices are ctypes arrays
so a host-side value has exactly the layout the native code reads.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import operator
from typing import Any

import numpy as np

from .errors import no_overload

# --------------------------------------------------------------------------------------------
# scalars


@functools.total_ordering
class ScalarType:
    """Base of the scalar type classes (`float32`, `int64`, ...).

    A scalar type is used as a class (an annotation, a dtype, a cast in kernels); an instance
    holds one host-side value in `.value`.
    """

    cname: str = ""
    _length_ = 1  # one component, as Warp's scalar types say
    np_dtype: np.dtype  # how arrays store it
    value_dtype: np.dtype  # how NumPy holds its values (they differ for bfloat16 only)
    _ctype: Any = None
    is_float = False
    is_int = False
    is_signed = False
    size = 0

    def __init__(self, x: Any = 0) -> None:
        self.value = _py_value(type(self), x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        """Integer scalars are usable where Python wants an int (ctypes, range, indexing)."""
        if self.is_float:
            raise TypeError(f"{type(self).__name__} is not an integer type")
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == self._compared(other)

    def _compared(self, o: Any) -> Any:
        """The other side of a comparison: a Python int beside a float scalar is taken as a float, as in
        Warp, so one beyond the float range raises OverflowError instead of comparing exactly."""
        if isinstance(o, ScalarType):
            return o.value
        return float(o) if self.is_float and isinstance(o, int) else o

    def __hash__(self) -> int:
        return hash(self.value)

    def _operand(self, other: Any) -> Any:
        if isinstance(other, ScalarType):
            if type(other) is not type(self):
                raise TypeError(f"{type(self).__name__} and {type(other).__name__} operands: convert one first")
            return other.value
        if isinstance(other, int | float | np.number) and not isinstance(other, builtins.bool):
            return other
        return NotImplemented

    def _arith(self, other: Any, op: Any, reverse: bool = False) -> Any:
        """Python-scope arithmetic, rounded to this type (integer types wrap like in kernels)."""
        o = self._operand(other)
        if o is NotImplemented:
            return NotImplemented
        a, b = (o, self.value) if reverse else (self.value, o)
        if self.is_int and op in (operator.floordiv, operator.mod) and b == 0:
            return type(self)(0)  # as in kernels: integer division by zero gives 0
        if self.is_float:  # IEEE results (inf, nan) rather than Python's ZeroDivisionError
            with np.errstate(all="ignore"):
                return type(self)(op(np.float64(a), np.float64(b)))
        if op is operator.mod:  # the remainder takes the sign of a, as in kernels (C semantics, like Warp)
            r = abs(a) % abs(b)
            return type(self)(-r if a < 0 else r)
        return type(self)(op(a, b))

    def __add__(self, o: Any) -> Any:
        return self._arith(o, operator.add)

    def __radd__(self, o: Any) -> Any:
        return self._arith(o, operator.add, True)

    def __sub__(self, o: Any) -> Any:
        return self._arith(o, operator.sub)

    def __rsub__(self, o: Any) -> Any:
        return self._arith(o, operator.sub, True)

    def __mul__(self, o: Any) -> Any:
        return self._arith(o, operator.mul)

    def __rmul__(self, o: Any) -> Any:
        return self._arith(o, operator.mul, True)

    def __truediv__(self, o: Any) -> Any:
        if self.is_int:
            o = self._operand(o)
            return NotImplemented if o is NotImplemented else self.value / o
        return self._arith(o, operator.truediv)

    def __rtruediv__(self, o: Any) -> Any:
        return self._arith(o, operator.truediv, True) if not self.is_int else o / self.value

    def __floordiv__(self, o: Any) -> Any:
        return self._arith(o, operator.floordiv)

    def __mod__(self, o: Any) -> Any:
        return self._arith(o, operator.mod)

    def __pow__(self, o: Any) -> Any:
        if not self.is_float:
            raise TypeError(f"** is defined for float scalars, not {type(self).__name__} (as in kernels)")
        return self._arith(o, operator.pow)

    def __rpow__(self, o: Any) -> Any:
        if not self.is_float:
            raise TypeError(f"** is defined for float scalars, not {type(self).__name__} (as in kernels)")
        return self._arith(o, operator.pow, True)

    def __neg__(self) -> Any:
        return type(self)(-self.value)

    def __pos__(self) -> Any:
        return type(self)(self.value)

    def __abs__(self) -> Any:
        return type(self)(abs(self.value))

    def __lt__(self, o: Any) -> bool:
        return self.value < self._compared(o)

    def __le__(self, o: Any) -> bool:
        return self.value <= self._compared(o)

    def __gt__(self, o: Any) -> bool:
        return self.value > self._compared(o)

    def __ge__(self, o: Any) -> bool:
        return self.value >= self._compared(o)


def _py_value(t: type[ScalarType], x: Any) -> Any:
    if isinstance(x, ScalarType):
        x = x.value
    if t is bfloat16:
        return float(bf16_to_float(bf16_bits(x)))
    if t.is_float:
        return float(np.dtype(t.np_dtype).type(x))
    if t is bool_:
        return builtins.bool(x)
    return int(np.array(x).astype(t.np_dtype))


def _scalar(name: str, cname: str, np_dtype: Any, ctype: Any, kind: str, value_dtype: Any = None) -> type[ScalarType]:
    dt = np.dtype(np_dtype)
    attrs = {
        "cname": cname,
        "np_dtype": dt,
        "value_dtype": np.dtype(value_dtype) if value_dtype is not None else dt,
        "_ctype": ctype,
        "_type_": ctype,  # Warp's spelling: the ctypes type of one value (integers wrap through it)
        "is_float": kind == "f",
        "is_int": kind in "iu",
        "is_signed": kind in "if",
        "size": dt.itemsize,
        "__module__": "loomwork",
    }
    if value_dtype is None:  # np.dtype(wp.float32) and np.zeros(n, dtype=wp.float32) mean float32 (NumPy 2.4+)
        attrs["__numpy_dtype__"] = dt
    return type(name, (ScalarType,), attrs)


bool_ = _scalar("bool", "bool", np.bool_, ctypes.c_bool, "b")
int8 = _scalar("int8", "int8_t", np.int8, ctypes.c_int8, "i")
uint8 = _scalar("uint8", "uint8_t", np.uint8, ctypes.c_uint8, "u")
int16 = _scalar("int16", "int16_t", np.int16, ctypes.c_int16, "i")
uint16 = _scalar("uint16", "uint16_t", np.uint16, ctypes.c_uint16, "u")
int32 = _scalar("int32", "int32_t", np.int32, ctypes.c_int32, "i")
uint32 = _scalar("uint32", "uint32_t", np.uint32, ctypes.c_uint32, "u")
int64 = _scalar("int64", "int64_t", np.int64, ctypes.c_int64, "i")
uint64 = _scalar("uint64", "uint64_t", np.uint64, ctypes.c_uint64, "u")
float16 = _scalar("float16", "lw::half", np.float16, ctypes.c_uint16, "f")
float32 = _scalar("float32", "float", np.float32, ctypes.c_float, "f")
float64 = _scalar("float64", "double", np.float64, ctypes.c_double, "f")
# bfloat16 (the upper 16 bits of a float32): NumPy has no such dtype, so its arrays hold the raw bits
# as uint16 (`.numpy()` shows them); values convert at the boundaries (bf16_bits / bf16_to_float)
bfloat16 = _scalar("bfloat16", "lw::bfloat16", np.uint16, ctypes.c_uint16, "f", value_dtype=np.float32)


def bf16_bits(x: Any) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float values, rounded to nearest even (NaN stays NaN)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def bf16_to_float(bits: Any) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def from_storage(st: type[ScalarType], raw: np.ndarray) -> np.ndarray:
    """The values an array of scalar type `st` holds, from its storage (bfloat16 bits -> float32)."""
    return bf16_to_float(raw) if st is bfloat16 else raw


def to_storage(st: type[ScalarType], values: np.ndarray, raw_bits: bool = False) -> np.ndarray:
    """Values as the array storage of scalar type `st` (bfloat16: bit patterns; with `raw_bits`, uint16
    input is taken as bits already, as `.numpy()` gives them)."""
    if st is bfloat16 and not (raw_bits and values.dtype == np.uint16):
        return bf16_bits(values)
    return values.astype(st.np_dtype, copy=False) if is_scalar(st) else values

scalar_types: tuple[type[ScalarType], ...] = (
    bool_, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
)
int_types = tuple(t for t in scalar_types if t.is_int)
float_types = (float16, bfloat16, float32, float64)
_SUFFIXED_FLOATS = (float16, float32, float64)  # the h/f/d of quath, transformf, spatial_vectord, ...

_NP_TO_SCALAR = {t.np_dtype: t for t in scalar_types if t is not bfloat16}


# --------------------------------------------------------------------------------------------
# vectors and matrices


class _CompositeMixin:
    """Host-side behaviour shared by vector and matrix values (ctypes arrays underneath)."""

    _wp_scalar_type_: type[ScalarType]
    _shape_: tuple[int, ...]
    cname: str

    def _init_from(self, args: tuple) -> None:
        n = self._length_  # type: ignore[attr-defined]
        kind = "matrix" if isinstance(self, MatrixType) else "vector"
        if len(args) == 1 and not _is_number(args[0]):
            flat = np.asarray(_plain(args[0]), dtype=np.float64 if self._wp_scalar_type_.is_float else None)
            flat = flat.reshape(-1)
        elif len(args) == 1:
            flat = [args[0]] * n
        else:
            if kind == "matrix" and not any(_is_number(a) for a in args):  # rows
                cols = self._shape_[1]
                for row in args:
                    if len(row) != cols:
                        raise TypeError(f"Invalid argument in matrix constructor, expected row of length {cols}, "
                                        f"got {row}")
            flat = [a.value if isinstance(a, ScalarType) else a for a in args]
            flat = [x for a in flat for x in (a if isinstance(a, _CompositeMixin | list | tuple) else (a,))]
        if len(args) == 0:
            return
        if len(flat) != n:
            raise ValueError(f"Invalid number of arguments in {kind} constructor, expected {n} elements, "
                             f"got {len(flat)}")
        conv = self._wp_scalar_type_
        for i, x in enumerate(flat):
            ctypes.Array.__setitem__(self, i, _to_ctype_value(conv, x))

    def _flat(self) -> list:
        conv = self._wp_scalar_type_
        raw = [ctypes.Array.__getitem__(self, i) for i in range(self._length_)]  # type: ignore
        if conv is float16:
            return [float(np.uint16(x).view(np.float16)) for x in raw]
        if conv is bfloat16:
            return [float(v) for v in bf16_to_float(raw)]
        return raw

    def numpy_value(self) -> np.ndarray:
        """The value as a NumPy array of the type's shape."""
        return np.array(self._flat(), dtype=self._wp_scalar_type_.value_dtype).reshape(self._shape_)

    @classmethod
    def from_ptr(cls, ptr: int) -> Any:
        """A value copied from host memory at address `ptr` (e.g. an element of a CPU array)."""
        if not ptr:
            raise RuntimeError(f"{cls.__name__}.from_ptr: NULL pointer exception")
        return cls.from_buffer_copy(ctypes.string_at(ptr, ctypes.sizeof(cls)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy_value()
        return a.astype(dtype) if dtype is not None else a

    def __len__(self) -> int:
        return self._shape_[0]

    def __iter__(self):
        for i in range(self._shape_[0]):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        try:
            a, b = self.numpy_value(), np.asarray(_plain(other))
            return bool(a.size == b.size == 0 or np.array_equal(a, b))  # empty slices are equal, as in kernels
        except Exception:
            return False

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._flat())))

    def _same_scalars(self, other: Any, name: str) -> None:
        """Operators on two composite values need one scalar type (kernels have no such overload either)."""
        if isinstance(other, _CompositeMixin) and other._wp_scalar_type_ is not self._wp_scalar_type_:
            raise no_overload(name, (self, other))

    def _binary(self, other: Any, op: Any, reverse: bool = False) -> Any:
        self._same_scalars(other, _OP_NAMES.get(op, "mod"))
        a = self.numpy_value()
        b = np.asarray(other.numpy_value() if isinstance(other, _CompositeMixin) else other)
        r = op(b, a) if reverse else op(a, b)
        return type(self)(r.astype(a.dtype))

    def __add__(self, o):
        return self._binary(o, np.add)

    def __sub__(self, o):
        return self._binary(o, np.subtract)

    def __rsub__(self, o):
        return self._binary(o, np.subtract, True)

    def __mul__(self, o):
        return self._binary(o, np.multiply)

    def __rmul__(self, o):
        return self._binary(o, np.multiply, True)

    def __truediv__(self, o):
        return self._binary(o, np.divide)

    def __rtruediv__(self, o):
        return self._binary(o, np.divide, True)

    def __mod__(self, o):
        """Componentwise remainder with the sign of the dividend (C's, as in kernels); by zero gives 0."""
        with np.errstate(all="ignore"):
            return self._binary(o, lambda a, b: np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))))

    def __rmod__(self, o):
        with np.errstate(all="ignore"):
            return self._binary(o, lambda a, b: np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))), True)

    __radd__ = __add__

    def __neg__(self):
        return type(self)(-self.numpy_value())

    def __pos__(self):
        return type(self)(self.numpy_value())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.numpy_value().tolist()})"


def _plain(x: Any) -> Any:
    """Nested sequences with vector and matrix values replaced by their NumPy values (NumPy would read a
    float16 value's ctypes buffer as its raw bits)."""
    if isinstance(x, _CompositeMixin):
        return x.numpy_value()
    if isinstance(x, list | tuple):
        return [_plain(e) for e in x]
    return x


def _assigned(t: type[ScalarType], x: Any) -> Any:
    """The ctypes value of component `x` assigned into a value of scalar type `t`, checked to be a number."""
    if not _is_number(x):
        raise TypeError(f"Expected to assign a `{t.__name__}` value but got `{type(x).__name__}` instead")
    return _to_ctype_value(t, x)


def _assigned_row(t: type[ScalarType], values: Any, n: int) -> list:
    """The ctypes values of a sequence of `n` components assigned into a slice or row (a sequence, or an
    array-like such as a NumPy array or a CPU tensor)."""
    if _is_number(values):
        values = [values] * n
    elif hasattr(values, "__array__") and not isinstance(values, _CompositeMixin):
        values = np.asarray(values).reshape(-1).tolist()
    else:
        values = list(values)
    for x in values:
        if not _is_number(x):
            raise TypeError(f"Expected to assign a slice from a sequence of `{t.__name__}` values but got "
                            f"`{type(x).__name__}` instead")
    if len(values) != n:
        raise ValueError(f"Can only assign sequence of same size: {n} components, got {len(values)} values")
    return [_to_ctype_value(t, x) for x in values]


def _is_sequence(x: Any) -> bool:
    """A value that holds components: a vector or matrix, a list or tuple, or anything NumPy reads as an array."""
    return isinstance(x, _CompositeMixin | list | tuple | np.ndarray) or hasattr(x, "__array__")


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | np.number | np.bool_ | ScalarType) and not isinstance(
        x, _CompositeMixin
    )


def _to_ctype_value(t: type[ScalarType], x: Any) -> Any:
    if isinstance(x, ScalarType):
        x = x.value
    if t is float16:
        return int(np.array(x, dtype=np.float16).view(np.uint16))
    if t is bfloat16:
        return int(bf16_bits(x))
    return _py_value(t, x)


class VectorType(_CompositeMixin):
    """Marker base of every vector class."""

    _wp_generic_type_str_ = "vec_t"  # Warp's name of the kind (the C++ template)

    def __mul__(self, o):
        if isinstance(o, MatrixType):  # the row vector times the matrix: MatrixType.__rmul__
            return NotImplemented
        return _CompositeMixin.__mul__(self, o)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._flat()[i]
        if not isinstance(i, int | np.integer):
            raise KeyError(f"Invalid key {i}, expected int or slice")
        n = self._length_  # type: ignore[attr-defined]
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__} index {i} out of range [0, {n})")
        return self._flat()[i % n]

    def __str__(self) -> str:
        return "[" + ", ".join(str(x) for x in self) + "]"

    def __setitem__(self, i: Any, v: Any) -> None:
        n = self._length_  # type: ignore[attr-defined]
        if isinstance(i, slice):
            positions = range(n)[i]
            for k, x in zip(positions, _assigned_row(self._wp_scalar_type_, v, len(positions)), strict=True):
                ctypes.Array.__setitem__(self, k, x)
            return
        if not isinstance(i, int | np.integer):
            raise KeyError(f"Invalid key {i}, expected int or slice")
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__} index {i} out of range [0, {n})")
        ctypes.Array.__setitem__(self, i % n, _assigned(self._wp_scalar_type_, v))

    def _component(i: int):  # noqa: N805 - builds properties
        def missing(self) -> AttributeError:
            name = type(self).__name__
            return AttributeError(f"{name} has {self._length_} components, so '{name}' object has no attribute "
                                  f"'{'xyzw'[i]}'")

        def get(self):
            if i >= self._length_:
                raise missing(self)
            return self[i]

        def set_(self, v):
            if i >= self._length_:
                raise missing(self)
            self[i] = v

        return property(get, set_)

    def __setattr__(self, name: str, value: Any) -> None:
        if 2 <= len(name) <= 4 and set(name) <= set("xyzw"):  # not an attribute to add: a swizzle, as Warp refuses
            raise AttributeError(f"vector components are assigned one at a time: '{type(self).__name__}' object has "
                                 f"no attribute '{name}'")
        super().__setattr__(name, value)

    x = _component(0)
    y = _component(1)
    z = _component(2)
    w = _component(3)
    del _component


class MatrixType(_CompositeMixin):
    """Marker base of every matrix class; `m[i, j]` is an element, `m[i]` a row vector."""

    _wp_generic_type_str_ = "mat_t"  # Warp's name of the kind (the C++ template)

    def _check_key(self, key: Any) -> bool:
        """Whether `key` takes slices (answered by NumPy); an int, a pair of ints, or else KeyError."""
        if isinstance(key, tuple):
            if len(key) not in (1, 2):
                raise KeyError(f"Invalid key, expected one or two indices, got {len(key)}")
            parts = key
        else:
            parts = (key,)
        if not all(isinstance(k, int | np.integer | slice) for k in parts):
            raise KeyError(f"Invalid key {key}, expected int or pair of ints")
        return any(isinstance(k, slice) for k in parts) or len(parts) == 1 and isinstance(key, tuple)

    def __getitem__(self, key: Any) -> Any:
        rows, cols = self._shape_
        if self._check_key(key):
            r = self.numpy_value()[key]
            st = self._wp_scalar_type_
            return r.item() if r.ndim == 0 else vector(r.shape[0], st)(r) if r.ndim == 1 else matrix(r.shape, st)(r)
        if isinstance(key, tuple):
            i, j = key
            _check_range(i, rows, self)
            _check_range(j, cols, self)
            return self._flat()[(i % rows) * cols + (j % cols)]
        _check_range(key, rows, self)
        row = self._flat()[(key % rows) * cols : (key % rows + 1) * cols]
        return vector(cols, self._wp_scalar_type_)(row)

    def __setitem__(self, key: Any, v: Any) -> None:
        rows, cols = self._shape_
        if self._check_key(key):
            a = self.numpy_value().astype(np.float64)
            a[key] = np.asarray(v.numpy_value() if isinstance(v, _CompositeMixin) else v, dtype=np.float64)
            self._init_from((a.reshape(-1),))
            return
        if isinstance(key, tuple):
            i, j = key
            _check_range(i, rows, self)
            _check_range(j, cols, self)
            ctypes.Array.__setitem__(self, (i % rows) * cols + (j % cols), _assigned(self._wp_scalar_type_, v))
            return
        _check_range(key, rows, self)
        self.set_row(key, v)

    def __str__(self) -> str:
        """Rows one per line, as Warp prints a matrix."""
        return "[" + ",\n ".join("[" + ", ".join(str(x) for x in self.get_row(r)) + "]"
                                  for r in range(self._shape_[0])) + "]"

    def get_row(self, r: int) -> Any:
        """Row `r` as a vector."""
        rows, cols = self._shape_
        if not -rows <= r < rows:
            raise IndexError("Invalid row index")
        return vector(cols, self._wp_scalar_type_)(self._flat()[(r % rows) * cols:(r % rows + 1) * cols])

    def set_row(self, r: int, v: Any) -> None:
        """Assign row `r` from a vector or sequence (or one value for every component)."""
        rows, cols = self._shape_
        if not -rows <= r < rows:
            raise IndexError("Invalid row index")
        values = v.numpy_value() if isinstance(v, _CompositeMixin) else v
        for j, x in enumerate(_assigned_row(self._wp_scalar_type_, values, cols)):
            ctypes.Array.__setitem__(self, (r % rows) * cols + j, x)

    def get_col(self, c: int) -> Any:
        """Column `c` as a vector."""
        rows, cols = self._shape_
        if not -cols <= c < cols:
            raise IndexError("Invalid column index")
        return vector(rows, self._wp_scalar_type_)(self._flat()[c % cols::cols])

    def set_col(self, c: int, v: Any) -> None:
        """Assign column `c` from a vector or sequence (or one value for every component)."""
        rows, cols = self._shape_
        if not -cols <= c < cols:
            raise IndexError("Invalid column index")
        values = v.numpy_value() if isinstance(v, _CompositeMixin) else v
        for i, x in enumerate(_assigned_row(self._wp_scalar_type_, values, rows)):
            ctypes.Array.__setitem__(self, i * cols + c % cols, x)

    def __mul__(self, o):
        """A matrix times a vector or matrix is their product; times a scalar, componentwise."""
        if isinstance(o, VectorType | MatrixType):
            self._same_scalars(o, "mul")
            return self @ o
        return _CompositeMixin.__mul__(self, o)

    def __rmul__(self, o):
        if isinstance(o, VectorType):
            return self.__rmatmul__(o)
        return _CompositeMixin.__rmul__(self, o)

    def __rmatmul__(self, o):
        r = np.asarray(o.numpy_value() if isinstance(o, _CompositeMixin) else o) @ self.numpy_value()
        return vector(r.shape[0], self._wp_scalar_type_)(r)

    def __matmul__(self, o):
        a = self.numpy_value()
        r = a @ (o.numpy_value() if isinstance(o, _CompositeMixin) else np.asarray(o))
        return (matrix(r.shape, self._wp_scalar_type_) if r.ndim == 2 else vector(r.shape[0], self._wp_scalar_type_))(
            r
        )


_OP_NAMES = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.divide: "div"}


def _check_range(i: int, n: int, obj: Any) -> None:
    if not -n <= i < n:
        raise IndexError(f"{type(obj).__name__} index {i} out of range [0, {n})")


def _hamilton(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), [aw * bw - av @ bv]])


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    u, w = q[:3], q[3]
    return v * (2 * w * w - 1) + 2 * w * np.cross(u, v) + 2 * u * (u @ v)


class QuaternionType(VectorType):
    """Marker base of quaternion classes: (x, y, z, w), w the real part; `*` is the Hamilton product."""

    _wp_generic_type_str_ = "quat_t"

    def __mul__(self, o):
        if isinstance(o, QuaternionType):
            return type(self)(_hamilton(self.numpy_value().astype(np.float64), o.numpy_value().astype(np.float64)))
        return VectorType.__mul__(self, o)


class TransformType(VectorType):
    """Marker base of rigid transforms: a translation p (vec3) then a rotation q (quat); `*` composes."""

    _wp_generic_type_str_ = "transform_t"  # Warp's name of the kind (the C++ template)

    def __init__(self, *args, **parts):
        """`transform()` (identity), `transform(p, q)`, `transform(p=..., q=...)` (p defaults to zero, q to the
        identity rotation), `transform(p)`, one scalar for every component, or the 7 components, flat or as one
        sequence. Arguments that fit none of these raise TypeError naming the one at fault, in Warp's words."""
        for k in parts:
            if k not in ("p", "q"):
                raise TypeError(f"got an unexpected keyword argument '{k}'")
        if parts and len(args) > 2:  # the components, and p or q again
            raise TypeError(f"multiple values for argument '{next(iter(parts))}'")
        one = args[0] if len(args) == 1 else None
        if parts or len(args) == 2 or (one is not None and _is_sequence(one) and np.size(_plain(one)) == 3):
            given = dict(zip(("p", "q"), args, strict=False))
            for k, v in parts.items():
                if k in given:
                    raise TypeError(f"multiple values for argument '{k}'")
                given[k] = v
            for k in ("p", "q"):
                if k in given and not _is_sequence(given[k]):
                    raise TypeError(f"Invalid argument '{k}' in transformation constructor: expected a sequence, "
                                    f"got {type(given[k]).__name__}")
            p, q = given.get("p", (0.0, 0.0, 0.0)), given.get("q", (0.0, 0.0, 0.0, 1.0))
            args = (np.concatenate([np.asarray(_plain(v), dtype=np.float64).reshape(-1) for v in (p, q)]),)
        elif not args:
            args = ((0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0),)
        elif one is not None and not _is_number(one) and not _is_sequence(one):
            raise TypeError(f"Invalid argument in transformation constructor: expected a scalar value, got "
                            f"{type(one).__name__}")
        self._init_from(args)

    @property
    def p(self) -> VectorType:
        return vector(3, self._wp_scalar_type_)(self._flat()[:3])

    @p.setter
    def p(self, v: Any) -> None:
        self[0:3] = v

    @property
    def q(self) -> QuaternionType:
        return quaternion(self._wp_scalar_type_)(self._flat()[3:])

    @q.setter
    def q(self, v: Any) -> None:
        self[3:7] = v

    def __mul__(self, o):
        if isinstance(o, TransformType):
            a, b = self.numpy_value().astype(np.float64), o.numpy_value().astype(np.float64)
            p = a[:3] + _rotate(a[3:], b[:3])
            return type(self)(np.concatenate([p, _hamilton(a[3:], b[3:])]))
        return VectorType.__mul__(self, o)


_COMPOSITE_CACHE: dict[tuple, type] = {}
_SUFFIX = {float16: "h", float32: "f", float64: "d", int8: "b", uint8: "ub", int16: "s", uint16: "us",
           int32: "i", uint32: "ui", int64: "l", uint64: "ul"}


def _composite_init(self, *args):
    self._init_from(args)


def _composite(key: tuple, name: str, base: type, st: type[ScalarType], shape: tuple[int, ...], cname: str,
               default_init: bool = True) -> type:
    """The (cached) ctypes-backed class of a vector-like or matrix type."""
    cls = _COMPOSITE_CACHE.get(key)
    if cls is None:
        attrs = {"_wp_scalar_type_": st, "_shape_": shape, "cname": cname, "__module__": "loomwork"}
        if default_init:
            attrs["__init__"] = _composite_init
        length = 1
        for n in shape:
            length *= n
        cls = _COMPOSITE_CACHE[key] = type(name, (base, st._ctype * length), attrs)
    return cls


def _generic_dtype_accepts(dtype: Any, st: Any) -> bool:
    return generic_accepts(dtype, st) if is_generic(dtype) else st is scalar_type(dtype)


def vector(length: Any, dtype: Any) -> Any:
    """The vector class of `length` components of scalar `dtype` (cached: same arguments, same class).
    With `length=Any` or a generic dtype it is a generic annotation matching such vectors."""
    if length is Any or is_generic(dtype):
        if not (length is Any or (isinstance(length, int) and length >= 0)):
            raise ValueError(f"vector length must be a non-negative int or Any, got {length!r}")
        return GenericType(f"vector(length={getattr(length, '__name__', length)}, dtype={type_name(dtype)})",
                           lambda t: is_vector(t) and (length is Any or t._length_ == length)
                           and _generic_dtype_accepts(dtype, t._wp_scalar_type_))
    st = scalar_type(dtype)
    if not isinstance(length, int) or length < 0:
        raise ValueError(f"vector length must be a non-negative int, got {length!r}")
    return _composite(("vec", length, st), f"vec{length}{_SUFFIX.get(st, st.__name__)}", VectorType, st,
                      (length,), f"lw::vec_t<{length}, {st.cname}>")


def matrix(shape: tuple[Any, Any], dtype: Any) -> Any:
    """The matrix class of `shape` = (rows, cols) with scalar `dtype` (cached). With `Any` in the shape
    or a generic dtype it is a generic annotation matching such matrices."""
    if len(shape) != 2:
        raise ValueError(f"matrix shape must be (rows, cols), got {shape!r}")
    if Any in shape or is_generic(dtype):
        r, c = shape
        return GenericType(f"matrix(shape=({getattr(r, '__name__', r)}, {getattr(c, '__name__', c)}), "
                           f"dtype={type_name(dtype)})",
                           lambda t: is_matrix(t) and r in (Any, t._shape_[0]) and c in (Any, t._shape_[1])
                           and _generic_dtype_accepts(dtype, t._wp_scalar_type_))
    st = scalar_type(dtype)
    rows, cols = (int(s) for s in shape)
    return _composite(("mat", rows, cols, st), f"mat{rows}{cols}{_SUFFIX.get(st, st.__name__)}", MatrixType, st,
                      (rows, cols), f"lw::mat_t<{rows}, {cols}, {st.cname}>")


def quaternion(dtype: Any = float32) -> type:
    """The quaternion class of scalar `dtype` (cached)."""
    st = scalar_type(dtype)
    return _composite(("quat", st), f"quat{_SUFFIX.get(st, st.__name__)}", QuaternionType, st, (4,),
                      f"lw::quat_t<{st.cname}>")


def transformation(dtype: Any = float32) -> type:
    """The rigid-transform class of scalar `dtype` (cached); `T()` is the identity."""
    st = scalar_type(dtype)
    return _composite(("transform", st), f"transform{_SUFFIX.get(st, st.__name__)}", TransformType, st, (7,),
                      f"lw::transform_t<{st.cname}>", default_init=False)


def identity(n: int, dtype: Any = float32) -> Any:
    """The n x n identity matrix value (also in kernels: `wp.identity(n=3, dtype=float)`)."""
    return matrix((n, n), dtype)(*np.eye(n).ravel())


def _infer_scalar(args: tuple) -> Any:
    first = args[0] if args else 0.0
    if isinstance(first, _CompositeMixin):
        return first._wp_scalar_type_
    return python_value_type(first) or float32


def vector_value(*args: Any, length: int | None = None, dtype: Any = None) -> Any:
    """`wp.vector(...)`: a vector value from components (or one value to repeat), its length and scalar
    type given or inferred from the arguments; `wp.vector(length=5, dtype=float)` is zero."""
    st = scalar_type(dtype) if dtype is not None else _infer_scalar(args)
    if length is None:
        length = args[0]._length_ if len(args) == 1 and isinstance(args[0], _CompositeMixin) else len(args)
    return vector(length, st)(*args)


def matrix_value(*args: Any, shape: tuple[int, int] | None = None, dtype: Any = None) -> Any:
    """`wp.matrix(...)`: a matrix value from row-major components (or one value to repeat), or the 4x4
    transform `matrix(pos, rot, scale)` = translate(pos) * rotate(rot) * scale(scale)."""
    if len(args) == 3 and is_quat(type(args[1])):
        pos, rot, scl = (np.asarray(a.numpy_value(), dtype=np.float64) for a in args)
        m = np.eye(4)
        m[:3, :3] = np.stack([_rotate(rot, e) for e in np.eye(3)], axis=1) * scl
        m[:3, 3] = pos
        return matrix((4, 4), dtype or args[1]._wp_scalar_type_)(*m.ravel())
    st = scalar_type(dtype) if dtype is not None else _infer_scalar(args)
    if shape is None:
        n = int(round(len(args) ** 0.5))
        if n * n != len(args) or not args:
            raise ValueError("wp.matrix() needs shape= unless given n*n components")
        shape = (n, n)
    return matrix(shape, st)(*args)


def local_array_type(shape: Any, dtype: Any) -> type:
    """The kernel type of a fixed-size local array (`wp.zeros(shape, dtype)` in a kernel, `wp.fixedarray`):
    a vector (1-D) or matrix (2-D, or 1-D of vectors), indexed, assigned and differentiated like one."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape) if isinstance(shape, list | tuple) else shape
    if not (isinstance(shape, tuple) and 1 <= len(shape) <= 2 and all(isinstance(d, int) and d > 0 for d in shape)):
        raise TypeError(f"a local array needs a constant shape of 1 or 2 positive sizes, got {shape!r}")
    if is_vector(dtype) and not (is_quat(dtype) or is_transform(dtype)) and len(shape) == 1:
        return matrix((shape[0], dtype._length_), dtype._wp_scalar_type_)
    if is_composite(dtype):
        raise TypeError(f"local arrays hold scalars or vectors (1-D), not {type_name(dtype)}")
    st = scalar_type(dtype)
    return vector(shape[0], st) if len(shape) == 1 else matrix(shape, st)


def is_quat(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, QuaternionType)


def is_transform(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, TransformType)





# --------------------------------------------------------------------------------------------
# type queries used across the pipeline


def scalar_type(t: Any) -> type[ScalarType]:
    """Normalize a scalar dtype spelling (Python `float`/`int`/`bool`, NumPy dtype, our class)."""
    if isinstance(t, type) and issubclass(t, ScalarType):
        return t
    if t is builtins.float:
        return float32
    if t is builtins.int:
        return int32
    if t is builtins.bool:
        return bool_
    try:
        dt = np.dtype(t)
    except TypeError:
        dt = None
    if dt is not None and dt in _NP_TO_SCALAR:
        return _NP_TO_SCALAR[dt]
    raise TypeError(f"{t!r} is not a scalar type")


class RecordType:
    """Base of the kernel types laid out as C++ records: @wp.struct classes and the native value types
    extensions declare. `fields` maps field names to kernel types, `cname` is the C++ name and
    `_ctype` the ctypes layout."""

    fields: dict[str, Any] = {}
    cname: str = ""
    _ctype: Any = None


def is_record(t: Any) -> bool:
    """Whether `t` is a record type (a @wp.struct class or an extension's native value type)."""
    return isinstance(t, type) and issubclass(t, RecordType) and t._ctype is not None


def is_struct_type(t: Any) -> bool:
    """Whether `t` is a @wp.struct class (a record with Python-side instances)."""
    return is_record(t) and hasattr(t, "_pack")


def normalize_dtype(t: Any) -> type:
    """Normalize any value dtype: a scalar spelling, a vector/matrix class or a struct class."""
    if is_composite(t) or is_struct_type(t):
        return t
    return scalar_type(t)


def is_scalar(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, ScalarType)


def is_vector(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, VectorType)


def is_matrix(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, MatrixType)


def is_composite(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, _CompositeMixin)


def is_float(t: Any) -> bool:
    return is_scalar(t) and t.is_float


def is_int(t: Any) -> bool:
    return is_scalar(t) and t.is_int


def elem_scalar(t: Any) -> type[ScalarType]:
    """The scalar type of a scalar, vector or matrix type."""
    return t._wp_scalar_type_ if is_composite(t) else t


def type_size(t: Any) -> int:
    """Bytes one value of `t` occupies in memory."""
    if is_struct_type(t):
        return ctypes.sizeof(t._ctype)
    return ctypes.sizeof(t) if is_composite(t) else t.size


def type_name(t: Any) -> str:
    """A readable name for messages (`float32`, `vec3f`, `array(dtype=float32, ndim=2)`)."""
    if t is None:
        return "None"
    if isinstance(t, type):
        return t.__name__
    return str(t)


def dtype_to_numpy(t: Any) -> np.dtype:
    """The NumPy dtype of a scalar type (of the scalar component for vectors and matrices)."""
    return elem_scalar(normalize_dtype(t)).np_dtype


def dtype_from_numpy(dt: Any) -> type[ScalarType]:
    """The scalar type matching a NumPy dtype."""
    try:
        return _NP_TO_SCALAR[np.dtype(dt)]
    except (KeyError, TypeError):
        raise TypeError(f"NumPy dtype {dt!r} has no loomwork equivalent") from None


class GenericType:
    """A constraint standing for a type in generic kernels and functions (`wp.Scalar`, `wp.Float`,
    `wp.Int`; `typing.Any` accepts every type). Each launch or call instantiates a concrete copy."""

    def __init__(self, name: str, accepts: Any) -> None:
        self.__name__ = name
        self.accepts = accepts

    def __repr__(self) -> str:
        return f"wp.{self.__name__}"


Scalar = GenericType("Scalar", lambda t: is_scalar(t))
Float = GenericType("Float", lambda t: is_float(t))
Int = GenericType("Int", lambda t: is_int(t))


def is_generic(t: Any) -> bool:
    """Whether `t` (a type, or an array type's dtype) still has to be instantiated."""
    if hasattr(t, "ndim") and hasattr(t, "dtype"):  # an ir.ArrayType
        return is_generic(t.dtype)
    return t is Any or isinstance(t, GenericType)


def generic_accepts(t: Any, concrete: Any) -> bool:
    return t is Any or (isinstance(t, GenericType) and t.accepts(concrete))


def constant(x: Any) -> Any:
    """Mark a module-level value as a compile-time constant of kernels that read it."""
    if isinstance(x, builtins.bool | int | float | ScalarType | _CompositeMixin | RecordType):
        return x
    raise TypeError(f"wp.constant takes a scalar, vector, matrix or struct value. Invalid constant type: {type(x)}")


def python_value_type(x: Any) -> type | None:
    """The kernel type of a Python-scope value used as a constant, or None when it has none."""
    if isinstance(x, builtins.bool | np.bool_):
        return bool_
    if isinstance(x, int):
        return int32 if -(2**31) <= x < 2**31 else int64
    if isinstance(x, float):
        return float32
    if isinstance(x, ScalarType):
        return type(x)
    if isinstance(x, np.number):
        return dtype_from_numpy(x.dtype)
    if isinstance(x, _CompositeMixin):
        return type(x)
    return None


# the named vector and matrix types
for _st in (int8, uint8, int16, uint16, uint32, int64, uint64):  # the other suffixes, named like Warp's
    for _n in (2, 3, 4):
        globals()[f"vec{_n}{_SUFFIX[_st]}"] = vector(_n, _st)
vec2h, vec3h, vec4h = (vector(n, float16) for n in (2, 3, 4))
vec2f, vec3f, vec4f = (vector(n, float32) for n in (2, 3, 4))
vec2d, vec3d, vec4d = (vector(n, float64) for n in (2, 3, 4))
vec2i, vec3i, vec4i = (vector(n, int32) for n in (2, 3, 4))
vec2, vec3, vec4 = vec2f, vec3f, vec4f
mat22f, mat33f, mat44f = (matrix((n, n), float32) for n in (2, 3, 4))
mat22d, mat33d, mat44d = (matrix((n, n), float64) for n in (2, 3, 4))
mat22, mat33, mat44 = mat22f, mat33f, mat44f
mat22h, mat33h, mat44h = (matrix((n, n), float16) for n in (2, 3, 4))
quath, quatf, quatd = (quaternion(t) for t in _SUFFIXED_FLOATS)
quat = quatf
transformh, transformf, transformd = (transformation(t) for t in _SUFFIXED_FLOATS)
transform = transformf
spatial_vectorh, spatial_vectorf, spatial_vectord = (vector(6, t) for t in _SUFFIXED_FLOATS)
spatial_vector = spatial_vectorf
spatial_matrixh, spatial_matrixf, spatial_matrixd = (matrix((6, 6), t) for t in _SUFFIXED_FLOATS)
spatial_matrix = spatial_matrixf
for _name in (f"{kind}{suffix}" for kind in ("spatial_vector", "spatial_matrix") for suffix in "hfd"):
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name  # Warp's names (the 6 and 6x6 types)

#: every type name `import loomwork as wp` exports (scalars, and vectors/matrices in every suffix)
PUBLIC_TYPES = sorted(
    [t.__name__ for t in scalar_types]
    + [f"vec{n}{suffix}" for n in (2, 3, 4) for suffix in _SUFFIX.values()]
    + [f"mat{n}{n}{suffix}" for n in (2, 3, 4) for suffix in ("h", "f", "d")]
    + [f"{kind}{suffix}" for kind in ("quat", "transform", "spatial_vector", "spatial_matrix")
       for suffix in ("", "h", "f", "d")]
    + ["vec2", "vec3", "vec4", "mat22", "mat33", "mat44"]
)


def public_type(name: str) -> type:
    return bool_ if name == "bool" else globals()[name]
