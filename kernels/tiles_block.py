"""Block-shared tile state written by the block's threads: tile stacks (`wp.tile_stack` and its push, pop,
count and clear), scatters into a tile (`wp.tile_scatter_add`, `wp.tile_scatter_masked`), and the in-place
factorization and solves (`wp.tile_cholesky_inplace`, `wp.tile_*_solve_inplace`).

On the CPU a block has one lane (Warp's CPU semantics), so a push or pop moves at most one element and a
scatter applies one value. A stack is a local of the block's task that the stack builtins update through a
reference; scatters and in-place solves write the tile variable in place (its views see the change). With
wp.config.enable_cpu_blocks a block's lanes run together: stacks and tiles are then the block's, and each lane
pushes, pops and scatters in turn (codegen.LANE_WRITES)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from . import builtins as B
from . import types as T
from .errors import KernelTypeError, KernelValueError
from .frontend import Builder, call_form
from .ir import Const, Operand, ctype
from .structs import tuple_type
from .tiles import _adj, _bind, _cast, _fill_mode, _rhs, _square_float, _static_dtype, _tile_arg, emit, write


@dataclass(frozen=True)
class TileStackType:
    """A block's stack of up to `capacity` elements of `dtype` (`lw::tile_stack_t` in tiles.h)."""

    dtype: Any
    capacity: int
    kernel_value_type = True

    @property
    def __name__(self) -> str:
        return f"tile_stack(dtype={T.type_name(self.dtype)}, capacity={self.capacity})"

    def __str__(self) -> str:
        return self.__name__

    @property
    def cname(self) -> str:
        return f"lw::tile_stack_t<{ctype(self.dtype)}, {self.capacity}>"


