"""Builtins as data: one `Overload` record per signature.

Overload resolution, error messages ("no overload of length() takes (mat33f); these do: ..."),
Python-scope evaluation and documentation all read the same table. A parameter is a pattern over
types with named type variables (`T` the scalar, `N` a vector length, ...) that must agree across
the arguments of one call.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import types as T
from .errors import no_overload
from .ir import ArrayType

# -- parameter patterns ---------------------------------------------------------------------


class Pattern(ABC):
    @abstractmethod
    def match(self, t: Any, b: dict) -> bool:
        """Whether type `t` fits, recording type-variable bindings in `b`."""

    @staticmethod
    def bind(b: dict, key: str | int | None, value: Any) -> bool:
        if key is None or isinstance(key, int):
            return key is None or key == value
        if key in b:
            return b[key] == value
        b[key] = value
        return True


_KINDS: dict[str, Callable[[Any], bool]] = {
    "any": lambda t: True,
    "numeric": lambda t: t is not T.bool_,
    "float": lambda t: t.is_float,
    "int": lambda t: t.is_int,
    "bool": lambda t: t is T.bool_,
}


@dataclass(frozen=True)
class Scalar(Pattern):
    kind: str = "numeric"
    var: str = "T"

    def match(self, t: Any, b: dict) -> bool:
        return T.is_scalar(t) and _KINDS[self.kind](t) and self.bind(b, self.var, t)

    def __str__(self) -> str:
        return {"numeric": "Scalar", "float": "Float", "int": "Int", "bool": "bool", "any": "Scalar"}[self.kind]


@dataclass(frozen=True)
class Vec(Pattern):
    kind: str = "numeric"
    var: str = "T"
    n: str | int = "N"

    def match(self, t: Any, b: dict) -> bool:
        # "VT" records the class itself: a quaternion stays a quaternion through elementwise operations
        # (a vector whose length has its own variable, like outer's second, records "VT<var>")
        cls_key = "VT" if not isinstance(self.n, str) or self.n == "N" else f"VT{self.n}"
        return (T.is_vector(t) and _KINDS[self.kind](t._wp_scalar_type_) and self.bind(b, self.var, t._wp_scalar_type_)
                and self.bind(b, self.n, t._length_) and self.bind(b, cls_key, t))

    def __str__(self) -> str:
        return f"vec{self.n if isinstance(self.n, int) else ''}({'Float' if self.kind == 'float' else 'Scalar'})"


@dataclass(frozen=True)
class Mat(Pattern):
    kind: str = "numeric"
    var: str = "T"
    rows: str | int = "R"
    cols: str | int = "C"

    def match(self, t: Any, b: dict) -> bool:
        return (T.is_matrix(t) and _KINDS[self.kind](t._wp_scalar_type_) and self.bind(b, self.var, t._wp_scalar_type_)
                and self.bind(b, self.rows, t._shape_[0]) and self.bind(b, self.cols, t._shape_[1]))

    def __str__(self) -> str:
        return "mat(Scalar)"


@dataclass(frozen=True)
class Quat(Pattern):
    var: str = "T"

    def match(self, t: Any, b: dict) -> bool:
        return T.is_quat(t) and self.bind(b, self.var, t._wp_scalar_type_)

    def __str__(self) -> str:
        return "quat(Float)"


@dataclass(frozen=True)
class Transform(Pattern):
    var: str = "T"

    def match(self, t: Any, b: dict) -> bool:
        return T.is_transform(t) and self.bind(b, self.var, t._wp_scalar_type_)

    def __str__(self) -> str:
        return "transform(Float)"


@dataclass(frozen=True)
class Value(Pattern):
    """Any value type (scalar, vector, matrix, quaternion, transform), the same wherever `var` recurs."""

    var: str = "V"

    def match(self, t: Any, b: dict) -> bool:
        return (T.is_scalar(t) or T.is_composite(t)) and self.bind(b, self.var, t)

    def __str__(self) -> str:
        return "Value"


@dataclass(frozen=True)
class Exact(Pattern):
    type: Any

    def match(self, t: Any, b: dict) -> bool:
        return t == self.type

    def __str__(self) -> str:
        return T.type_name(self.type)


@dataclass(frozen=True)
class Arr(Pattern):
    """A (not indexed) array; `kind` restricts its scalar dtype, `ndim` its dimension count."""

    kind: str = ""
    ndim: int = 0
    var: str = "T"

    def match(self, t: Any, b: dict) -> bool:
        return (isinstance(t, ArrayType) and not t.indexed and (not self.ndim or t.ndim == self.ndim)
                and (not self.kind or (T.is_scalar(t.dtype) and _KINDS[self.kind](t.dtype)))
                and self.bind(b, self.var, t.dtype))

    def __str__(self) -> str:
        parts = ([f"dtype={Scalar(self.kind)}"] if self.kind else []) + ([f"ndim={self.ndim}"] if self.ndim else [])
        return f"array({', '.join(parts)})"


@dataclass(frozen=True)
class ArrayValue(Pattern):
    """A (not indexed) array, its whole type bound to `var` (for a result of the argument's own type)."""

    var: str = "A"

    def match(self, t: Any, b: dict) -> bool:
        return isinstance(t, ArrayType) and not t.indexed and self.bind(b, self.var, t)

    def __str__(self) -> str:
        return "array"


@dataclass(frozen=True)
class Out(Pattern):
    """An output parameter: the argument names a variable (or a field or element) that the call assigns.
    `type` is what it receives: a type, a type-variable name or a rule on the bindings (like a return
    type); `inout` passes the variable's current value in as well (an iterator's state, a random state).
    A variable not defined yet (`t` is None) is created with that type."""

    type: Any
    inout: bool = False

    def match(self, t: Any, b: dict) -> bool:
        want = _ret(self.type)(b)
        return want is not None and (t is None or t == want)

    def __str__(self) -> str:
        t = self.type
        name = T.type_name(t) if isinstance(t, type) else t if isinstance(t, str) else "value"
        return f"{'inout' if self.inout else 'out'} {name}"


def InOut(type: Any) -> Out:  # noqa: N802 - reads like the Out pattern it makes
    """An in-out parameter (see `Out`)."""
    return Out(type, inout=True)


# -- the records ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Overload:
    """One signature of a builtin: how to match it, its result type and its native symbol."""

    name: str
    params: tuple[Pattern, ...]
    ret: Callable[[dict], Any]
    native: str
    group: str
    doc: str
    differentiable: bool = True
    adjoint: str | None = None  # the native adjoint's symbol: adj(args..., adj_args&..., adj_ret)
    header: Any = None  # an extension's NativeHeader that declares `native` (None: loomwork.h)
    # the result also depends on differentiable memory that a handle argument names (a mesh's points): the
    # adjoint runs, to send gradients there, even when no argument is differentiable
    reads_state: bool = False
    # the call writes into the arrays it is passed (tile_store): a side effect the adjoint's replay skips
    writes: bool = False
    # the position of a tile argument whose storage the result may share (the native reads each element of it
    # before writing that element of the result): `t = f(..., t, ...)` then builds the result in `t` itself
    result_alias: int | None = None

    def signature(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"

    @property
    def outputs(self) -> tuple[int, ...]:
        """Positions of the out and in-out parameters."""
        return tuple(i for i, p in enumerate(self.params) if isinstance(p, Out))

    def match(self, arg_types: list[Any]) -> dict | None:
        if len(arg_types) != len(self.params):
            return None
        b: dict = {}
        for p, t in zip(self.params, arg_types, strict=True):
            if t is None and not isinstance(p, Out):
                return None
            if not p.match(t, b):
                return None
        return b

    def output_types(self, b: dict) -> tuple:
        """The types the out and in-out parameters receive, in order."""
        return tuple(_ret(self.params[i].type)(b) for i in self.outputs)


class Builtin:
    """The public object behind a builtin name (`wp.sin`); kernels resolve it by argument types."""

    def __init__(self, name: str, group: str, doc: str, py: Callable | None = None, raw_py: bool = False) -> None:
        self.name = name
        self.group = group
        self.__doc__ = doc
        self.overloads: list[Overload] = []
        self._py = py
        self._raw_py = raw_py  # `py` takes the arguments as given (typed scalars kept), not as NumPy values

    def __repr__(self) -> str:
        return f"<loomwork builtin {self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Python scope: evaluate with NumPy, typed like the overload a kernel would pick."""
        if self._py is None:
            raise TypeError(f"wp.{self.name}() is a kernel builtin: call it inside a @wp.kernel or @wp.func")
        if kwargs or self._raw_py:  # keyword forms (dtype=...) give typed values themselves
            return self._py(*args, **kwargs)
        types = [T.python_value_type(a) or T.float64 for a in args]
        found = resolve(self.name, types) if self.overloads else None
        vals = [np.asarray(a.numpy_value(), dtype=np.float64) if isinstance(a, T._CompositeMixin) else
                a.value if isinstance(a, T.ScalarType) else a for a in args]
        r = self._py(*vals)
        ret = found[0].ret(found[1]) if found else None
        if ret is not None and T.is_composite(ret):
            return ret(np.asarray(r))
        return r.item() if isinstance(r, np.generic) else r


BUILTINS: dict[str, Builtin] = {}
# per builtin name: explanations of a call no overload takes, f(argument types) -> a message or None; the first
# message replaces the generic "no overload of ..." text (a module that adds overloads says why its own fail)
NO_MATCH: dict[str, list[Callable[[list[Any]], str | None]]] = {}


def _erfinv(x: Any) -> Any:
    """Python-scope inverse error function: Newton steps on math.erf from a logarithmic first guess."""
    x = np.asarray(x, dtype=np.float64)
    y = np.sign(x) * np.sqrt(np.maximum(-np.log(np.maximum((1.0 - x) * (1.0 + x), 1e-300)), 0.0) * 0.8)
    erf = np.vectorize(math.erf)
    for _ in range(60):
        y = y - (erf(y) - x) / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
    return np.where(np.abs(x) < 1.0, y, np.where(np.abs(x) == 1.0, np.sign(x) * np.inf, np.nan))


def _fold(f: Any, args: tuple) -> Any:
    """Python-scope min/max: f (np.fmin / np.fmax) of two values, or folded over one vector's components."""
    return f.reduce(np.asarray(args[0]).ravel()) if len(args) == 1 else f(*args)


def _bit_count(x: Any) -> int:
    """Python-scope bit_count: set bits in the value's own width (a Python int is an int32 when it fits)."""
    if isinstance(x, T.ScalarType) and type(x).is_int:
        width, v = type(x).size * 8, int(x.value)
    elif isinstance(x, np.integer):
        width, v = x.dtype.itemsize * 8, int(x)
    elif isinstance(x, int) and not isinstance(x, bool):
        width, v = (32 if -(2**31) <= x < 2**31 else 64), x
    else:
        raise no_overload("bit_count", (x,))
    return bin(v & ((1 << width) - 1)).count("1")


def _quat_to_axis_angle(q: Any) -> tuple:
    """Python-scope quat_to_axis_angle: (axis, angle) as the kernel builtin computes them, the axis in q's
    precision (float32 for a plain sequence)."""
    st = q._wp_scalar_type_ if isinstance(q, T._CompositeMixin) else T.float32
    v = np.asarray(q.numpy_value() if isinstance(q, T._CompositeMixin) else q, dtype=np.float64)
    s, f = float(np.linalg.norm(v[:3])), -1.0 if v[3] < 0 else 1.0
    axis = v[:3] * (f / s) if s > 0 else np.zeros(3)
    return T.vector(3, st)(axis), 2.0 * math.atan2(s, f * v[3])


def _ret(spec: Any) -> Callable[[dict], Any]:
    if callable(spec) and not isinstance(spec, type):
        return spec
    if isinstance(spec, str):
        return lambda b: b[spec]
    return lambda b: spec


def add(name: str, params: tuple, ret: Any, native: str | None = None, *, group: str, doc: str,
        differentiable: bool = True, adjoint: str | None = None, header: Any = None,
        py: Callable | None = None, raw_py: bool = False, reads_state: bool = False) -> Overload:
    """Add an overload of builtin `name` (created on first use). The native symbol defaults to
    `lw::<name>` and, for a differentiable overload of loomwork.h, its adjoint to `lw::adj_<name>`."""
    native = native or f"lw::{name}"
    if differentiable and adjoint is None:
        if header is not None:
            raise ValueError(f"builtin {name}: a differentiable overload from an extension header needs its "
                             "adjoint symbol (adjoint=...), or differentiable=False")
        adjoint = "lw::adj_" + native.removeprefix("lw::")
    bi = BUILTINS.get(name)
    if bi is None:
        bi = BUILTINS[name] = Builtin(name, group, doc, py, raw_py)
    ov = Overload(name, tuple(params), _ret(ret), native, group, doc, differentiable,
                  adjoint if differentiable else None, header, reads_state and differentiable)
    bi.overloads.append(ov)
    return ov


def vec_ret(b: dict) -> Any:
    return b.get("VT") or T.vector(b["N"], b["T"])


def mat_ret(b: dict) -> Any:
    return T.matrix((b["R"], b["C"]), b["T"])


S, F, I = Scalar(), Scalar("float"), Scalar("int")
V, VF, M = Vec(), Vec("float"), Mat()

# operators (also reachable as wp.add, wp.mul, ...)
for op, doc in (("add", "a + b"), ("sub", "a - b")):
    add(op, (S, S), "T", group="Operators", doc=doc)
    add(op, (V, V), vec_ret, group="Operators", doc=doc)
    add(op, (M, M), mat_ret, group="Operators", doc=doc)
add("mul", (S, S), "T", group="Operators", doc="a * b; matrix products for matrices and vectors")
add("mul", (V, S), vec_ret, group="Operators", doc="")
add("mul", (S, V), vec_ret, group="Operators", doc="")
add("mul", (M, S), mat_ret, group="Operators", doc="")
add("mul", (S, M), mat_ret, group="Operators", doc="")
add("mul", (Mat(cols="K"), Vec(n="K")), lambda b: T.vector(b["R"], b["T"]), group="Operators", doc="")
add("mul", (Vec(n="K"), Mat(rows="K")), lambda b: T.vector(b["C"], b["T"]), group="Operators", doc="")
add("mul", (Mat(cols="K"), Mat(rows="K", cols="C2")), lambda b: T.matrix((b["R"], b["C2"]), b["T"]),
    group="Operators", doc="")
add("div", (S, S), "T", group="Operators", doc="a / b (integers truncate; integer division by zero gives 0)")
add("div", (V, S), vec_ret, group="Operators", doc="")
add("div", (S, V), vec_ret, group="Operators", doc="")
add("div", (M, S), mat_ret, group="Operators", doc="")
add("div", (S, M), mat_ret, group="Operators", doc="")
add("floordiv", (S, S), "T", group="Operators", doc="a // b, rounded toward negative infinity",
    differentiable=False)
add("mod", (S, S), "T", group="Operators", doc="a % b with the sign of a (C semantics, like Warp); componentwise "
    "for vectors")
add("mod", (V, V), vec_ret, group="Operators", doc="")
add("neg", (S,), "T", group="Operators", doc="-a")
add("neg", (V,), vec_ret, group="Operators", doc="")
add("neg", (M,), mat_ret, group="Operators", doc="")
add("pos", (S,), "T", group="Operators", doc="+a")
add("pos", (V,), vec_ret, group="Operators", doc="")
VI, MI = Vec("int"), Mat("int")
for op, sym in (("bit_and", "&"), ("bit_or", "|"), ("bit_xor", "^"), ("lshift", "<<"), ("rshift", ">>")):
    add(op, (I, I), "T", group="Operators", doc=f"a {sym} b on integers (componentwise on integer vectors "
        "and matrices)", differentiable=False)
    add(op, (VI, VI), vec_ret, group="Operators", doc="", differentiable=False)
    add(op, (MI, MI), mat_ret, group="Operators", doc="", differentiable=False)
add("invert", (I,), "T", group="Operators", doc="~a on integers (componentwise on integer vectors and "
    "matrices); `not a` on bools", differentiable=False)
add("invert", (VI,), vec_ret, group="Operators", doc="", differentiable=False)
add("invert", (MI,), mat_ret, group="Operators", doc="", differentiable=False)
add("invert", (Scalar("bool"),), T.bool_, group="Operators", doc="", differentiable=False)
for op, sym in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")):
    add(op, (Scalar("any"), Scalar("any")), T.bool_, group="Operators", doc=f"a {sym} b", differentiable=False)
for op, sym in (("eq", "=="), ("ne", "!=")):
    add(op, (Scalar("any"), Scalar("any")), T.bool_, group="Operators", doc=f"a {sym} b", differentiable=False)
    add(op, (V, V), T.bool_, group="Operators", doc="", differentiable=False)
    add(op, (M, M), T.bool_, group="Operators", doc="", differentiable=False)
add("truth", (Scalar("any"),), T.bool_, group="Operators", doc="a != 0", differentiable=False)

# scalar math
_unary_float = {
    "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "exp": np.exp, "log": np.log,
    "log2": np.log2, "log10": np.log10, "cbrt": np.cbrt, "degrees": np.degrees, "radians": np.radians,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}
for _name, _py in _unary_float.items():
    add(_name, (F,), "T", group="Scalar Math", doc=f"{_name}(x) of a float", py=_py)
for _name, _py in (("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc),
                   ("round", lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
                   ("frac", lambda x: x - np.trunc(x))):
    add(_name, (F,), "T", group="Scalar Math", doc=f"{_name}(x) of a float", differentiable=_name == "frac",
        py=_py)
add("rint", (F,), "T", group="Scalar Math", doc="x rounded to the nearest integer, halfway cases to even",
    differentiable=False, py=np.rint)
add("atan2", (F, F), "T", group="Scalar Math", doc="the angle of (x, y): atan2(y, x)", py=np.arctan2)
add("copysign", (F, F), "T", group="Scalar Math", doc="the magnitude of x with the sign of y (signed zeros too)",
    py=np.copysign)
add("bit_count", (I,), T.int32, group="Scalar Math", differentiable=False,
    doc="the number of set bits of an integer in its fixed-width two's-complement form",
    py=_bit_count, raw_py=True)
add("pow", (F, F), "T", group="Scalar Math", doc="x raised to the power y", py=np.power)
add("min", (S, S), "T", group="Scalar Math", doc="the smaller of a and b (componentwise for vectors); "
    "min(v): the smallest component; a NaN operand or component gives way to a number, as C's fmin",
    py=lambda *a: _fold(np.fmin, a))
add("min", (V, V), vec_ret, group="Scalar Math", doc="")
add("min", (V,), "T", group="Scalar Math", doc="")
add("max", (S, S), "T", group="Scalar Math", doc="the larger of a and b (componentwise for vectors); "
    "max(v): the largest component; NaN gives way likewise", py=lambda *a: _fold(np.fmax, a))
add("max", (V, V), vec_ret, group="Scalar Math", doc="")
add("max", (V,), "T", group="Scalar Math", doc="")
add("clamp", (S, S, S), "T", group="Scalar Math", doc="x limited to [lo, hi]", py=np.clip)
add("abs", (S,), "T", group="Scalar Math", doc="|x| (componentwise for vectors); its gradient at 0 is 1",
    py=np.abs)
add("abs", (V,), vec_ret, group="Scalar Math", doc="")
add("sign", (S,), "T", group="Scalar Math", doc="-1 where x < 0, else 1 (componentwise for vectors)",
    differentiable=False, py=lambda x: np.where(x < 0, -1, 1))
add("sign", (V,), vec_ret, group="Scalar Math", doc="", differentiable=False)
add("step", (S,), "T", group="Scalar Math", doc="1 where x < 0, else 0", differentiable=False,
    py=lambda x: np.where(x < 0, 1, 0))
add("nonzero", (S,), "T", group="Scalar Math", doc="1 where x != 0, else 0", differentiable=False,
    py=lambda x: np.where(x != 0, 1, 0))
for _name, _py in (("isnan", lambda x: bool(np.any(np.isnan(x)))), ("isinf", lambda x: bool(np.any(np.isinf(x)))),
                   ("isfinite", lambda x: bool(np.all(np.isfinite(x))))):
    add(_name, (F,), T.bool_, group="Scalar Math", doc=f"{_name}(x); of a vector or matrix: "
        f"{'whether every component is finite' if _name == 'isfinite' else 'whether any component is'}",
        differentiable=False, py=_py)
    add(_name, (VF,), T.bool_, group="Scalar Math", doc="", differentiable=False)
    add(_name, (Mat("float"),), T.bool_, group="Scalar Math", doc="", differentiable=False)
add("erf", (F,), "T", group="Scalar Math", doc="the error function", py=np.vectorize(math.erf))
add("erfc", (F,), "T", group="Scalar Math", doc="the complementary error function 1 - erf(x)",
    py=np.vectorize(math.erfc))
add("erfinv", (F,), "T", group="Scalar Math", doc="the inverse error function on (-1, 1)", py=_erfinv)
add("erfcinv", (F,), "T", group="Scalar Math", doc="the inverse complementary error function on (0, 2)",
    py=lambda x: _erfinv(1.0 - np.asarray(x, dtype=np.float64)))
add("lerp", (F, F, F), "T", group="Scalar Math", doc="a + (b - a) * t", py=lambda a, b, t: a + (b - a) * t)
add("lerp", (VF, VF, F), vec_ret, group="Scalar Math", doc="")
add("lerp", (Mat("float"), Mat("float"), F), mat_ret, group="Scalar Math", doc="")
add("smoothstep", (F, F, F), "T", group="Scalar Math", doc="Hermite interpolation of x between edges a and b",
    py=lambda a, b, x: (lambda t: t * t * (3 - 2 * t))(np.clip((x - a) / (b - a), 0, 1)))

# vector math
add("dot", (V, V), "T", group="Vector Math", doc="the dot product of two vectors", py=np.dot)
add("cross", (Vec(n=3), Vec(n=3)), lambda b: T.vector(3, b["T"]), group="Vector Math",
    doc="the cross product of two 3-vectors", py=np.cross)
add("length", (VF,), "T", group="Vector Math", doc="the Euclidean length of a vector", py=np.linalg.norm)
add("length_sq", (V,), "T", group="Vector Math", doc="the squared length of a vector",
    py=lambda v: np.dot(v, v))
add("normalize", (VF,), vec_ret, group="Vector Math", doc="the vector scaled to length 1 (zero stays zero)",
    py=lambda v: v / np.linalg.norm(v) if np.linalg.norm(v) > 0 else v * 0)
add("cw_mul", (V, V), vec_ret, group="Vector Math", doc="componentwise product", py=np.multiply)
add("cw_div", (V, V), vec_ret, group="Vector Math", doc="componentwise quotient", py=np.divide)
add("cw_mul", (M, M), mat_ret, group="Vector Math", doc="")
add("cw_div", (M, M), mat_ret, group="Vector Math", doc="")
add("transpose", (M,), lambda b: T.matrix((b["C"], b["R"]), b["T"]), group="Vector Math",
    doc="the transpose of a matrix", py=np.transpose)

add("outer", (Vec(n="N"), Vec(n="M")), lambda b: T.matrix((b["N"], b["M"]), b["T"]), group="Vector Math",
    doc="the outer product a b^T", py=np.outer)
add("skew", (Vec(n=3),), lambda b: T.matrix((3, 3), b["T"]), group="Vector Math",
    doc="the cross-product matrix of v: skew(v) @ w == cross(v, w)",
    py=lambda v: np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]]))
SQ = Mat(cols="R")  # square matrices: columns bound to the same size as rows
add("trace", (SQ,), "T", group="Vector Math", doc="the sum of the diagonal", py=np.trace)
add("diag", (V,), lambda b: T.matrix((b["N"], b["N"]), b["T"]), group="Vector Math",
    doc="the diagonal matrix of v", py=np.diag)
add("determinant", (Mat("float", cols="R"),), "T", group="Vector Math", doc="the determinant (sizes up to 4)",
    py=np.linalg.det)
add("inverse", (Mat("float", cols="R"),), lambda b: T.matrix((b["R"], b["R"]), b["T"]), group="Vector Math",
    doc="the inverse (zeros for a singular matrix; sizes up to 4)", py=np.linalg.inv)
add("norm_l1", (V,), "T", group="Vector Math", doc="the sum of absolute values", py=lambda v: np.abs(v).sum())
add("norm_l2", (VF,), "T", group="Vector Math", doc="the Euclidean norm", py=np.linalg.norm)
add("ddot", (M, M), "T", group="Vector Math", doc="the double contraction sum(a * b) of two matrices",
    py=lambda a, b: np.sum(np.multiply(a, b)))
add("argmin", (V,), T.uint32, group="Vector Math", doc="the index of the smallest component (the first on ties)",
    differentiable=False, py=np.argmin)
add("argmax", (V,), T.uint32, group="Vector Math", doc="the index of the largest component (the first on ties)",
    differentiable=False, py=np.argmax)
for _k in (1, 2, 3, 4):
    add("matrix_from_rows", (Vec(n="N"),) * _k, lambda b, _k=_k: T.matrix((_k, b["N"]), b["T"]), group="Vector Math",
        doc="the matrix whose rows are the given vectors (1 to 4)", py=lambda *v: np.stack(v))
    add("matrix_from_cols", (Vec(n="N"),) * _k, lambda b, _k=_k: T.matrix((b["N"], _k), b["T"]), group="Vector Math",
        doc="the matrix whose columns are the given vectors (1 to 4)", py=lambda *v: np.stack(v, axis=1))
for _name, _doc, _py in (
        ("norm_huber", "the Huber norm: |v|^2 / 2 within delta (default 1), delta (|v| - delta / 2) beyond",
         lambda v, d=1.0: (lambda n: 0.5 * n * n if n <= d else d * (n - 0.5 * d))(np.linalg.norm(v))),
        ("norm_pseudo_huber", "the pseudo-Huber norm delta sqrt(1 + |v|^2 / delta^2) (delta default 1)",
         lambda v, d=1.0: d * np.sqrt(1.0 + np.dot(v, v) / (d * d)))):
    add(_name, (VF,), "T", group="Vector Math", doc=_doc, py=_py)
    add(_name, (VF, F), "T", group="Vector Math", doc="")
add("smooth_normalize", (VF,), vec_ret, group="Vector Math",
    doc="v / norm_pseudo_huber(v, delta): a normalization that is smooth at 0 (delta default 1)",
    py=lambda v, d=1.0: np.asarray(v) / (d * np.sqrt(1.0 + np.dot(v, v) / (d * d))))
add("smooth_normalize", (VF, F), vec_ret, group="Vector Math", doc="")
def _decomposition(kind: str) -> Callable:
    """Python scope: `U, sigma, V = wp.svd3(A)` (svd2, qr3, eig3 alike), computed with NumPy in double and
    given the kernel builtin's conventions (rotations, sigma decreasing, eigenvalues ascending) and A's type."""
    def run(a: Any) -> tuple:
        if not isinstance(a, T.MatrixType) or a._shape_[0] != a._shape_[1]:
            raise TypeError(f"wp.{kind}() takes a square matrix, got {type(a).__name__}")
        m, n = np.asarray(a.numpy_value(), dtype=np.float64), a._shape_[0]
        mat, vec = T.matrix((n, n), a._wp_scalar_type_), T.vector(n, a._wp_scalar_type_)
        if kind == "eig3":
            d, q = np.linalg.eigh(0.5 * (m + m.T))
            return mat(q), vec(d)
        if kind == "qr3":
            q, r = np.linalg.qr(m)
            if np.linalg.det(q) < 0:  # a rotation: flip Q's last column and R's last row together
                q[:, -1], r[-1] = -q[:, -1], -r[-1]
            return mat(q), mat(r)
        u, s, vt = np.linalg.svd(m)
        v = vt.T
        for w in (u, v):  # rotations: a reflection moves into the last singular value
            if np.linalg.det(w) < 0:
                w[:, -1] *= -1.0
                s[-1] = -s[-1]
        return mat(u), vec(s), mat(v)
    return run


# decompositions into the caller's variables: wp.svd3(A, U, sigma, V) (16-bit floats compute in float32)
for _st in (T.float16, T.bfloat16, T.float32, T.float64):
    for _n in (2, 3):
        _m, _v = T.matrix((_n, _n), _st), T.vector(_n, _st)
        add(f"svd{_n}", (Exact(_m), Out(_m), Out(_v), Out(_m)), None, "lw::svd_of", group="Vector Math",
            py=_decomposition(f"svd{_n}"), raw_py=True,
            doc="svd3(A, U, sigma, V): A = U diag(sigma) V^T, U and V rotations, sigma decreasing (the last "
                "negative when det(A) < 0); `U, sigma, V = wp.svd3(A)` returns them" if _n == 3 else
                "svd2(A, U, sigma, V): the 2x2 version of svd3")
    _m, _v = T.matrix((3, 3), _st), T.vector(3, _st)
    add("qr3", (Exact(_m), Out(_m), Out(_m)), None, "lw::qr_givens", group="Vector Math",
        py=_decomposition("qr3"), raw_py=True,
        doc="qr3(A, Q, R): A = Q R, Q a rotation, R upper triangular (`Q, R = wp.qr3(A)` returns them)")
    add("eig3", (Exact(_m), Out(_m), Out(_v)), None, "lw::sym_eig_of", group="Vector Math",
        py=_decomposition("eig3"), raw_py=True,
        doc="eig3(A, Q, d): the symmetric part of A is Q diag(d) Q^T, eigenvectors in Q's columns, d ascending")
BOOL = Exact(T.bool_)
add("select", (BOOL, Value(), Value()), "V", group="Utility",
    doc="select(cond, a, b): b where cond holds, else a (Warp's argument order)",
    py=lambda c, a, b: b if c else a)
add("where", (BOOL, Value(), Value()), "V", group="Utility", doc="where(cond, a, b): a where cond holds, else b",
    py=lambda c, a, b: a if c else b)
add("unot", (Scalar("any"),), T.bool_, group="Operators", doc="not a: true for False and zero",
    differentiable=False, py=lambda a: not a)
add("unot", (Arr(),), T.bool_, group="Operators", doc="true for an empty (null) array", differentiable=False)
add("_grad_of", (ArrayValue(),), "A", "lw::grad_of", group="Utility", differentiable=False,
    doc="an array's gradient, addressed as the array (`wp.adjoint[a]` for an array parameter a in a @wp.func_grad)")
add("div_approx", (F, F), "T", group="Operators",
    doc="a / b, with the fast approximate float32 division on GPUs (exact on the CPU)", py=lambda a, b: a / b)
add("inverse_approx", (Mat("float", cols="R"),), lambda b: T.matrix((b["R"], b["R"]), b["T"]), "lw::inverse",
    group="Vector Math", doc="the inverse; the same computation as wp.inverse here", py=np.linalg.inv)
add("lower_bound", (Arr("any", ndim=1), Scalar("any")), T.int32, group="Utility", differentiable=False,
    doc="lower_bound(arr, value) / lower_bound(arr, begin, end, value): in a sorted 1-D array (or its range "
        "[begin, end)), the first index whose element is >= value; the last index (end - 1) when there is none, "
        "as in Warp, so the result indexes the range")
add("lower_bound", (Arr("any", ndim=1), Exact(T.int32), Exact(T.int32), Scalar("any")), T.int32, group="Utility",
    differentiable=False, doc="")
add("block_dim", (), T.int32, group="Utility", differentiable=False,
    doc="threads per block of the launch on a GPU; 1 on the CPU, where each thread runs on its own, unless "
        "wp.config.enable_cpu_blocks runs a block's threads together")

# quaternions and transforms
Q, TR, V3 = Quat(), Transform(), Vec("float", n=3)
quat_of = lambda b: T.quaternion(b["T"])  # noqa: E731
vec3_of = lambda b: T.vector(3, b["T"])  # noqa: E731
transform_of = lambda b: T.transformation(b["T"])  # noqa: E731
add("mul", (Q, Q), quat_of, group="Quaternion Math", doc="")
add("mul", (TR, TR), transform_of, group="Transformations", doc="")
add("quat_identity", (), T.quatf, group="Quaternion Math", doc="the identity rotation (0, 0, 0, 1) (dtype= for "
    "another scalar type)", differentiable=False,
    py=lambda dtype=None: np.array([0.0, 0.0, 0.0, 1.0]) if dtype is None else T.quaternion(dtype)(0, 0, 0, 1))
add("quat_inverse", (Q,), quat_of, group="Quaternion Math", doc="the inverse of a unit quaternion (its conjugate)",
    py=lambda q: q * np.array([-1.0, -1.0, -1.0, 1.0]))
add("quat_rotate", (Q, V3), vec3_of, group="Quaternion Math", doc="v rotated by q", py=T._rotate)
add("quat_rotate_inv", (Q, V3), vec3_of, group="Quaternion Math", doc="v rotated by the inverse of q",
    py=lambda q, v: T._rotate(q * np.array([-1.0, -1.0, -1.0, 1.0]), v))
add("quat_to_matrix", (Q,), lambda b: T.matrix((3, 3), b["T"]), group="Quaternion Math",
    doc="the 3x3 rotation matrix of q", py=lambda q: np.stack([T._rotate(q, e) for e in np.eye(3)], axis=1))
add("quat_from_axis_angle", (V3, F), quat_of, group="Quaternion Math",
    doc="the rotation by `angle` radians about `axis` (a unit vector)",
    py=lambda axis, a: np.concatenate([np.asarray(axis) * np.sin(a / 2), [np.cos(a / 2)]]))
add("quat_rpy", (F, F, F), quat_of, group="Quaternion Math", doc="the rotation of roll, pitch and yaw angles",
    py=lambda r, p, y: np.array([
        np.cos(y / 2) * np.sin(r / 2) * np.cos(p / 2) - np.sin(y / 2) * np.cos(r / 2) * np.sin(p / 2),
        np.cos(y / 2) * np.cos(r / 2) * np.sin(p / 2) + np.sin(y / 2) * np.sin(r / 2) * np.cos(p / 2),
        np.sin(y / 2) * np.cos(r / 2) * np.cos(p / 2) - np.cos(y / 2) * np.sin(r / 2) * np.sin(p / 2),
        np.cos(y / 2) * np.cos(r / 2) * np.cos(p / 2) + np.sin(y / 2) * np.sin(r / 2) * np.sin(p / 2)]))
add("transform_identity", (), T.transformf, group="Transformations", doc="the identity transform (dtype= for "
    "another scalar type)", differentiable=False,
    py=lambda dtype=None: np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]) if dtype is None
    else T.transformation(dtype)())
