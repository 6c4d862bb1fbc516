"""Tile constructors that depend on a block's lanes: `wp.tile_randi`, `wp.tile_randf` (a stream per lane
seeded from an rng state) and `wp.tile_from_thread` (one lane's value broadcast over a tile). On the CPU a
block has one lane (lane 0), as in Warp's default CPU backend, unless wp.config.enable_cpu_blocks runs its
lanes together: then each lane fills its part of the tile (tiles.lane_write)."""

from __future__ import annotations

import ast
from typing import Any

from . import builtins as B
from . import types as T
from .errors import KernelTypeError, KernelValueError
from .frontend import Builder, call_form
from .ir import Operand
from .tiles import TileType, _bind, _cast, _static_shape, _static_str, lane_write


def _storage(bld: Builder, a: dict[str, ast.expr], name: str) -> str:
    s = _static_str(bld, a.get("storage"), name, "register")
    if s not in ("register", "shared"):
        bld.error(a["storage"], KernelValueError, f"Invalid value for 'storage': {s!r}. Expected 'shared' or "
                  "'register'.")
    return s


@call_form("tile_randi", "tile_randf")
def tile_rand(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    name = obj.name
    a = _bind(bld, node, name, ("shape", "rng", "min", "max", "storage"), 2)
    elem = T.int32 if name == "tile_randi" else T.float32
    t = TileType(elem, _static_shape(bld, a["shape"], name), _storage(bld, a, name))
    rng = bld.value(a["rng"])
    if rng.type is not T.uint32:
        bld.error(a["rng"], KernelTypeError, f"wp.{name}(): rng is a uint32 state (wp.rand_init()), got "
                  f"{T.type_name(rng.type)}")
    args = [rng]
    if ("min" in a) != ("max" in a):
        bld.error(node, KernelTypeError, f"wp.{name}() takes both min and max, or neither")
    if "min" in a:
        args += [_cast(bld, bld.value(a[k]), elem, a[k], f"wp.{name}() {k}") for k in ("min", "max")]
    return lane_write(bld, node, name, f"lw::{name}<{t.cname}>", args, t)


@call_form("tile_from_thread")
def tile_from_thread(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    a = _bind(bld, node, "tile_from_thread", ("shape", "value", "thread_idx", "storage"), 3)
    v = bld.materialize(bld.value(a["value"]))
    lane = bld.value(a["thread_idx"])
    if not T.is_int(lane.type):
        bld.error(a["thread_idx"], KernelTypeError, f"wp.tile_from_thread(): thread_idx is an integer, got "
                  f"{T.type_name(lane.type)}")
    if not (T.is_scalar(v.type) or T.is_composite(v.type)):
        bld.error(a["value"], KernelTypeError, f"wp.tile_from_thread(): value must be a scalar, vector or matrix, "
                  f"got {T.type_name(v.type)}")
    t = TileType(v.type, _static_shape(bld, a["shape"], "tile_from_thread"), _storage(bld, a, "tile_from_thread"))
    lane = _cast(bld, lane, T.int32, a["thread_idx"], "wp.tile_from_thread() thread_idx")
    return lane_write(bld, node, "tile_from_thread", f"lw::tile_from_thread<{t.cname}>", [v, lane], t)


BUILTIN_DOCS = {
    "tile_randi": "tile_randi(shape, rng, min=None, max=None, storage='register'): a tile of random int32 "
                  "(in [min, max) when given) drawn from a stream seeded by rng",
    "tile_randf": "tile_randf(shape, rng, min=None, max=None, storage='register'): a tile of random floats in "
                  "[0, 1) (or [min, max)) drawn from a stream seeded by rng",
    "tile_from_thread": "tile_from_thread(shape, value, thread_idx, storage='register'): a tile filled with "
                        "lane thread_idx's value",
}
for _name, _doc in BUILTIN_DOCS.items():
    B.BUILTINS[_name] = B.Builtin(_name, "Tile Primitives", _doc)