@call_form("tile_stack")
def tile_stack(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_stack", ("capacity", "dtype"), 2)
    cap = bld.eval_static(a["capacity"], "the capacity of wp.tile_stack()")
    cap = getattr(cap, "value", cap)  # wp.constant(8)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
        bld.error(a["capacity"], KernelValueError, f"wp.tile_stack(): capacity must be a positive compile-time "
                  f"int, got {cap!r}")
    dtype = _static_dtype(bld, a["dtype"], "tile_stack")
    s = TileStackType(dtype, int(cap))
    return emit(bld, "tile_stack", f"{s.cname}", [], s)


def _stack(bld: Builder, n: ast.expr, name: str) -> Operand:
    s = bld.value(n)
    if not isinstance(s.type, TileStackType):
        bld.error(n, KernelTypeError, f"wp.{name}() takes a stack from wp.tile_stack(), got {T.type_name(s.type)}")
    if not isinstance(n, ast.Name):
        bld.error(n, KernelTypeError, f"wp.{name}() updates its stack: pass the variable that holds it")
    return s


def _flag(bld: Builder, n: ast.expr, name: str, what: str) -> Operand:
    v = bld.value(n)
    if v.type is not T.bool_:
        bld.error(n, KernelTypeError, f"wp.{name}(): {what} is a bool, got {T.type_name(v.type)}")
    return v


@call_form("tile_stack_push")
def tile_stack_push(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_stack_push", ("s", "value", "has_value"), 3)
    s = _stack(bld, a["s"], "tile_stack_push")
    v = _cast(bld, bld.value(a["value"]), s.type.dtype, a["value"], "wp.tile_stack_push() value") \
        if T.is_scalar(s.type.dtype) else bld.value(a["value"])
    if v.type != s.type.dtype:
        bld.error(a["value"], KernelTypeError, f"wp.tile_stack_push(): the stack holds {T.type_name(s.type.dtype)}, "
                  f"got {T.type_name(v.type)}")
    has = _flag(bld, a["has_value"], "tile_stack_push", "has_value")
    return emit(bld, "tile_stack_push", "lw::tile_stack_push", [s, bld.materialize(v), has], T.int32)


@call_form("tile_stack_pop")
def tile_stack_pop(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_stack_pop", ("s",), 1)
    s = _stack(bld, a["s"], "tile_stack_pop")
    r = tuple_type((s.type.dtype, T.int32))
    return emit(bld, "tile_stack_pop", f"lw::tile_stack_pop<{r.cname}>", [s], r)


@call_form("tile_stack_count")
def tile_stack_count(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_stack_count", ("s",), 1)
    return emit(bld, "tile_stack_count", "lw::tile_stack_count", [_stack(bld, a["s"], "tile_stack_count")], T.int32)


@call_form("tile_stack_clear")
def tile_stack_clear(bld: Builder, node: ast.Call, obj: Any) -> None:
    a = _bind(bld, node, "tile_stack_clear", ("s",), 1)
    emit(bld, "tile_stack_clear", "lw::tile_stack_clear", [_stack(bld, a["s"], "tile_stack_clear")], None,
         writes=True)


@call_form("tile_scatter_add", "tile_scatter_masked")
def tile_scatter(bld: Builder, node: ast.Call, obj: Any) -> None:
    """tile_scatter_add(a, i[, j, k, l], value, has_value, atomic=True) and tile_scatter_masked(a, i[, ...],
    value, has_value): one element of tile `a` (a variable) takes value added or written when has_value."""
    name = obj.name
    adding = name == "tile_scatter_add"
    pos = list(node.args)
    if not pos:
        bld.error(node, KernelTypeError, f"wp.{name}() needs a tile, its coordinates, a value and has_value")
    t = _tile_arg(bld, pos[0], name)
    rank = t.type.ndim
    names = ("a", *"ijkl"[:rank], "value", "has_value", *(("atomic",) if adding else ()))
    a = _bind(bld, node, name, names, len(names) - (1 if adding else 0))
    idx = []
    for c in "ijkl"[:rank]:
        v = bld.value(a[c])
        if not T.is_int(v.type):
            bld.error(a[c], KernelTypeError, f"wp.{name}(): coordinate {c} is an integer, got {T.type_name(v.type)}")
        idx.append(_cast(bld, v, T.int32, a[c], f"wp.{name}() {c}"))
    dt = t.type.dtype
    v = _cast(bld, bld.value(a["value"]), dt, a["value"], f"wp.{name}() value") if T.is_scalar(dt) else \
        bld.value(a["value"])
    if v.type != dt:
        bld.error(a["value"], KernelTypeError, f"wp.{name}(): the tile holds {T.type_name(dt)}, got "
                  f"{T.type_name(v.type)}")
    has = _flag(bld, a["has_value"], name, "has_value")
    if "atomic" in a and not isinstance(bld.eval_static(a["atomic"], "atomic"), bool):
        bld.error(a["atomic"], KernelTypeError, f"wp.{name}(): atomic is a compile-time bool")
    args = [t, bld.materialize(v), has, *idx, *[Const(0, T.int32)] * (4 - rank)]
    out = emit(bld, name, f"lw::{name}", args, t.type, adjoint=_adj(dt, f"lw::adj_{name}"), result_alias=0)
    write(bld, a["a"], out, node)


@call_form("tile_cholesky_inplace")
def tile_cholesky_inplace(bld: Builder, node: ast.Call, obj: Any) -> None:
    a = _bind(bld, node, "tile_cholesky_inplace", ("A", "fill_mode"), 1)
    m = _tile_arg(bld, a["A"], "tile_cholesky_inplace")
    _square_float(bld, node, "tile_cholesky_inplace", m)
    low = str(_fill_mode(bld, a, "tile_cholesky_inplace")).lower()
    write(bld, a["A"], emit(bld, "tile_cholesky_inplace", f"lw::tile_cholesky<{low}>", [m], m.type), node)


@call_form("tile_cholesky_solve_inplace", "tile_lower_solve_inplace", "tile_upper_solve_inplace")
def tile_solve_inplace(bld: Builder, node: ast.Call, obj: Any) -> None:
    name = obj.name
    params = {"tile_cholesky_solve_inplace": ("L", "y", "fill_mode"), "tile_lower_solve_inplace": ("L", "y"),
              "tile_upper_solve_inplace": ("U", "z")}[name]
    a = _bind(bld, node, name, params, 2)
    m, y = _tile_arg(bld, a[params[0]], name), _tile_arg(bld, a[params[1]], name)
    _square_float(bld, node, name, m)
    _rhs(bld, node, name, m, y)
    if name == "tile_cholesky_solve_inplace":
        native = f"lw::tile_cholesky_solve<{str(_fill_mode(bld, a, name)).lower()}>"
    else:
        native = f"lw::tile_tri_solve<{str(name == 'tile_lower_solve_inplace').lower()}>"
    write(bld, a[params[1]], emit(bld, name, native, [m, y], y.type), node)


BUILTIN_DOCS = {
    "tile_stack": "tile_stack(capacity, dtype): an empty stack of up to capacity elements shared by the block",
    "tile_stack_push": "tile_stack_push(s, value, has_value): push value (when has_value); returns its slot, or -1 "
                       "when nothing was pushed or the stack is full",
    "tile_stack_pop": "tile_stack_pop(s): (value, slot) of the top element, slot -1 when the stack is empty",
    "tile_stack_count": "tile_stack_count(s): the number of elements in the stack",
    "tile_stack_clear": "tile_stack_clear(s): empty the stack",
    "tile_scatter_add": "tile_scatter_add(a, i[, j, k, l], value, has_value, atomic=True): add value to element "
                        "(i, ...) of tile a in place when has_value",
    "tile_scatter_masked": "tile_scatter_masked(a, i[, j, k, l], value, has_value): write value to element (i, ...) "
                           "of tile a in place when has_value",
    "tile_cholesky_inplace": "tile_cholesky_inplace(A, fill_mode='lower'): A replaced by its Cholesky factor",
    "tile_cholesky_solve_inplace": "tile_cholesky_solve_inplace(L, y, fill_mode='lower'): y replaced by x with "
                                   "A x = y, from A's Cholesky factor",
    "tile_lower_solve_inplace": "tile_lower_solve_inplace(L, y): y replaced by z with L z = y",
    "tile_upper_solve_inplace": "tile_upper_solve_inplace(U, z): z replaced by x with U x = z",
}
for _name, _doc in BUILTIN_DOCS.items():
    B.BUILTINS[_name] = B.Builtin(_name, "Tile Primitives", _doc)