add("transform_get_translation", (TR,), vec3_of, group="Transformations", doc="the translation p of t",
    py=lambda t: np.asarray(t)[:3])
add("transform_get_rotation", (TR,), quat_of, group="Transformations", doc="the rotation q of t",
    py=lambda t: np.asarray(t)[3:])
add("transform_point", (TR, V3), vec3_of, group="Transformations", doc="point p moved by t (rotated, then translated)",
    py=lambda t, p: T._rotate(np.asarray(t)[3:], p) + np.asarray(t)[:3])
add("transform_vector", (TR, V3), vec3_of, group="Transformations", doc="vector v rotated by t (no translation)",
    py=lambda t, v: T._rotate(np.asarray(t)[3:], v))
add("transform_multiply", (TR, TR), transform_of, group="Transformations", doc="the composition a * b (b first)",
    py=lambda a, b: (T.transformf(a) * T.transformf(b)).numpy_value())
add("transform_inverse", (TR,), transform_of, group="Transformations", doc="the inverse of a rigid transform",
    py=lambda t: np.concatenate([-T._rotate(np.asarray(t)[3:] * [-1, -1, -1, 1], np.asarray(t)[:3]),
                                 np.asarray(t)[3:] * [-1, -1, -1, 1]]))
add("quat_to_axis_angle", (Q, Out(vec3_of), Out("T")), None, group="Quaternion Math",
    doc="quat_to_axis_angle(q, axis, angle): the unit axis (zero for the identity) and the angle in [0, pi] "
        "of a unit quaternion (a negative w flips the axis: q and -q are one rotation); in Python scope "
        "`axis, angle = wp.quat_to_axis_angle(q)`", py=_quat_to_axis_angle, raw_py=True)
