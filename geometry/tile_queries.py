"""Block-cooperative tree queries: `wp.tile_bvh_query_aabb` / `wp.tile_bvh_query_ray` and
`wp.tile_mesh_query_aabb` start a query the whole block traverses; each `wp.tile_bvh_query_next(q)` /
`wp.tile_mesh_query_aabb_next(q)` step gives a tile of one result index per thread (negative: none), and
`wp.tile_query_valid(q)` says whether to go on (false after a step that found nothing).

On the CPU a block has one lane (Warp's CPU semantics), so a step yields one result. The step builtins
advance the query variable they are passed (the native takes it by reference), as Warp's do. With
wp.config.enable_cpu_blocks a block's lanes run together: the query is then the block's, and each step (run
once, by the leader lane) gives up to one result per lane, -1 in the lanes past the last result."""

from __future__ import annotations

import ast
from typing import Any

from loomwork.kernels import types as T
from loomwork.kernels.builtins import Exact
from loomwork.kernels.errors import KernelTypeError
from loomwork.kernels.extensions import add_builtin, export_name, register_value_type
from loomwork.kernels.frontend import Builder, call_form
from loomwork.kernels.ir import Operand
from loomwork.kernels.tiles import TileType, _bind, emit, lanes

from . import bvh, mesh

bvh_query_tiled_t = register_value_type("BvhQueryTiled", "lw::bvh_query_tiled_t",
                                        [("q", bvh.bvh_query_t), ("valid", T.int32)], header=bvh.HEADER)
mesh_query_aabb_tiled_t = register_value_type("MeshQueryAABBTiled", "lw::mesh_query_aabb_tiled_t",
                                              [("q", mesh.mesh_query_aabb_t), ("valid", T.int32)],
                                              header=mesh.HEADER)
bvh_query_tiled_t.block_value = mesh_query_aabb_tiled_t.block_value = True  # the block's (kernels.codegen)
export_name("BvhQueryTiled", bvh_query_tiled_t)
export_name("MeshQueryAABBTiled", mesh_query_aabb_tiled_t)

_U64, _V3 = Exact(T.uint64), Exact(T.vec3f)
_STEP = TileType(T.int32, (1,))  # one result per thread of the block: one lane on the CPU
_G = {"group": "Tile Primitives", "differentiable": False}
# each query under its name and Warp's older `*_tiled` spelling (an alias Warp 1.19 keeps, deprecated)
for _name, _old, _doc in (("tile_bvh_query_aabb", "bvh_query_aabb_tiled", "tile_bvh_query_aabb(id, low, high): a "
                           "block query of the boxes overlapping [low, high] (advance with tile_bvh_query_next)"),
                          ("tile_bvh_query_ray", "bvh_query_ray_tiled", "tile_bvh_query_ray(id, start, dir): a block "
                           "query of the boxes the ray hits (t >= 0, unbounded; advance with tile_bvh_query_next)")):
    for _n in (_name, _old):
        add_builtin(_n, (_U64, _V3, _V3), bvh_query_tiled_t, f"lw::{_name}", header=bvh.HEADER,
                    doc=_doc if _n == _name else f"deprecated alias of {_name}", **_G)
for _n in ("tile_bvh_query_next", "bvh_query_next_tiled"):
    add_builtin(_n, (Exact(bvh_query_tiled_t),), _STEP, "lw::tile_bvh_query_next", header=bvh.HEADER,
                doc="tile_bvh_query_next(query): a tile of one box index per thread (negative: none); advances "
                    "query" if _n.startswith("tile") else "deprecated alias of tile_bvh_query_next", **_G)
for _n in ("tile_mesh_query_aabb", "mesh_query_aabb_tiled"):
    add_builtin(_n, (_U64, _V3, _V3), mesh_query_aabb_tiled_t, "lw::tile_mesh_query_aabb", header=mesh.HEADER,
                doc="tile_mesh_query_aabb(id, low, high): a block query of the faces whose boxes overlap [low, high] "
                    "(advance with tile_mesh_query_aabb_next)" if _n.startswith("tile")
                    else "deprecated alias of tile_mesh_query_aabb", **_G)
for _n in ("tile_mesh_query_aabb_next", "mesh_query_aabb_next_tiled"):
    add_builtin(_n, (Exact(mesh_query_aabb_tiled_t),), _STEP, "lw::tile_mesh_query_aabb_next", header=mesh.HEADER,
                doc="tile_mesh_query_aabb_next(query): a tile of one face index per thread (negative: none); "
                    "advances query" if _n.startswith("tile") else "deprecated alias of tile_mesh_query_aabb_next",
                **_G)
for _t, _h in ((bvh_query_tiled_t, bvh.HEADER), (mesh_query_aabb_tiled_t, mesh.HEADER)):
    add_builtin("tile_query_valid", (Exact(_t),), T.bool_, "lw::tile_query_valid", header=_h,
                doc="tile_query_valid(query): whether a block query may have results left (false after a step "
                    "that found none)", **_G)


@call_form("tile_bvh_query_next", "bvh_query_next_tiled", "tile_mesh_query_aabb_next", "mesh_query_aabb_next_tiled")
def _step(bld: Builder, node: ast.Call, obj: Any) -> Operand:
    """A step of a block query: the builtin with one lane; with lanes, up to one result per lane."""
    name = obj.name
    bvh_step = "bvh" in name
    q = bld.value(_bind(bld, node, name, ("query",), 1)["query"])
    want = bvh_query_tiled_t if bvh_step else mesh_query_aabb_tiled_t
    if q.type is not want:
        bld.error(node, KernelTypeError, f"wp.{name}() takes a {want.__name__} query, got {T.type_name(q.type)}")
    native = "lw::tile_bvh_query_next" if bvh_step else "lw::tile_mesh_query_aabb_next"
    n = lanes(bld)
    if n == 1:
        return emit(bld, name, native, [q], _STEP)
    t = TileType(T.int32, (n,))
    fill = (f"[&](auto& lw_q) {{ {t.cname} lw_r; for (int lw_l = 0; lw_l < {n}; ++lw_l) "
            f"lw_r.c[lw_l] = lw_q.valid ? {native}(lw_q).c[0] : -1; return lw_r; }}")
    return emit(bld, name, fill, [q], t)
