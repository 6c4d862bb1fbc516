"""Tiles: block-wide values of a compile-time shape, and the `wp.tile_*` builtins.

A tile is a kernel type (`TileType`: element dtype and shape) whose C++ form is `lw::tile_t` in
`native/tiles.h`. Operators on tiles are overloads in the builtin table (patterns over tile types);
the builtins that take compile-time shapes, dtypes or callables (`tile_load(a, shape=..., offset=...)`,
`tile_map(f, t)`) are front-end call forms registered here, each making one typed call whose native
symbol carries the template arguments. Every differentiable form names its adjoint in tiles.h.

On the CPU a tiled launch runs each block as one task (Warp's CPU semantics: `wp.block_dim()` is 1),
and a tile operation is a loop over the tile's elements that the compiler vectorizes. With
wp.config.enable_cpu_blocks and a block_dim > 1 the module is built for blocks of that many lanes run
together (native/lanes.h, codegen.lane_roles): the leader lane runs each tile operation once for the block.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import builtins as B
from . import ir
from . import types as T
from .errors import KernelIndexError, KernelTypeError, KernelValueError
from .frontend import ASSIGN_HOOKS, STORE_KINDS, SUBSCRIPT_KINDS, Builder, Place, PyObj, call_form
from .functions import Function
from .ir import ArrayType, Const, Operand, ctype

MAX_RANK = 4


@dataclass(frozen=True)
class TileType:
    """The type of a tile value: element dtype and shape (`storage` is Warp's placement hint; on the CPU
    every tile is a value in the block's task, so it does not take part in type equality)."""

    dtype: Any
    shape: tuple[int, ...]
    storage: str = field(default="register", compare=False)
    kernel_value_type = True  # an annotation may name it (annotations.arg_type)

    @property
    def __name__(self) -> str:  # lets type_name() print it
        return f"tile(dtype={T.type_name(self.dtype)}, shape={self.shape})"

    def __str__(self) -> str:
        return self.__name__

    @property
    def element_type(self) -> Any:
        return self.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def cname(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"lw::tile_t<{ctype(self.dtype)}, {len(self.shape)}, {dims}>"

    @property
    def differentiable(self) -> bool:
        """Tiles of float scalars, vectors and matrices carry adjoints."""
        return T.is_float(T.elem_scalar(self.dtype)) if T.is_scalar(self.dtype) or T.is_composite(self.dtype) \
            else False


def is_tile(t: Any) -> bool:
    return isinstance(t, TileType)


@dataclass(frozen=True)
class TileOf(B.Pattern):
    """A tile whose element type fits `inner`; its shape binds `shape` (the same across one call)."""

    inner: B.Pattern
    shape: str = "SHAPE"

    def match(self, t: Any, b: dict) -> bool:
        return is_tile(t) and self.inner.match(t.dtype, b) and self.bind(b, self.shape, t.shape)

    def __str__(self) -> str:
        return f"tile({self.inner})"


def _tile_ret(elem: Callable[[dict], Any]) -> Callable[[dict], Any]:
    return lambda b: TileType(elem(b), b["SHAPE"])


# -- operators: elementwise, as overloads of the operator builtins ------------------------------

_S, _V, _M = B.Scalar(), B.Vec(), B.Mat()
_ELEMS = ((_S, lambda b: b["T"]), (_V, B.vec_ret), (_M, B.mat_ret))
for _op in ("add", "sub"):
    for _p, _r in _ELEMS:
        B.add(_op, (TileOf(_p), TileOf(_p)), _tile_ret(_r), group="Tile Primitives", doc="")
    B.add(_op, (TileOf(_S), _S), _tile_ret(lambda b: b["T"]), group="Tile Primitives", doc="")
    B.add(_op, (_S, TileOf(_S)), _tile_ret(lambda b: b["T"]), group="Tile Primitives", doc="")
for _op in ("mul", "div"):
    B.add(_op, (TileOf(_S), TileOf(_S)), _tile_ret(lambda b: b["T"]), group="Tile Primitives",
          doc="elementwise on tiles of one shape")
    for _p, _r in _ELEMS:
        B.add(_op, (TileOf(_p), _S), _tile_ret(_r), group="Tile Primitives", doc="")
        B.add(_op, (_S, TileOf(_p)), _tile_ret(_r), group="Tile Primitives", doc="")
for _op in ("mul", "div"):  # a tile of scalars with a vector or matrix (or tiles of them): tiles of vectors/matrices
    for _p, _r in _ELEMS[1:]:
        B.add(_op, (TileOf(_S), _p), _tile_ret(_r), group="Tile Primitives", doc="")
        B.add(_op, (_p, TileOf(_S)), _tile_ret(_r), group="Tile Primitives", doc="")
        B.add(_op, (TileOf(_p), TileOf(_S)), _tile_ret(_r), group="Tile Primitives", doc="")
        B.add(_op, (TileOf(_S), TileOf(_p)), _tile_ret(_r), group="Tile Primitives", doc="")
for _op in ("neg", "pos"):
    for _p, _r in _ELEMS:
        B.add(_op, (TileOf(_p),), _tile_ret(_r), group="Tile Primitives", doc="")


def _tile_word(t: Any) -> str:
    return f"tile<{T.type_name(t.dtype)}, {t.shape}>" if is_tile(t) else T.type_name(t)


def _product_of_composites(verb: str) -> Callable[[list[Any]], str | None]:
    """Why a tile product or quotient of vectors/matrices on both sides has no overload (Warp's words)."""
    def why(types: list[Any]) -> str | None:
        if len(types) != 2 or not any(is_tile(t) for t in types):
            return None
        elems = [t.dtype if is_tile(t) else t for t in types]
        if not all(T.is_composite(e) for e in elems):
            return None
        if all(is_tile(t) for t in types):
            return (f"tile elementwise {verb}: the element type must be scalar on at least one side, got "
                    f"{_tile_word(types[0])} and {_tile_word(types[1])}")
        return (f"Cannot {verb} {_tile_word(types[0])} by {_tile_word(types[1])}: at least one operand must be a "
                f"scalar type")
    return why


B.NO_MATCH.setdefault("mul", []).append(_product_of_composites("multiply"))
B.NO_MATCH.setdefault("div", []).append(_product_of_composites("divide"))


# -- helpers for the call forms -----------------------------------------------------------------


def _bind(bld: Builder, node: ast.Call, name: str, params: tuple[str, ...], required: int,
          variadic: bool = False) -> dict[str, ast.expr]:
    """Python-style binding of a call's positional and keyword arguments to `params` (names); the first
    `required` are required. With `variadic`, extra positional arguments go to "*"."""
    got: dict[str, Any] = {}
    pos = list(node.args)
    if len(pos) > len(params) and not variadic:
        bld.error(node, KernelTypeError, f"wp.{name}() takes at most {len(params)} positional arguments "
                  f"({', '.join(params)}), got {len(pos)}")
    for p, a in zip(params, pos, strict=False):
        got[p] = a
    if variadic:
        got["*"] = pos[len(params):]
    for kw in node.keywords:
        if kw.arg is None or kw.arg not in params:
            bld.error(node, KernelTypeError, f"wp.{name}() has no argument {kw.arg!r}; it takes "
                      f"{', '.join(params)}")
        if kw.arg in got:
            bld.error(node, KernelTypeError, f"wp.{name}() got argument {kw.arg!r} twice")
        got[kw.arg] = kw.value
    missing = [p for p in params[:required] if p not in got]
    if missing:
        bld.error(node, KernelTypeError, f"wp.{name}() needs argument(s) {', '.join(missing)}")
    return got


def _static_shape(bld: Builder, n: ast.expr, name: str) -> tuple[int, ...]:
    v = bld.eval_static(n, f"the shape of wp.{name}()")
    shape = (v,) if isinstance(v, int) else tuple(v) if isinstance(v, tuple | list) else None
    if shape is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        bld.error(n, KernelTypeError, f"wp.{name}(): shape must be a compile-time int or tuple of ints, got {v!r}")
    if not 1 <= len(shape) <= MAX_RANK or any(d < 0 for d in shape):
        bld.error(n, KernelValueError, f"wp.{name}(): a tile has 1 to {MAX_RANK} non-negative dimensions, got "
                  f"{shape}")
    return tuple(int(d) for d in shape)


def _static_dtype(bld: Builder, n: ast.expr | None, name: str, default: Any = T.float32) -> Any:
    if n is None:
        return default
    v = bld.compile_time(n, f"the dtype of wp.{name}()")
    try:
        return T.normalize_dtype(v)
    except (TypeError, ValueError):
        bld.error(n, KernelTypeError, f"wp.{name}(): dtype must be a scalar, vector or matrix type, got {v!r}")


def _static_str(bld: Builder, n: ast.expr | None, name: str, default: str) -> str:
    if n is None:
        return default
    v = bld.eval_static(n, f"an argument of wp.{name}()")
    if not isinstance(v, str):
        bld.error(n, KernelTypeError, f"wp.{name}(): expected a string constant, got {v!r}")
    return v


def _ints(bld: Builder, n: ast.expr | None, count: int, name: str, what: str = "offset") -> list[Operand]:
    """Runtime int32 coordinates: a tuple of `count` values or, for one coordinate, a scalar."""
    if n is None:
        return [Const(0, T.int32)] * count
    elts = n.elts if isinstance(n, ast.Tuple) else [n]
    if len(elts) != count:
        bld.error(n, KernelTypeError, f"wp.{name}(): {what} needs {count} coordinate(s), got {len(elts)}")
    out = []
    for e in elts:
        v = bld.value(e)
        if not T.is_int(v.type):
            bld.error(e, KernelTypeError, f"wp.{name}(): {what} coordinates are integers, got {T.type_name(v.type)}")
        out.append(bld.convert(v, T.int32, e) if isinstance(v, Const) else
                   v if v.type is T.int32 else bld.assign_temp(ir.Construct(T.int32, (v,)), T.int32))
    return out


def _tile_arg(bld: Builder, n: ast.expr, name: str, what: str = "a tile") -> Operand:
    v = bld.value(n)
    if not is_tile(v.type):
        bld.error(n, KernelTypeError, f"wp.{name}() expects {what}, got {T.type_name(v.type)}")
    return v


def _array_arg(bld: Builder, n: ast.expr, name: str) -> Operand:
    v = bld.value(n)
    if not isinstance(v.type, ArrayType) or v.type.indexed:
        bld.error(n, KernelTypeError, f"wp.{name}() expects an array, got {T.type_name(v.type)}")
    return v


def emit(bld: Builder, name: str, native: str, args: list[Operand], ret: Any, *, adjoint: str | None = None,
         reads_state: bool = False, writes: bool = False, result_alias: int | None = None) -> Operand | None:
    """One typed call of the native `native` (an expression naming a callable), with adjoint `adjoint`
    (None: not differentiable), whose result may share argument `result_alias`'s storage. Returns the result
    variable (None for no result)."""
    ov = B.Overload(name, tuple(B.Exact(a.type) for a in args), lambda b: ret, native, "Tile Primitives", "",
                    adjoint is not None, adjoint, None, reads_state and adjoint is not None, writes, result_alias)
    call = ir.Call(ov, tuple(args))
    if ret is None:
        bld.emit(ir.Eval(call, line=bld.cur_line))
        return None
    return bld.assign_temp(call, ret)


def _cast(bld: Builder, v: Operand, t: Any, n: ast.AST, what: str) -> Operand:
    """A value as element type `t`: literals adapt, other scalars convert explicitly (as Warp's tile
    constructors cast their fill value)."""
    if v.type == t:
        return v
    if isinstance(v, Const) and v.weak and T.is_scalar(t):
        return bld.convert(v, t, n, what)
    if T.is_scalar(v.type) and T.is_scalar(t):
        return bld.assign_temp(ir.Construct(t, (v,)), t)
    bld.error(n, KernelTypeError, f"{what} expects {T.type_name(t)}, got {T.type_name(v.type)}")


def _adj(t: Any, sym: str) -> str | None:
    """`sym` when tiles of element type `t` are differentiable."""
    return sym if TileType(t, (1,)).differentiable else None


# -- construction ----------------------------------------------------------------------------------


@call_form("tile_zeros", "tile_ones", "tile_empty")
def tile_constant(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    name = obj.name
    a = _bind(bld, node, name, ("shape", "dtype", "storage"), 1)
    t = TileType(_static_dtype(bld, a.get("dtype"), name), _static_shape(bld, a["shape"], name),
                 _static_str(bld, a.get("storage"), name, "register"))
    one = Const(1 if name == "tile_ones" else 0, T.int32, weak=True)
    value = bld.assign_temp(ir.Construct(t.dtype, (one,)), t.dtype) if not T.is_scalar(t.dtype) else \
        _cast(bld, one, t.dtype, node, f"wp.{name}()")
    return emit(bld, name, f"lw::tile_full<{t.cname}>", [value], t)


@call_form("tile_full")
def tile_full(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_full", ("shape", "value", "dtype", "storage"), 2)
    v = bld.value(a["value"])
    default = T.float32 if isinstance(v, Const) and v.weak and T.is_float(v.type) else \
        T.int32 if isinstance(v, Const) and v.weak else v.type
    t = TileType(_static_dtype(bld, a.get("dtype"), "tile_full", default), _static_shape(bld, a["shape"], "tile_full"))
    v = _cast(bld, v, t.dtype, a["value"], "wp.tile_full() value")
    return emit(bld, "tile_full", f"lw::tile_full<{t.cname}>", [v], t,
                adjoint=_adj(t.dtype, f"lw::adj_tile_full<{t.cname}>"))


def _arange_bound(bld: Builder, node: ast.AST, name: str, v: Any, dtype: Any) -> int | float:
    """A tile_arange() bound as the output type `dtype` holds it (the count is taken from those values)."""
    v = getattr(v, "value", v)  # wp.constant(wp.int64(5)): its Python value
    if isinstance(v, bool) or not isinstance(v, int | float):
        bld.error(node, KernelTypeError, f"wp.tile_arange() {name}={v!r} is not a number")
    if T.is_int(dtype):
        if isinstance(v, float):
            if not v.is_integer():
                bld.error(node, KernelValueError, f"tile_arange() {name}={v} has a fractional part, which the "
                          f"integer output type {T.type_name(dtype)} cannot represent")
            v = int(v)
        info = np.iinfo(dtype.np_dtype)
        if not info.min <= v <= info.max:
            bld.error(node, KernelValueError, f"tile_arange() {name}={v} is out of range for the output type "
                      f"{T.type_name(dtype)}")
        return v
    if isinstance(v, int) and not -(2**63) <= v < 2**64:
        bld.error(node, KernelValueError, f"tile_arange() {name}={v} is too wide to use as an integer bound; write "
                  f"it as a float ({float(v)!r})")
    with np.errstate(over="ignore"):
        held = float(np.asarray(np.uint64(v) if isinstance(v, int) and v >= 0 else v).astype(dtype.np_dtype))
    if math.isfinite(float(v)) and not math.isfinite(held):
        bld.error(node, KernelValueError, f"tile_arange() {name}={v} is out of range for the output type "
                  f"{T.type_name(dtype)}")
    return held


@call_form("tile_arange")
def tile_arange(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    args = list(node.args)
    kws = {k.arg: k.value for k in node.keywords}
    if set(kws) - {"dtype", "storage"}:
        bld.error(node, KernelTypeError, "wp.tile_arange() takes (stop), (start, stop) or (start, stop, step), "
                  "and dtype=, storage=")
    if not args:
        bld.error(node, KernelTypeError, "tile_arange() requires at least one positional argument specifying the "
                  "range")
    if len(args) > 3:
        bld.error(node, KernelTypeError, f"tile_arange() accepts at most 3 positional arguments, got {len(args)}")
    names = ("stop",) if len(args) == 1 else ("start", "stop", "step")[:len(args)]
    for n, nm in zip(args, names, strict=False):
        if isinstance(n, ast.Name) and n.id in bld.scope.vars and n.id not in bld.scope.constants and \
                n.id not in bld.scope.static_locals:
            bld.error(n, KernelTypeError, f"tile_arange() arguments must be compile time constants, but {nm} is not")
    vals = [bld.eval_static(n, "wp.tile_arange()'s bounds") for n in args]
    dtype = _static_dtype(bld, kws.get("dtype"), "tile_arange", T.float32)
    if not T.is_scalar(dtype) or dtype is T.bool_:
        bld.error(node, KernelTypeError, f"tile_arange() requires a numeric scalar dtype, but got "
                  f"{T.type_name(dtype)}")
    vals = [_arange_bound(bld, node, nm, v, dtype) for v, nm in zip(vals, names, strict=True)]
    start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], 1) if len(vals) == 2 else vals
    if step == 0:
        bld.error(node, KernelValueError, "tile_arange() step cannot be zero")
    if (step > 0 and start >= stop) or (step < 0 and start <= stop):
        bld.error(node, KernelValueError, f"tile_arange() requires a non-empty range, but start={start}, stop={stop}, "
                  f"step={step} produces no elements; zero-length tile dimensions are not supported")
    if T.is_int(dtype):
        n = -((stop - start) // -step)
    else:
        with np.errstate(over="ignore", divide="ignore"):
            q = float(np.asarray((stop - start) / step).astype(dtype.np_dtype))
        if not math.isfinite(q):
            bld.error(node, KernelValueError, f"tile_arange() start={start}, stop={stop}, step={step} spans more "
                      "elements than can be counted; the step is too small for the range")
        n = max(1, math.ceil(q))
    t = TileType(dtype, (int(n),), _static_str(bld, kws.get("storage"), "tile_arange", "register"))
    return emit(bld, "tile_arange", f"lw::tile_arange<{t.cname}>", [Const(start, t.dtype), Const(step, t.dtype)], t)


def lanes(bld: Builder) -> int:
    """The lanes of a block in the build `bld` is part of: 1, unless the module is built for blocks whose
    lanes run together on the CPU (wp.config.enable_cpu_blocks, a launch's block_dim > 1)."""
    return getattr(bld.ctx, "lanes", 0) or 1


def lane_write(bld: Builder, node: ast.AST, name: str, native: str, args: list[Operand], t: TileType,
               adjoint: str | None = None) -> Operand:
    """A tile that every lane of the block fills in part (wp.tile, tile_from_thread, tile_randi/f). With one
    lane: `native(args)`. With lanes: the tile variable d takes `native_lane(d, args)`, d with this lane's
    part replaced, lane after lane (kernels/codegen.py puts barriers around it); in a @wp.func, whose tiles
    each lane holds a copy of, `native_func(args)` gathers the lanes' parts and gives each lane the tile."""
    if lanes(bld) == 1:
        return emit(bld, name, native, args, t, adjoint=adjoint)
    if not bld.is_kernel:
        return emit(bld, name, native.replace("<", "_func<", 1), args, t,
                    adjoint=adjoint.replace("<", "_func<", 1) if adjoint is not None else None)
    d = bld.temp(t)
    lane_native = native.replace("<", "_lane<", 1)
    lane_adjoint = adjoint.replace("<", "_lane<", 1) if adjoint is not None else None
    ov = B.Overload(name, tuple(B.Exact(a.type) for a in (d, *args)), lambda b: t, lane_native, "Tile Primitives",
                    "", lane_adjoint is not None, lane_adjoint, None, False, False, None)
    bld.emit(ir.Assign(d, ir.Call(ov, (d, *args)), line=bld.cur_line))
    return d


@call_form("tile")
def tile_of(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile", ("x", "preserve_type"), 1)
    x = bld.materialize(bld.value(a["x"]))
    keep = bool(bld.eval_static(a["preserve_type"], "preserve_type")) if "preserve_type" in a else False
    n = lanes(bld)
    if T.is_scalar(x.type) or keep or T.is_matrix(x.type) or T.is_quat(x.type) or T.is_transform(x.type):
        t = TileType(x.type, (n,))
    elif T.is_vector(x.type):
        t = TileType(x.type._wp_scalar_type_, (x.type._length_, n))
    else:
        bld.error(a["x"], KernelTypeError, f"wp.tile() takes a scalar, vector or matrix, got {T.type_name(x.type)}")
    return lane_write(bld, node, "tile", f"lw::tile_of<{t.cname}>", [x], t,
                      adjoint=_adj(t.dtype, f"lw::adj_tile_of<{t.cname}>"))


@call_form("untile")
def untile(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "untile", ("a",), 1)
    t = _tile_arg(bld, a["a"], "untile")
    n = lanes(bld)
    if t.type.ndim == 2 and t.type.shape[1] == n and T.is_scalar(t.type.dtype):
        r = T.vector(t.type.shape[0], t.type.dtype)
    elif t.type.ndim == 1 and t.type.shape[0] == n:
        r = t.type.dtype
    else:
        bld.error(node, KernelTypeError, f"wp.untile() takes a tile of one value per thread of the block (shape "
                  f"({n},) or (k, {n})), got {t.type}")
    return emit(bld, "untile", f"lw::untile<{ctype(r)}>", [t], r,
                adjoint=_adj(t.type.dtype, f"lw::adj_untile<{ctype(r)}>"))


# -- memory ----------------------------------------------------------------------------------------


@call_form("tile_load")
def tile_load(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_load", ("a", "shape", "offset", "storage", "bounds_check", "aligned"), 2)
    arr = _array_arg(bld, a["a"], "tile_load")
    shape = _static_shape(bld, a["shape"], "tile_load")
    nd = arr.type.ndim
    if len(shape) > nd:
        bld.error(node, KernelTypeError, f"wp.tile_load(): a tile of {len(shape)} dimensions from a {nd}-D array")
    off = _ints(bld, a.get("offset"), nd, "tile_load")
    t = TileType(arr.type.dtype, shape, _static_str(bld, a.get("storage"), "tile_load", "register"))
    return emit(bld, "tile_load", f"lw::tile_load<{t.cname}, {nd}>", [arr, *off], t,
                adjoint=_adj(t.dtype, f"lw::adj_tile_load<{t.cname}, {nd}>"), reads_state=True)


def _region(bld: Builder, node: ast.Call, name: str) -> tuple[Operand, Operand, list[Operand]]:
    a = _bind(bld, node, name, ("a", "t", "offset", "bounds_check", "aligned"), 2)
    arr = _array_arg(bld, a["a"], name)
    t = _tile_arg(bld, a["t"], name)
    if t.type.dtype != arr.type.dtype:
        bld.error(node, KernelTypeError, f"wp.{name}(): a tile of {T.type_name(t.type.dtype)} into an array of "
                  f"{T.type_name(arr.type.dtype)}")
    if t.type.ndim > arr.type.ndim:
        bld.error(node, KernelTypeError, f"wp.{name}(): a tile of {t.type.ndim} dimensions into a "
                  f"{arr.type.ndim}-D array")
    return arr, t, _ints(bld, a.get("offset"), arr.type.ndim, name)


@call_form("tile_store")
def tile_store(bld: Builder, node: ast.Call, obj: Any) -> None:
    arr, t, off = _region(bld, node, "tile_store")
    nd = arr.type.ndim
    return emit(bld, "tile_store", f"lw::tile_store<{nd}>", [arr, t, *off], None,
                adjoint=_adj(t.type.dtype, f"lw::adj_tile_store<{nd}>"), writes=True)


@call_form("tile_atomic_add")
def tile_atomic_add(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    arr, t, off = _region(bld, node, "tile_atomic_add")
    if T.elem_scalar(t.type.dtype) not in (T.float16, T.float32, T.float64, T.int32, T.uint32, T.int64, T.uint64):
        bld.error(node, KernelTypeError, f"wp.tile_atomic_add() only supports tiles of float16, float32, float64 and "
                  f"32/64-bit integers (or vectors/matrices of them), got {T.type_name(t.type.dtype)}")
    nd = arr.type.ndim
    return emit(bld, "tile_atomic_add", f"lw::tile_atomic_add<{nd}>", [arr, t, *off], t.type,
                adjoint=_adj(t.type.dtype, f"lw::adj_tile_atomic_add<{nd}>"), writes=True)


# -- shape ---------------------------------------------------------------------------------------


@call_form("tile_view")
def tile_view(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_view", ("t", "offset", "shape"), 2)
    t = _tile_arg(bld, a["t"], "tile_view")
    src = t.type
    if isinstance(a["offset"], ast.Tuple) and any(isinstance(_as_slice(e), ast.Slice) for e in a["offset"].elts):
        if "shape" in a:
            bld.error(node, KernelValueError, "wp.tile_view() cannot take 'shape' together with a slice in the offset")
        return _slice_read(bld, node, t, a["offset"].elts)
    elts = a["offset"].elts if isinstance(a["offset"], ast.Tuple) else [a["offset"]]
    if len(elts) > src.ndim:
        bld.error(node, KernelTypeError, f"wp.tile_view(): {len(elts)} offsets for a tile of {src.ndim} dimensions")
    for e, d in zip(elts, src.shape, strict=False):
        c = bld.value(e)
        if not T.is_int(c.type):
            bld.error(e, KernelTypeError, f"wp.tile_view(): offset entries must be integers or slices, got "
                      f"{T.type_name(c.type)}")
        v = c.value if isinstance(c, Const) else None
        if isinstance(v, int) and not 0 <= v < d:
            bld.error(e, KernelValueError, f"wp.tile_view(): offset {v} is out of bounds for an axis of {d}")
    shape = _static_shape(bld, a["shape"], "tile_view") if "shape" in a else src.shape[len(elts):]
    if not shape:
        bld.error(node, KernelTypeError, "wp.tile_view(): the view would have no dimensions (use t[i, j])")
    if len(shape) > src.ndim:
        bld.error(node, KernelTypeError, f"wp.tile_view(): a view of shape {shape} of a tile of {src.ndim} dimensions")
    off = _ints(bld, a["offset"], len(elts), "tile_view")
    off += [Const(0, T.int32)] * (src.ndim - len(off))
    steps = (0,) * (src.ndim - len(shape)) + (1,) * len(shape)
    return _view(bld, t, off, steps, shape)


@call_form("tile_assign")
def tile_assign(bld: Builder, node: ast.Call, obj: Any) -> None:
    a = _bind(bld, node, "tile_assign", ("dst", "src", "offset"), 2)
    dst = _tile_arg(bld, a["dst"], "tile_assign")
    src = _tile_arg(bld, a["src"], "tile_assign")
    if src.type.ndim > dst.type.ndim:
        bld.error(node, KernelTypeError, f"wp.tile_assign(): a tile of {src.type.ndim} dimensions into one of "
                  f"{dst.type.ndim}")
    if src.type.dtype != dst.type.dtype:
        src = _cast_tile(bld, src, dst.type.dtype)
    off = _ints(bld, a.get("offset"), dst.type.ndim, "tile_assign") if "offset" in a else \
        [Const(0, T.int32)] * dst.type.ndim
    steps = (0,) * (dst.type.ndim - src.type.ndim) + (1,) * src.type.ndim
    write(bld, a["dst"], _slice_assign(bld, dst, src, off, steps), node)


# -- aliasing: views write through to the tiles they view ----------------------------------------


@dataclass(frozen=True)
class _View:
    """How a tile variable aliases another: it is the slice of `parent` at `offsets` with `steps`."""

    parent: ir.Var
    offsets: tuple[Operand, ...]
    steps: tuple[int, ...]


def _views(bld: Builder) -> dict[ir.Var, _View]:
    """The builder's alias table: view variable -> what it views (in the order views were made)."""
    if not hasattr(bld, "tile_views"):
        bld.tile_views = {}
        bld.tile_pending = {}
    return bld.tile_views


def _view(bld: Builder, t: Operand, off: list[Operand], steps: tuple[int, ...], shape: tuple[int, ...]) -> Operand:
    """The slice of tile `t` at `off` with `steps` (0: the axis is dropped), remembered as a view of t."""
    _views(bld)
    r = TileType(t.type.dtype, tuple(shape))
    s4 = ", ".join(str(x) for x in (*steps, 0, 0, 0, 0)[:4])
    o4 = list(off) + [Const(0, T.int32)] * (4 - len(off))
    v = emit(bld, "tile_view", f"lw::tile_slice<{r.cname}, {s4}>", [t, *o4], r,
             adjoint=_adj(r.dtype, f"lw::adj_tile_slice<{r.cname}, {s4}>"))
    if isinstance(t, ir.Var):
        bld.tile_pending[v] = _View(t, tuple(o4), tuple(steps))
    return v


def _slice_assign(bld: Builder, t: Operand, v: Operand, off: list[Operand], steps: tuple[int, ...]) -> Operand:
    """Tile `t` with its slice at `off`/`steps` replaced by tile `v`."""
    s4 = ", ".join(str(x) for x in (*steps, 0, 0, 0, 0)[:4])
    o4 = list(off) + [Const(0, T.int32)] * (4 - len(off))
    return emit(bld, "tile_assign", f"lw::tile_slice_assign<{s4}>", [t, v, *o4], t.type,
                adjoint=_adj(t.type.dtype, f"lw::adj_tile_slice_assign<{s4}>"))


def _cast_tile(bld: Builder, t: Operand, dtype: Any) -> Operand:
    r = TileType(dtype, t.type.shape)
    adj = f"lw::adj_tile_astype<{r.cname}>" if r.differentiable and t.type.differentiable else None
    return emit(bld, "tile_astype", f"lw::tile_astype<{r.cname}>", [t], r, adjoint=adj)


def _assigned(bld: Builder, var: ir.Var, value: Any, in_place: bool) -> None:
    """After `var = value`: var views what value views (a view, or another tile variable: the same
    storage); a new value cuts var's old links (views of var keep what they saw)."""
    views = _views(bld)
    if in_place:  # `t += x` updates the storage t shares
        _propagate(bld, var)
        return
    views.pop(var, None)
    for c in [c for c, v in views.items() if v.parent is var]:
        del views[c]
    found = bld.tile_pending.get(value)
    if found is not None:
        views[var] = found
    elif isinstance(value, ir.Var) and value is not var and not value.name.startswith("t"):
        views[var] = _View(value, (Const(0, T.int32),) * 4, (1,) * var.type.ndim)


def write(bld: Builder, target: ast.expr, value: Operand, node: ast.AST) -> None:
    """The tile variable `target` takes `value` in place: the tiles it views and the views of them see it."""
    if not isinstance(target, ast.Name) or bld.scope.vars.get(target.id) is None:
        bld.error(target, KernelTypeError, "a tile written in place must be a variable")
    var = bld.scope.vars[target.id]
    if value.type != var.type:
        bld.error(node, KernelTypeError, f"cannot write a {value.type} into '{target.id}', a {var.type}")
    bld.emit(ir.Assign(var, ir.Copy(value), line=bld.cur_line))
    _propagate(bld, var)


def _propagate(bld: Builder, var: ir.Var) -> None:
    views = _views(bld)
    path = [var]
    while path[-1] in views:  # up: each view writes into what it views
        v = views[path[-1]]
        new = _slice_assign(bld, v.parent, path[-1], list(v.offsets), v.steps)
        bld.emit(ir.Assign(v.parent, ir.Copy(new), line=bld.cur_line))
        path.append(v.parent)
    root = path[-1]

    def rooted(c: ir.Var) -> bool:
        seen = set()
        while c in views and c not in seen:
            seen.add(c)
            c = views[c].parent
        return c is root

    for c, v in list(views.items()):  # down: the other views of the same storage read it again
        if c not in path and rooted(c):
            s4 = ", ".join(str(x) for x in (*v.steps, 0, 0, 0, 0)[:4])
            new = emit(bld, "tile_view", f"lw::tile_slice<{c.type.cname}, {s4}>", [v.parent, *v.offsets], c.type,
                       adjoint=_adj(c.type.dtype, f"lw::adj_tile_slice<{c.type.cname}, {s4}>"))
            bld.emit(ir.Assign(c, ir.Copy(new), line=bld.cur_line))


@call_form("tile_transpose")
def tile_transpose(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_transpose", ("a",), 1)
    t = _tile_arg(bld, a["a"], "tile_transpose")
    if t.type.ndim != 2:
        bld.error(node, KernelTypeError, f"wp.tile_transpose() takes a 2-D tile, got {t.type}")
    r = TileType(t.type.dtype, t.type.shape[::-1])
    return emit(bld, "tile_transpose", "lw::tile_transpose", [t], r, adjoint=_adj(r.dtype, "lw::adj_tile_transpose"))


@call_form("tile_broadcast")
def tile_broadcast(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_broadcast", ("a", "shape"), 2)
    t = _tile_arg(bld, a["a"], "tile_broadcast")
    want = bld.eval_static(a["shape"], "the shape of wp.tile_broadcast()")
    if isinstance(want, tuple | list) and not 1 <= len(want) <= MAX_RANK:
        bld.error(a["shape"], KernelValueError, f"wp.tile_broadcast() output must have between one and four "
                  f"dimensions, got {len(want)}")
    shape = _static_shape(bld, a["shape"], "tile_broadcast")
    src = t.type.shape
    if len(src) > len(shape) or any(s not in (1, d) for s, d in zip(src[::-1], shape[::-1], strict=False)):
        bld.error(node, KernelValueError, f"wp.tile_broadcast(): shape {src} does not broadcast to {shape}")
    r = TileType(t.type.dtype, shape)
    return emit(bld, "tile_broadcast", f"lw::tile_broadcast<{r.cname}>", [t], r,
                adjoint=_adj(r.dtype, f"lw::adj_tile_broadcast<{r.cname}>"))


def _reshaped(bld: Builder, node: ast.Call, name: str, t: Operand, shape: tuple[int, ...]) -> Operand:
    if math.prod(shape) != t.type.size:
        bld.error(node, KernelValueError, f"wp.{name}(): cannot make a tile of shape {t.type.shape} into {shape}")
    r = TileType(t.type.dtype, shape)
    return emit(bld, name, f"lw::tile_reshape<{r.cname}>", [t], r,
                adjoint=_adj(r.dtype, f"lw::adj_tile_reshape<{r.cname}>"))


@call_form("tile_reshape")
def tile_reshape(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_reshape", ("t", "shape"), 2)
    t = _tile_arg(bld, a["t"], "tile_reshape")
    shape = list(_static_shape(bld, a["shape"], "tile_reshape")) if not isinstance(a["shape"], ast.Tuple) or \
        all(isinstance(e, ast.Constant) and e.value != -1 for e in a["shape"].elts) else \
        [bld.eval_static(e, "a tile_reshape dimension") for e in a["shape"].elts]
    if shape.count(-1) == 1:
        rest = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = t.type.size // rest if rest else 0
    strides = _strides_in_storage(bld, t)
    if any(n > 1 and s != d for n, s, d in zip(t.type.shape, strides, _dense_strides(t.type.shape), strict=True)):
        bld.error(node, KernelValueError, f"wp.tile_reshape() requires a contiguous tile: its argument is a view of "
                  f"shape {t.type.shape} whose elements lie {strides} apart in the tile it views (a stepped, "
                  "reversed or partial slice); copy it into a tile of its own first (wp.tile_assign() into a "
                  "wp.tile_zeros())")
    return _reshaped(bld, node, "tile_reshape", t, tuple(shape))


def _dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of a tile of `shape`."""
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def _strides_in_storage(bld: Builder, t: Operand) -> tuple[int, ...]:
    """The element strides of tile `t` in the storage it shares: the tile it views (through any chain of
    views), or its own when it views none."""
    views = _views(bld)
    chain, seen = [], {t}
    while (v := bld.tile_pending.get(t) or views.get(t)) is not None and v.parent not in seen:
        chain.append(v)
        t = seen.add(v.parent) or v.parent
    strides = _dense_strides(t.type.shape)
    for v in reversed(chain):
        strides = tuple(s * step for s, step in zip(strides, v.steps, strict=True) if step != 0)
    return strides


@call_form("tile_squeeze")
def tile_squeeze(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_squeeze", ("t", "axis"), 1)
    t = _tile_arg(bld, a["t"], "tile_squeeze")
    shape = t.type.shape
    if "axis" in a:
        ax = bld.eval_static(a["axis"], "the axis of wp.tile_squeeze()")
        given = (ax,) if isinstance(ax, int) else tuple(ax)
        for x in given:
            if not -len(shape) <= x < len(shape):
                bld.error(node, KernelValueError, f"wp.tile_squeeze(): tile_squeeze() axis {x} is out of bounds for "
                          f"tile with {len(shape)} dimensions (shape {shape})")
        axes = tuple(x + len(shape) if x < 0 else x for x in given)
        if any(shape[x] != 1 for x in axes):
            bld.error(node, KernelValueError, f"wp.tile_squeeze(): axis {ax} is not an axis of length 1 of {shape}")
        new = tuple(d for i, d in enumerate(shape) if i not in axes)
    else:
        new = tuple(d for d in shape if d != 1)
    return _reshaped(bld, node, "tile_squeeze", t, new or (1,))


@call_form("tile_astype")
def tile_astype(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_astype", ("t", "dtype"), 2)
    t = _tile_arg(bld, a["t"], "tile_astype")
    r = TileType(_static_dtype(bld, a["dtype"], "tile_astype"), t.type.shape)
    adj = f"lw::adj_tile_astype<{r.cname}>" if r.differentiable and t.type.differentiable else None
    return emit(bld, "tile_astype", f"lw::tile_astype<{r.cname}>", [t], r, adjoint=adj)


@call_form("tile_extract")
def tile_extract(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    if len(node.args) < 2 or node.keywords:
        bld.error(node, KernelTypeError, "wp.tile_extract(a, i, ...) takes a tile and one index per dimension")
    t = _tile_arg(bld, node.args[0], "tile_extract")
    return extract(bld, node, t, node.args[1:])


def extract(bld: Builder, node: ast.AST, t: Operand, index_nodes: list[ast.expr]) -> Operand:
    """Element t[i, j, ...] of a tile (negative indices count from the end)."""
    if len(index_nodes) != t.type.ndim:
        bld.error(node, KernelTypeError, f"a tile of {t.type.ndim} dimensions takes {t.type.ndim} indices, got "
                  f"{len(index_nodes)}")
    idx = [_ints(bld, n, 1, "tile_extract", "index")[0] for n in index_nodes]
    return emit(bld, "tile_extract", "lw::tile_extract", [t, *idx], t.type.dtype,
                adjoint=_adj(t.type.dtype, "lw::adj_tile_extract"))


def _as_slice(e: ast.expr) -> ast.expr:
    """`slice(a, b, c)` written as a call, as the slice `a:b:c`."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "slice" and not e.keywords and \
            1 <= len(e.args) <= 3:
        args = [None if isinstance(x, ast.Constant) and x.value is None else x for x in e.args]
        lower, upper, step = (None, args[0], None) if len(args) == 1 else (*args, None)[:3]
        return ast.Slice(lower=lower, upper=upper, step=step)
    return e


def _static_bound(bld: Builder, x: ast.expr) -> Any:
    v = bld.value(x)
    if not isinstance(v, Const):
        bld.error(x, KernelIndexError, "tile slice bounds must be compile-time constant integers")
    return v.value


def _index_parts(bld: Builder, node: ast.Subscript, t: TileType, elts: list[ast.expr]
                 ) -> tuple[list[Operand], tuple[int, ...], tuple[int, ...]]:
    """A subscript of a tile as a slice: per-axis starts, steps (0: an index that drops the axis) and the
    resulting shape (NumPy's rules; constant slice bounds, runtime indices)."""
    if len(elts) > t.ndim:
        bld.error(node, KernelIndexError, f"{len(elts)} indices for a tile of {t.ndim} dimensions")
    off: list[Operand] = []
    steps: list[int] = []
    shape: list[int] = []
    for d, n in enumerate(t.shape):
        e = _as_slice(elts[d]) if d < len(elts) else ast.Slice()
        if isinstance(e, ast.Slice):
            bounds = [None if x is None else _static_bound(bld, x) for x in (e.lower, e.upper, e.step)]
            if any(b is not None and (not isinstance(b, int) or isinstance(b, bool)) for b in bounds):
                bld.error(e, KernelIndexError, "tile slice bounds must be compile-time constant integers")
            if bounds[2] == 0:
                bld.error(e, KernelIndexError, "a tile slice step cannot be zero")
            start, stop, step = slice(*bounds).indices(n)
            count = len(range(start, stop, step))
            if count == 0:
                bld.error(node, KernelIndexError, f"this tile slice would make an empty tile (a zero-length axis {d})")
            off.append(Const(start, T.int32))
            steps.append(step)
            shape.append(count)
            continue
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool) and not \
                -n <= e.value < n:
            bld.error(e, KernelIndexError, f"tile index {e.value} is out of bounds for an axis of {n}")
        v = bld.value(e)
        if not T.is_int(v.type):
            bld.error(e, KernelTypeError, f"tile indices must be integers or slices, got {T.type_name(v.type)}")
        off.append(_ints(bld, e, 1, "tile_view", "index")[0])
        steps.append(0)
    return off, tuple(steps), tuple(shape)


def _slice_read(bld: Builder, node: ast.AST, base: Operand, elts: list[ast.expr]) -> Operand:
    off, steps, shape = _index_parts(bld, node, base.type, elts)
    if not shape:
        bld.error(node, KernelValueError, "this tile slice is a single element; use t[i, j] or wp.tile_extract()")
    return _view(bld, base, off, steps, shape)


def _subscript(bld: Builder, node: ast.Subscript, base: Operand) -> Operand:
    sl = node.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    index_tiles = {}  # t[idx, :], t[wp.tile_arange(...) * 2]: index tiles (evaluated once, here)
    for i, e in enumerate(elts):
        if isinstance(e, ast.Name) and is_tile(getattr(bld.scope.vars.get(e.id), "type", None)):
            index_tiles[i] = bld.scope.vars[e.id]
        elif isinstance(e, ast.Call | ast.BinOp | ast.Subscript):
            v = bld.value(e)
            if is_tile(v.type):
                index_tiles[i] = v
    if index_tiles:
        return _gather(bld, node, base, elts, index_tiles)
    if len(elts) == base.type.ndim and not any(isinstance(e, ast.Slice) for e in elts):
        return extract(bld, node, base, elts)
    return _slice_read(bld, node, base, elts)


def _gather(bld: Builder, node: ast.Subscript, base: Operand, elts: list[ast.expr],
            index_tiles: dict[int, Operand]) -> Operand:
    """t[idx, :]: the rows (along the axis of the index tile) that a 1-D int tile picks, as a new tile."""
    src = base.type
    if len(index_tiles) > 1:
        bld.error(node, KernelValueError, "Tile indexing supports exactly one 1D integer index tile")
    (axis, idx), = index_tiles.items()
    if idx.type.ndim != 1 or not T.is_int(idx.type.dtype):
        bld.error(elts[axis], KernelTypeError, f"tile indexing takes a 1-D integer index tile, got {idx.type}")
    if len(elts) > src.ndim:
        bld.error(node, KernelIndexError, f"{len(elts)} indices for a tile of {src.ndim} dimensions")
    for e in elts:
        if e is not elts[axis] and not (isinstance(e, ast.Slice) and e.lower is None and e.upper is None and
                                        e.step is None):
            bld.error(e, KernelValueError, "Tile indexing with an integer index tile requires ':' on all other "
                      "axes (t[indices, :])")
    if idx.type.dtype is not T.int32:
        idx = _cast_tile(bld, idx, T.int32)
    shape = list(src.shape)
    shape[axis] = idx.type.shape[0]
    r = TileType(src.dtype, tuple(shape))
    return emit(bld, "tile_gather", f"lw::tile_gather<{r.cname}, {axis}>", [base, idx], r,
                adjoint=_adj(r.dtype, f"lw::adj_tile_gather<{r.cname}, {axis}>"))


@call_form("tile_slice_indexed")
def tile_slice_indexed(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """tile_slice_indexed(t, (idx, slice(None))): the call form of t[idx, :]."""
    a = _bind(bld, node, "tile_slice_indexed", ("t", "indices"), 2)
    t = _tile_arg(bld, a["t"], "tile_slice_indexed")
    elts = [ast.copy_location(_as_slice(e), e) for e in
            (a["indices"].elts if isinstance(a["indices"], ast.Tuple) else [a["indices"]])]
    tiles = {i: v for i, e in enumerate(elts) if not isinstance(e, ast.Slice) and is_tile((v := bld.value(e)).type)}
    if len(tiles) != 1:
        bld.error(a["indices"], KernelValueError, "wp.tile_slice_indexed() takes exactly one 1D integer index tile "
                  "and ':' (slice(None)) on the other axes")
    sub = ast.copy_location(ast.Subscript(value=a["t"], slice=ast.Tuple(elts=elts, ctx=ast.Load()), ctx=ast.Load()),
                            node)
    return _gather(bld, sub, t, elts, tiles)


def _store(bld: Builder, target: ast.Subscript, value: Operand, op: str | None, node: ast.AST) -> None:
    """`t[...] = value` (op None) or `t[...] op= value` on a tile variable: the tile takes the new element,
    row or slice in place (and what it views, and its other views, see it)."""
    chain: list[ast.Subscript] = []
    root: ast.expr = target
    while isinstance(root, ast.Subscript):
        chain.insert(0, root)
        root = root.value
    t = bld.value(root)
    first = chain[0]
    elts = first.slice.elts if isinstance(first.slice, ast.Tuple) else [first.slice]
    whole_element = len(elts) == t.type.ndim and not any(isinstance(e, ast.Slice) for e in elts)
    if not whole_element:
        if op is not None:
            bld.error(node, KernelTypeError, "Compound assignment to a tile view is not supported; assign the "
                      "result of an expression instead (t[0:4, :] = t[0:4, :] + v)")
        if len(chain) > 1:
            bld.error(node, KernelTypeError, "assign to a tile slice in one subscript (t[i, j] or t[a:b, :])")
        if not is_tile(value.type) and not any(isinstance(e, ast.Slice) for e in elts):
            bld.error(node, KernelTypeError, "assigning to a tile row requires a tile of matching shape; use "
                      "t[i, j] = v for one element")
        off, steps, shape = _index_parts(bld, first, t.type, elts)
        if not is_tile(value.type):
            bld.error(node, KernelTypeError, f"assigning to a tile slice requires a tile of matching shape {shape}, "
                      f"got {T.type_name(value.type)}")
        if value.type.shape != shape:
            bld.error(node, KernelValueError, f"tile slice assignment: shape mismatch, the slice has shape {shape}, "
                      f"the value {value.type.shape}")
        if value.type.dtype != t.type.dtype:
            value = _cast_tile(bld, value, t.type.dtype)
        write(bld, root, _slice_assign(bld, t, value, off, steps), node)
        return
    idx = [_ints(bld, e, 1, "tile_view", "index")[0] for e in elts]
    idx += [Const(0, T.int32)] * (4 - len(idx))
    elem = t.type.dtype
    if len(chain) > 1 or op is not None:  # a part of the element, or an update: through a copy of the element
        cur = bld.materialize(extract(bld, first, t, elts))
        ev = bld.temp(elem)
        bld.emit(ir.Assign(ev, ir.Copy(cur), line=bld.cur_line))
        if len(chain) > 1:
            p = Place(ev, None, 0, (), elem)
            for sub in chain[1:]:
                p = bld.index_place(p, sub)
            new = value if op is None else bld.binop(op, bld.place_value(p), value, node)
            bld.store(p, new, node)
        else:
            bld.emit(ir.Assign(ev, ir.Copy(bld.convert(bld.binop(op, ev, value, node), elem, node)),
                               line=bld.cur_line))
        value = ev
    value = _cast(bld, bld.materialize(value), elem, node, "a tile element")
    write(bld, root, emit(bld, "tile_set", f"lw::tile_set<{t.type.cname}>", [t, value, *idx], t.type,
                          adjoint=_adj(elem, f"lw::adj_tile_set<{t.type.cname}>")), node)


SUBSCRIPT_KINDS[TileType] = _subscript
STORE_KINDS[TileType] = _store
ASSIGN_HOOKS[TileType] = _assigned


# -- maps and reductions ----------------------------------------------------------------------------


def _callable(bld: Builder, n: ast.expr, name: str) -> Any:
    f = bld.expr(n)
    obj = f.value if isinstance(f, PyObj) else None
    if isinstance(obj, B.Builtin | Function):
        return obj
    alias = B.PYTHON_ALIASES.get(getattr(obj, "__name__", "")) if callable(obj) else None
    if alias:
        return B.BUILTINS[alias]
    bld.error(n, KernelTypeError, f"wp.{name}() takes a builtin or a @wp.func as its operation")


def _elementwise(bld: Builder, node: ast.AST, name: str, fn: Any, elems: list[Operand]) -> tuple[str, str | None, Any]:
    """The C++ functor and adjoint functor applying `fn` to one element of each operand, and the
    element result type."""
    if isinstance(fn, B.Builtin):
        found, _ = bld.resolve_literals(fn.name, elems, node)
        if found is None:
            got = ", ".join(T.type_name(e.type) for e in elems)
            bld.error(node, KernelTypeError, f"wp.{name}(): no overload of {fn.name}() takes ({got})")
        ov, b = found
        if ov.outputs:
            bld.error(node, KernelTypeError, f"wp.{name}(): {fn.name}() has output arguments")
        adj = f"LW_TILE_ADJ({ov.adjoint})" if ov.differentiable else None
        return f"LW_TILE_FN({ov.native})", adj, ov.ret(b)
    inst, err = bld.ctx.instantiate(fn, elems, {})
    if inst is None:
        bld.error(node, KernelTypeError, f"wp.{name}(): {err}")
    return f"LW_TILE_FN({inst.native})", f"LW_TILE_ADJ(adj_{inst.native})", inst.ir.ret


@call_form("tile_map")
def tile_map(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    if len(node.args) < 2 or node.keywords:
        bld.error(node, KernelTypeError, "wp.tile_map(op, a, *args) takes an operation and one or more tiles")
    fn = _callable(bld, node.args[0], "tile_map")
    ops = [bld.value(n) for n in node.args[1:]]
    tiles = [o for o in ops if is_tile(o.type)]
    if not tiles:
        bld.error(node, KernelTypeError, "wp.tile_map() needs at least one tile operand")
    shape = tiles[0].type.shape
    if any(o.type.shape != shape for o in tiles):
        bld.error(node, KernelValueError, "wp.tile_map(): tiles of different shapes: "
                  + ", ".join(str(o.type.shape) for o in tiles))
    elems = [ir.Var("lw_elem", o.type.dtype) if is_tile(o.type) else bld.materialize(o) for o in ops]
    f, adj, ret = _elementwise(bld, node, "tile_map", fn, elems)
    if ret is None:
        bld.error(node, KernelTypeError, "wp.tile_map(): the operation returns nothing")
    r = TileType(ret, shape)
    ops = [o if is_tile(o.type) else bld.convert(bld.materialize(o), e.type, node)
           for o, e in zip(ops, elems, strict=True)]
    diff = adj is not None and r.differentiable
    return emit(bld, "tile_map", f"lw::tile_apply<{r.cname}>({f})", ops, r,
                adjoint=f"lw::tile_apply_adj({adj})" if diff else None)


def _axis(bld: Builder, n: ast.expr, t: TileType, name: str) -> int:
    ax = bld.eval_static(n, f"the axis of wp.{name}()")
    if not isinstance(ax, int) or not -t.ndim <= ax < t.ndim:
        bld.error(n, KernelValueError, f"wp.{name}(): axis {ax!r} is not an axis of a tile of shape {t.shape}")
    return ax % t.ndim


def _axis_result(t: TileType, ax: int, dtype: Any = None) -> TileType:
    shape = tuple(d for i, d in enumerate(t.shape) if i != ax) or (1,)
    return TileType(dtype or t.dtype, shape)


@call_form("tile_sum")
def tile_sum(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_sum", ("a", "axis"), 1)
    t = _tile_arg(bld, a["a"], "tile_sum")
    if "axis" in a:
        ax = _axis(bld, a["axis"], t.type, "tile_sum")
        r = _axis_result(t.type, ax)
        return emit(bld, "tile_sum", f"lw::tile_sum_axis<{r.cname}, {ax}>", [t], r,
                    adjoint=_adj(r.dtype, f"lw::adj_tile_sum_axis<{r.cname}, {ax}>"))
    r = TileType(t.type.dtype, (1,))
    return emit(bld, "tile_sum", "lw::tile_sum", [t], r, adjoint=_adj(r.dtype, "lw::adj_tile_sum"))


@call_form("tile_min", "tile_max", "tile_argmin", "tile_argmax")
def tile_extremum(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    name = obj.name
    a = _bind(bld, node, name, ("a",), 1)
    t = _tile_arg(bld, a["a"], name)
    if not T.is_scalar(t.type.dtype):
        bld.error(node, KernelTypeError, f"wp.{name}() takes a tile of scalars, got {t.type}")
    arg = name.startswith("tile_arg")
    r = TileType(T.int32 if arg else t.type.dtype, (1,))
    return emit(bld, name, f"lw::{name}", [t], r, adjoint=None if arg else _adj(r.dtype, f"lw::adj_{name}"))


@call_form("tile_reduce")
def tile_reduce(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_reduce", ("op", "a", "axis"), 2)
    fn = _callable(bld, a["op"], "tile_reduce")
    t = _tile_arg(bld, a["a"], "tile_reduce")
    e = ir.Var("lw_elem", t.type.dtype)
    f, _, ret = _elementwise(bld, node, "tile_reduce", fn, [e, e])
    if ret != t.type.dtype:
        bld.error(node, KernelTypeError, f"wp.tile_reduce(): the operation returns {T.type_name(ret)}, not the "
                  f"tile's {T.type_name(t.type.dtype)}")
    # what a reduction of no element gives (a partial block's empty slice): known for the builtins' operators
    ident = {"add": "fold_sum", "mul": "fold_prod", "min": "fold_min", "max": "fold_max"}.get(
        fn.name if isinstance(fn, B.Builtin) else "", "fold_none")
    if "axis" in a:
        ax = _axis(bld, a["axis"], t.type, "tile_reduce")
        r = _axis_result(t.type, ax)
        return emit(bld, "tile_reduce", f"[&](const auto& lw_t) {{ return lw::tile_fold_axis<{r.cname}, {ax}, "
                    f"lw::{ident}>(lw_t, {f}); }}", [t], r)
    r = TileType(t.type.dtype, (1,))
    return emit(bld, "tile_reduce", f"[&](const auto& lw_t) {{ return lw::tile_fold<lw::{ident}>(lw_t, {f}); }}",
                [t], r)


@call_form("tile_scan_inclusive", "tile_scan_exclusive", "tile_scan_max_inclusive", "tile_scan_min_inclusive")
def tile_scan(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    name = obj.name
    a = _bind(bld, node, name, ("a",), 1)
    t = _tile_arg(bld, a["a"], name)
    if not T.is_scalar(t.type.dtype):
        bld.error(node, KernelTypeError, f"wp.{name}() takes a tile of scalars, got {t.type}")
    summing = name in ("tile_scan_inclusive", "tile_scan_exclusive")
    adj = _adj(t.type.dtype, f"lw::adj_{name}") if summing else None
    return emit(bld, name, f"lw::{name}", [t], t.type, adjoint=adj)


# -- matrix products -------------------------------------------------------------------------------


@call_form("tile_matmul")
def tile_matmul(bld: Builder, node: ast.Call, obj: Any) -> Operand | None:
    """tile_matmul(a, b[, alpha]) -> a new tile; tile_matmul(a, b, out[, alpha, beta]): out = alpha a b + beta out."""
    accumulate = (len(node.args) >= 3 and is_tile(bld.value(node.args[2]).type)) or any(
        k.arg == "out" for k in node.keywords)
    params = ("a", "b", "out", "alpha", "beta", "precision") if accumulate else ("a", "b", "alpha", "precision")
    a = _bind(bld, node, "tile_matmul", params, 3 if accumulate else 2)
    x, y = _tile_arg(bld, a["a"], "tile_matmul"), _tile_arg(bld, a["b"], "tile_matmul")
    xt, yt = x.type, y.type
    if xt.ndim != 2 or yt.ndim != 2 or xt.shape[1] != yt.shape[0]:
        bld.error(node, KernelTypeError, f"wp.tile_matmul(): cannot multiply {xt} by {yt}")
    for t in (xt, yt):
        if t.dtype not in (T.float16, T.float32, T.float64):
            bld.error(node, KernelTypeError, f"wp.tile_matmul() takes tiles of float16, float32 or float64, got {t}")
    # the product accumulates in out's dtype (a's without out): operands of other float types convert first
    dt = _tile_arg(bld, a["out"], "tile_matmul", "an output tile").type.dtype if accumulate else xt.dtype
    if dt not in (T.float16, T.float32, T.float64):
        bld.error(a["out"], KernelTypeError, f"wp.tile_matmul(): out is a tile of float16, float32 or float64, got "
                  f"{T.type_name(dt)}")
    x, y = (v if v.type.dtype == dt else _cast_tile(bld, v, dt) for v in (x, y))
    r = TileType(dt, (xt.shape[0], yt.shape[1]))

    def scalar(key: str, default: float) -> Operand:
        return _cast(bld, bld.value(a[key]), dt, a[key], f"wp.tile_matmul() {key}") if key in a else Const(default, dt)

    if not accumulate:
        if "alpha" in a:
            return emit(bld, "tile_matmul", "lw::tile_matmul", [x, y, scalar("alpha", 1.0)], r,
                        adjoint="lw::adj_tile_matmul")
        return emit(bld, "tile_matmul", "lw::tile_matmul", [x, y], r, adjoint="lw::adj_tile_matmul")
    out = _tile_arg(bld, a["out"], "tile_matmul", "an output tile")
    if out.type != r:
        bld.error(a["out"], KernelTypeError, f"wp.tile_matmul(): the output of {xt} by {yt} is {r}, got {out.type}")
    v = emit(bld, "tile_matmul", "lw::tile_matmul_acc", [x, y, out, scalar("alpha", 1.0), scalar("beta", 1.0)], r,
             adjoint="lw::adj_tile_matmul_acc", result_alias=2)
    bld.assign_to(a["out"], v, node)
    return None


# -- dot, axpy, diagonal add, factorizations, sort ---------------------------------------------------


@call_form("tile_dot")
def tile_dot(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_dot", ("a", "b"), 2)
    x, y = _tile_arg(bld, a["a"], "tile_dot"), _tile_arg(bld, a["b"], "tile_dot")
    if x.type != y.type or not (T.is_scalar(x.type.dtype) or T.is_vector(x.type.dtype) or T.is_matrix(x.type.dtype)):
        bld.error(node, KernelTypeError, f"wp.tile_dot() takes two tiles of one shape and dtype (scalars, vectors or "
                  f"matrices), got {x.type} and {y.type}")
    st = T.elem_scalar(x.type.dtype)
    r = TileType(st, (1,))
    return emit(bld, "tile_dot", f"lw::tile_dot<{x.type.cname}, {ctype(st)}>", [x, y], r,
                adjoint=_adj(st, f"lw::adj_tile_dot<{x.type.cname}, {ctype(st)}>"))


@call_form("tile_axpy")
def tile_axpy(bld: Builder, node: ast.Call, obj: Any) -> None:
    a = _bind(bld, node, "tile_axpy", ("alpha", "src", "dest"), 3)
    src, dest = _tile_arg(bld, a["src"], "tile_axpy"), _tile_arg(bld, a["dest"], "tile_axpy")
    if src.type != dest.type:
        bld.error(node, KernelTypeError, f"wp.tile_axpy(): src and dest differ: {src.type} and {dest.type}")
    alpha = _cast(bld, bld.value(a["alpha"]), T.elem_scalar(dest.type.dtype), a["alpha"], "wp.tile_axpy() alpha")
    write(bld, a["dest"], emit(bld, "tile_axpy", "lw::tile_axpy", [alpha, src, dest], dest.type,
                               adjoint=_adj(dest.type.dtype, "lw::adj_tile_axpy")), node)


@call_form("tile_diag_add")
def tile_diag_add(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_diag_add", ("a", "d"), 2)
    m, d = _tile_arg(bld, a["a"], "tile_diag_add"), _tile_arg(bld, a["d"], "tile_diag_add")
    n = m.type.shape[0]
    if m.type.ndim != 2 or m.type.shape[1] != n or d.type.shape != (n,) or d.type.dtype != m.type.dtype:
        bld.error(node, KernelTypeError, f"wp.tile_diag_add() takes a square tile and a 1-D tile of its diagonal, got "
                  f"{m.type} and {d.type}")
    return emit(bld, "tile_diag_add", "lw::tile_diag_add", [m, d], m.type,
                adjoint=_adj(m.type.dtype, "lw::adj_tile_diag_add"))


def _square_float(bld: Builder, node: ast.AST, name: str, m: Operand) -> int:
    t = m.type
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.dtype not in (T.float32, T.float64):
        bld.error(node, KernelTypeError, f"wp.{name}() takes a square tile of float32 or float64, got {t}")
    return t.shape[0]


def _rhs(bld: Builder, node: ast.AST, name: str, m: Operand, y: Operand) -> None:
    n = m.type.shape[0]
    if y.type.dtype != m.type.dtype or y.type.ndim not in (1, 2) or y.type.shape[0] != n:
        bld.error(node, KernelTypeError, f"wp.{name}(): the right-hand side must be a tile of shape ({n},) or ({n}, K) "
                  f"of {T.type_name(m.type.dtype)}, got {y.type}")


def _fill_mode(bld: Builder, a: dict, name: str) -> bool:
    mode = _static_str(bld, a.get("fill_mode"), name, "lower")
    if mode not in ("lower", "upper"):
        bld.error(a["fill_mode"], KernelValueError, f"wp.{name}(): fill_mode is 'lower' or 'upper', got {mode!r}")
    return mode == "lower"


@call_form("tile_cholesky")
def tile_cholesky(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_cholesky", ("A", "fill_mode"), 1)
    m = _tile_arg(bld, a["A"], "tile_cholesky")
    _square_float(bld, node, "tile_cholesky", m)
    low = str(_fill_mode(bld, a, "tile_cholesky")).lower()
    return emit(bld, "tile_cholesky", f"lw::tile_cholesky<{low}>", [m], m.type,
                adjoint=f"lw::adj_tile_cholesky<{low}>")


@call_form("tile_cholesky_solve")
def tile_cholesky_solve(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_cholesky_solve", ("L", "y", "fill_mode"), 2)
    m, y = _tile_arg(bld, a["L"], "tile_cholesky_solve"), _tile_arg(bld, a["y"], "tile_cholesky_solve")
    _square_float(bld, node, "tile_cholesky_solve", m)
    _rhs(bld, node, "tile_cholesky_solve", m, y)
    low = str(_fill_mode(bld, a, "tile_cholesky_solve")).lower()
    return emit(bld, "tile_cholesky_solve", f"lw::tile_cholesky_solve<{low}>", [m, y], y.type,
                adjoint=f"lw::adj_tile_cholesky_solve<{low}>")


@call_form("tile_lower_solve", "tile_upper_solve")
def tile_tri_solve(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    name = obj.name
    lower = name == "tile_lower_solve"
    a = _bind(bld, node, name, ("L", "y") if lower else ("U", "z"), 2)
    m, y = (_tile_arg(bld, n, name) for n in a.values())
    _square_float(bld, node, name, m)
    _rhs(bld, node, name, m, y)
    low = str(lower).lower()
    return emit(bld, name, f"lw::tile_tri_solve<{low}>", [m, y], y.type, adjoint=f"lw::adj_tile_tri_solve<{low}>")


@call_form("tile_sort")
def tile_sort(bld: Builder, node: ast.Call, obj: Any) -> None:
    a = _bind(bld, node, "tile_sort", ("keys", "values"), 2)
    k, v = _tile_arg(bld, a["keys"], "tile_sort"), _tile_arg(bld, a["values"], "tile_sort")
    if k.type.dtype not in (T.float32, T.int32, T.uint32, T.int64, T.uint64):
        bld.error(node, KernelTypeError, f"wp.tile_sort(): keys are float32, int32, uint32, int64 or uint64, got "
                  f"{T.type_name(k.type.dtype)}")
    if k.type.shape != v.type.shape:
        bld.error(node, KernelValueError, f"wp.tile_sort(): keys {k.type.shape} and values {v.type.shape} differ")
    nk = emit(bld, "tile_sort", "lw::tile_sorted_keys", [k, v], k.type)
    nv = emit(bld, "tile_sort", "lw::tile_sorted_values", [k, v], v.type)
    write(bld, a["keys"], nk, node)
    write(bld, a["values"], nv, node)


BUILTIN_DOCS = {
    "tile_zeros": "tile_zeros(shape, dtype=float, storage='register'): a tile of zeros",
    "tile_ones": "tile_ones(shape, dtype=float, storage='register'): a tile of ones",
    "tile_empty": "tile_empty(shape, dtype=float, storage='register'): a tile (zeroed on the CPU)",
    "tile_full": "tile_full(shape, value, dtype=None, storage='register'): a tile filled with value",
    "tile_arange": "tile_arange([start,] stop[, step], dtype=None): a 1-D tile of evenly spaced values",
    "tile": "tile(x, preserve_type=False): each thread's value as an element of a tile of the block (one lane on "
            "the CPU unless wp.config.enable_cpu_blocks)",
    "untile": "untile(a): this thread's value of a tile made by wp.tile()",
    "tile_load": "tile_load(a, shape, offset=0, storage='register', bounds_check=True): a tile read from an "
                 "array at offset (elements outside the array read as zero)",
    "tile_store": "tile_store(a, t, offset=0, bounds_check=True): write a tile into an array at offset "
                  "(elements outside the array are skipped)",
    "tile_atomic_add": "tile_atomic_add(a, t, offset=0): atomically add a tile into an array region; returns "
                       "the previous values",
    "tile_view": "tile_view(t, offset, shape=None): the sub-tile of t at offset; writes to either are seen by both",
    "tile_assign": "tile_assign(dst, src, offset): write tile src into dst at offset",
    "tile_transpose": "tile_transpose(a): the transpose of a 2-D tile",
    "tile_broadcast": "tile_broadcast(a, shape): a tile broadcast to shape (NumPy's rules)",
    "tile_reshape": "tile_reshape(t, shape): the same elements in another shape (-1: inferred)",
    "tile_squeeze": "tile_squeeze(t, axis=None): t without its axes of length 1",
    "tile_astype": "tile_astype(t, dtype): the tile converted to another scalar type",
    "tile_extract": "tile_extract(a, i, ...): one element of a tile (also a[i, j])",
    "tile_map": "tile_map(op, a, *args): op applied to each element of the tiles (scalars broadcast)",
    "tile_sum": "tile_sum(a, axis=None): the sum of a tile's elements (a tile of shape (1,)) or along an axis",
    "tile_min": "tile_min(a): the smallest element, as a tile of shape (1,)",
    "tile_max": "tile_max(a): the largest element, as a tile of shape (1,)",
    "tile_argmin": "tile_argmin(a): the flat index of the smallest element, as a tile of shape (1,)",
    "tile_argmax": "tile_argmax(a): the flat index of the largest element, as a tile of shape (1,)",
    "tile_reduce": "tile_reduce(op, a, axis=None): a reduction of a tile with a binary operation",
    "tile_scan_inclusive": "tile_scan_inclusive(a): the inclusive prefix sums of a tile (row-major order)",
    "tile_scan_exclusive": "tile_scan_exclusive(a): the exclusive prefix sums of a tile (row-major order)",
    "tile_scan_max_inclusive": "tile_scan_max_inclusive(a): the running maximum of a tile",
    "tile_scan_min_inclusive": "tile_scan_min_inclusive(a): the running minimum of a tile",
    "tile_matmul": "tile_matmul(a, b[, alpha]) -> a b; tile_matmul(a, b, out, alpha=1, beta=1): "
                   "out = alpha a b + beta out",
    "tile_dot": "tile_dot(a, b): the sum of the products (dot / Frobenius products) of the elements, shape (1,)",
    "tile_axpy": "tile_axpy(alpha, src, dest): dest += alpha * src, in place",
    "tile_diag_add": "tile_diag_add(a, d): square tile a with 1-D tile d added to its diagonal",
    "tile_cholesky": "tile_cholesky(A, fill_mode='lower'): the Cholesky factor L (L L^T = A) or U (U^T U = A)",
    "tile_cholesky_solve": "tile_cholesky_solve(L, y, fill_mode='lower'): x with A x = y, from A's Cholesky factor",
    "tile_lower_solve": "tile_lower_solve(L, y): z with L z = y, L lower triangular",
    "tile_upper_solve": "tile_upper_solve(U, z): x with U x = z, U upper triangular",
    "tile_sort": "tile_sort(keys, values): sorts keys ascending in place, values permuted with them",
    "tile_slice_indexed": "tile_slice_indexed(t, (idx, slice(None))): t[idx, :], the elements an index tile picks "
                          "along one axis (a copy)",
}


class _TileBuiltin(B.Builtin):
    """wp.tile: the builtin, and `wp.tile[dtype, *shape]` the type of a tile (for @wp.func annotations)."""

    def __getitem__(self, key: Any) -> TileType:
        key = key if isinstance(key, tuple) else (key,)
        if len(key) < 2 or not all(isinstance(d, int) for d in key[1:]):
            raise TypeError(f"wp.tile[dtype, dim, ...] takes a dtype and 1 to {MAX_RANK} dimensions, got {key!r}")
        return TileType(T.normalize_dtype(key[0]), tuple(key[1:]))


for _name, _doc in BUILTIN_DOCS.items():
    cls = _TileBuiltin if _name == "tile" else B.Builtin
    B.BUILTINS[_name] = cls(_name, "Tile Primitives", _doc)