M44 = Mat("float", rows=4, cols=4)
add("transform_point", (M44, V3), vec3_of, group="Transformations", doc="")
add("transform_vector", (M44, V3), vec3_of, group="Transformations", doc="")
add("_make_transform", (V3, Q), transform_of, "lw::make_transform", group="Transformations",
    doc="wp.transform(p, q) inside kernels")

# random numbers: a uint32 state variable each draw advances (an in-out argument; a state read from
# an array advances a copy, as in Warp)
U32, I32, F32, STATE = Exact(T.uint32), Exact(T.int32), Exact(T.float32), InOut(T.uint32)
add("rand_init", (I32,), T.uint32, group="Random", doc="a random state from a seed", differentiable=False)
add("rand_init", (I32, I32), T.uint32, group="Random",
    doc="a random state from a seed and an offset (e.g. the thread index): independent streams",
    differentiable=False)
for _name, _t, _doc in (("randi", I32, "a random int32; randi(state, lo, hi) -> in [lo, hi)"),
                        ("randu", U32, "a random uint32; randu(state, lo, hi) -> in [lo, hi)"),
                        ("randf", F32, "a random float in [0, 1); randf(state, lo, hi) -> in [lo, hi)")):
    add(_name, (STATE,), _t.type, group="Random", doc=f"{_name}(state) -> {_doc}; advances state",
        differentiable=False)
    add(_name, (STATE, _t, _t), _t.type, group="Random", doc="", differentiable=_name == "randf")
