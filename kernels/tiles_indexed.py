"""Tiles gathered and scattered through index tiles: `wp.tile_load_indexed`, `wp.tile_store_indexed`,
`wp.tile_atomic_add_indexed` (one axis of an array addressed through a 1-D tile of int32 indices), with
their adjoints in native/tiles.h."""

from __future__ import annotations

import ast
from typing import Any

from . import builtins as B
from . import types as T
from .errors import KernelTypeError, KernelValueError
from .frontend import Builder, call_form
from .ir import Const, Operand
from .tiles import TileType, _adj, _array_arg, _bind, _ints, _static_shape, _static_str, _tile_arg, emit


def _indexed(bld: Builder, node: ast.Call, name: str, arr: Operand, a: dict[str, ast.expr], shape: tuple[int, ...],
             ) -> tuple[Operand, int, list[Operand]]:
    """The index tile, the axis and the four offsets of a gather or scatter of a tile of `shape` along
    one axis of array `arr`."""
    idx = _tile_arg(bld, a["indices"], name, "a 1-D tile of int32 indices")
    nd = arr.type.ndim
    axis = bld.eval_static(a["axis"], f"the axis of wp.{name}()") if "axis" in a else 0
    if not isinstance(axis, int) or not 0 <= axis < nd:
        bld.error(node, KernelValueError, f"wp.{name}(): axis must be an axis of the {nd}-D array, got {axis!r}")
    if idx.type.ndim != 1 or idx.type.dtype is not T.int32:
        bld.error(a["indices"], KernelTypeError, f"wp.{name}(): indices must be a 1-D tile of int32, got {idx.type}")
    if len(shape) != nd:
        bld.error(node, KernelValueError, f"wp.{name}(): the tile has {len(shape)} dimensions and the array {nd}; "
                  "they must match")
    if idx.type.shape[0] != shape[axis]:
        bld.error(node, KernelValueError, f"wp.{name}(): {idx.type.shape[0]} indices for a tile with {shape[axis]} "
                  f"elements along axis {axis}")
    off = _ints(bld, a.get("offset"), nd, name)
    return idx, axis, off + [Const(0, T.int32)] * (4 - nd)


@call_form("tile_load_indexed")
def tile_load_indexed(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_load_indexed", ("a", "indices", "shape", "offset", "axis", "storage"), 3)
    arr = _array_arg(bld, a["a"], "tile_load_indexed")
    shape = _static_shape(bld, a["shape"], "tile_load_indexed")
    idx, axis, off = _indexed(bld, node, "tile_load_indexed", arr, a, shape)
    t = TileType(arr.type.dtype, shape, _static_str(bld, a.get("storage"), "tile_load_indexed", "register"))
    return emit(bld, "tile_load_indexed", f"lw::tile_load_indexed<{t.cname}, {axis}>", [arr, idx, *off], t,
                adjoint=_adj(t.dtype, f"lw::adj_tile_load_indexed<{t.cname}, {axis}>"), reads_state=True)


@call_form("tile_store_indexed", "tile_atomic_add_indexed")
def tile_scatter_indexed(bld: Builder, node: ast.Call, obj: Any) -> Operand | None:
    name = obj.name
    a = _bind(bld, node, name, ("a", "indices", "t", "offset", "axis"), 3)
    arr = _array_arg(bld, a["a"], name)
    t = _tile_arg(bld, a["t"], name)
    if t.type.dtype != arr.type.dtype:
        bld.error(node, KernelTypeError, f"wp.{name}(): a tile of {T.type_name(t.type.dtype)} into an array of "
                  f"{T.type_name(arr.type.dtype)}")
    idx, axis, off = _indexed(bld, node, name, arr, a, t.type.shape)
    if name == "tile_store_indexed":
        return emit(bld, name, f"lw::tile_store_indexed<{axis}>", [arr, idx, t, *off], None,
                    adjoint=_adj(t.type.dtype, f"lw::adj_tile_store_indexed<{axis}>"), writes=True)
    if T.elem_scalar(t.type.dtype) not in (T.float16, T.float32, T.float64, T.int32, T.uint32, T.int64, T.uint64):
        bld.error(node, KernelTypeError, f"wp.{name}() does not support {T.type_name(t.type.dtype)} tiles")
    return emit(bld, name, f"lw::tile_atomic_add_indexed<{axis}>", [arr, idx, t, *off], t.type,
                adjoint=_adj(t.type.dtype, f"lw::adj_tile_atomic_add_indexed<{axis}>"), writes=True)


BUILTIN_DOCS = {
    "tile_load_indexed": "tile_load_indexed(a, indices, shape, offset=0, axis=0, storage='register'): a tile "
                         "gathered from a along axis at offset + indices (outside the array: zero)",
    "tile_store_indexed": "tile_store_indexed(a, indices, t, offset=0, axis=0): tile t scattered into a along axis "
                          "at offset + indices (outside the array: skipped)",
    "tile_atomic_add_indexed": "tile_atomic_add_indexed(a, indices, t, offset=0, axis=0): tile t atomically added "
                               "into a along axis at offset + indices; returns the previous values",
}
for _name, _doc in BUILTIN_DOCS.items():
    B.BUILTINS[_name] = B.Builtin(_name, "Tile Primitives", _doc)