add("randn", (STATE,), T.float32, group="Random", doc="randn(state) -> a standard normal float; advances state",
    differentiable=False)
for _name, _ret_t, _doc in (
        ("sample_unit_square", T.vec2f, "a uniform point in the square [-0.5, 0.5)^2"),
        ("sample_unit_cube", T.vec3f, "a uniform point in the cube [-0.5, 0.5)^3"),
        ("sample_unit_ring", T.vec2f, "a uniform point on the unit circle"),
        ("sample_unit_disk", T.vec2f, "a uniform point in the unit disk"),
        ("sample_unit_sphere_surface", T.vec3f, "a uniform point on the unit sphere"),
        ("sample_unit_sphere", T.vec3f, "a uniform point in the unit ball"),
        ("sample_unit_hemisphere_surface", T.vec3f, "a uniform point on the upper (z >= 0) unit hemisphere"),
        ("sample_unit_hemisphere", T.vec3f, "a uniform point in the upper unit half-ball"),
        ("sample_triangle", T.vec2f, "uniform barycentric coordinates (u, v) of a triangle, u + v <= 1")):
    add(_name, (STATE,), _ret_t, group="Random", doc=f"{_name}(state) -> {_doc}; advances state",
        differentiable=False)
add("sample_cdf", (STATE, Arr("float", ndim=1)), T.int32, group="Random",
    doc="sample_cdf(state, cdf): the first index i with cdf[i] >= u for a uniform u in [0, 1) "
        "(inverse-transform sampling of a normalized cumulative distribution); advances state",
    differentiable=False)
add("poisson", (STATE, F32), T.uint32, group="Random",
    doc="poisson(state, lam) -> a Poisson-distributed uint32 count with mean lam; advances state",
    differentiable=False)

# spatial vectors: 6 components, the angular part on top and the linear part at the bottom
V6 = Vec("float", n=6)
spatial_of = lambda b: T.vector(6, b["T"])  # noqa: E731


def _top(a):
    return np.asarray(a)[:3]


def _bottom(a):
    return np.asarray(a)[3:]


add("spatial_top", (V6,), vec3_of, group="Spatial Math", doc="the angular (top) part of a spatial vector",
    py=_top)
add("spatial_bottom", (V6,), vec3_of, group="Spatial Math", doc="the linear (bottom) part of a spatial vector",
    py=_bottom)
add("spatial_dot", (V6, V6), "T", group="Spatial Math", doc="the dot product of two spatial vectors", py=np.dot)
add("spatial_cross", (V6, V6), spatial_of, group="Spatial Math",
    doc="the motion cross product [wa x wb; va x wb + wa x vb]",
    py=lambda a, b: np.r_[np.cross(_top(a), _top(b)), np.cross(_bottom(a), _top(b)) + np.cross(_top(a), _bottom(b))])
add("spatial_cross_dual", (V6, V6), spatial_of, group="Spatial Math",
    doc="the force cross product [wa x wb + va x vb; wa x vb]",
    py=lambda a, b: np.r_[np.cross(_top(a), _top(b)) + np.cross(_bottom(a), _bottom(b)), np.cross(_top(a), _bottom(b))])
M33 = Mat("float", rows=3, cols=3)
add("spatial_adjoint", (M33, M33), lambda b: T.matrix((6, 6), b["T"]), group="Spatial Math",
    doc="the 6x6 matrix [[R, 0], [S, R]] of a rotation R and a coupling S",
    py=lambda r, s: np.block([[r, np.zeros((3, 3))], [s, r]]))
add("_make_spatial", (V3, V3), spatial_of, "lw::make_spatial", group="Spatial Math",
    doc="wp.spatial_vector(w, v) inside kernels")

# noise: gradient (Perlin) noise of a uint32 seed (e.g. a random state) and a position, Warp's fields
V2F, V3F, V4F = Exact(T.vec2f), Exact(T.vec3f), Exact(T.vec4f)
for _x in (F32, V2F, V3F, V4F):
    add("noise", (U32, _x), T.float32, group="Noise", doc="gradient noise at a position (1-D to 4-D), the same "
        "field as Warp's for the same state; differentiable in the position")
add("pnoise", (U32, F32, I32), T.float32, group="Noise", doc="noise periodic with integer periods per axis "
    "(a period <= 0 leaves that axis unwrapped); differentiable in the position")
add("pnoise", (U32, V2F, I32, I32), T.float32, group="Noise", doc="")
add("pnoise", (U32, V3F, I32, I32, I32), T.float32, group="Noise", doc="")
add("pnoise", (U32, V4F, I32, I32, I32, I32), T.float32, group="Noise", doc="")
for _x, _t in ((V2F, T.vec2f), (V3F, T.vec3f), (V4F, T.vec3f)):  # a vec4 is (x, y, z, time): a 3-D field
    add("curlnoise", (U32, _x), _t, group="Noise",
        doc="divergence-free noise: the curl of noise potentials (Warp's field); differentiable in the position")
    add("curlnoise", (U32, _x, U32, F32, F32), _t, group="Noise",
        doc="curlnoise(seed, x, octaves, lacunarity, gain)")

# special forms: the front end handles their arguments itself (arrays, indices, launch state)
SPECIAL_FORMS = {
    "tid": "the index of the current thread; `i, j = wp.tid()` for multi-dimensional launches",
    "atomic_add": "atomically add to array[indices]; returns the previous value",
    "atomic_sub": "atomically subtract from array[indices]; returns the previous value",
    "atomic_min": "atomically take the minimum with array[indices]; returns the previous value",
    "atomic_max": "atomically take the maximum with array[indices]; returns the previous value",
    "atomic_exch": "atomically replace array[indices] with a value; returns the previous value",
    "atomic_cas": "atomic_cas(array, index..., compare, value): store value where array[index] == compare; "
                  "returns the previous value",
    "atomic_and": "atomically AND an integer into array[indices]; returns the previous value",
    "atomic_or": "atomically OR an integer into array[indices]; returns the previous value",
    "atomic_xor": "atomically XOR an integer into array[indices]; returns the previous value",
    "printf": "wp.printf(fmt, *args): print with a C format string from inside a kernel",
    "cast": "cast(value, dtype): the same bytes read as another type of the same size (bit reinterpretation)",
    "breakpoint": "stop in an attached debugger (gdb or cuda-gdb); without one, nothing happens on the CPU",
    "expect_near": "expect_near(a, b, tolerance=1e-6): print a message with the source line when a float "
                   "or float vector differs from b by more than tolerance",
    "expect_eq": "expect_eq(a, b): print a message with the source line when a != b",
    "expect_neq": "expect_neq(a, b): print a message with the source line when a == b",
    "print": "wp.print(value): print a value from inside a kernel, as Python's print does there",
    "static": "wp.static(expr): evaluate expr in Python when the kernel is compiled; "
              "`for i in wp.static(range(n))` unrolls the loop",
}
for _name, _doc in SPECIAL_FORMS.items():
    BUILTINS[_name] = Builtin(_name, "Atomics" if _name.startswith("atomic_") else "Utility", _doc)
BUILTINS["static"]._py = lambda x: x  # in Python scope (a @wp.func run by Python), wp.static(x) is x


class _TransformSetter(Builtin):
    """wp.transform_set_translation / transform_set_rotation: in Python scope they update the value passed."""

    def __init__(self, name: str, first: int, n: int, doc: str) -> None:
        super().__init__(name, "Transformations", doc)
        self._part = slice(first, first + n)

    def __call__(self, xform: Any, value: Any) -> None:
        if not isinstance(xform, T.TransformType):
            raise TypeError(f"wp.{self.name}() sets a part of a transform, got {type(xform).__name__}")
        xform[self._part] = list(value)


for _name, _first, _n, _what in (("transform_set_translation", 0, 3, "translation p (a vec3)"),
                                 ("transform_set_rotation", 3, 4, "rotation q (a quaternion, not normalized)")):
    BUILTINS[_name] = _TransformSetter(_name, _first, _n, f"{_name}(xform, value): set the {_what} of the "
                                       "transform variable or array element xform in place (in kernels also "
                                       "`xform.p = ...` / `xform.q = ...`)")


def _expect(name: str, holds: Callable[..., bool], sep: str) -> Callable:
    """Python scope: print the failed expectation, as the kernel form does (no exception, as in Warp)."""
    def check(a: Any, b: Any, *tol: Any) -> None:
        if not holds(np.asarray(a), np.asarray(b), *tol):
            print(f"{name} failed: {a} {sep} {b}")
    return check


BUILTINS["expect_eq"]._py = _expect("expect_eq", lambda a, b: bool(np.array_equal(a, b)), "!=")
BUILTINS["expect_neq"]._py = _expect("expect_neq", lambda a, b: not np.array_equal(a, b), "==")
BUILTINS["expect_near"]._py = _expect("expect_near", lambda a, b, tol=1e-6: bool(np.all(np.abs(a - b) <= tol)),
                                      "vs")

# Python builtins and `math` functions that kernels may call, and the builtin each means
PYTHON_ALIASES = {
    "min": "min", "max": "max", "abs": "abs", "pow": "pow", "round": "round",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "atan2": "atan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "exp": "exp", "log": "log",
    "log2": "log2", "log10": "log10", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "isnan": "isnan",
    "isinf": "isinf", "isfinite": "isfinite", "degrees": "degrees", "radians": "radians", "cbrt": "cbrt",
}


def candidates(name: str) -> list[Overload]:
    return BUILTINS[name].overloads


def resolve(name: str, arg_types: list[Any]) -> tuple[Overload, dict] | None:
    """The first overload of builtin `name` that accepts `arg_types`, with its type bindings."""
    for ov in BUILTINS[name].overloads:
        b = ov.match(arg_types)
        if b is not None:
            return ov, b
    return None
