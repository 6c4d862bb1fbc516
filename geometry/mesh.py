"""`wp.Mesh`: a triangle mesh with a BVH over its faces, for point, ray and box queries in kernels.

In a kernel, `q = wp.mesh_query_point(mesh_id, p, max_dist)` finds the closest point (`q.face`, `q.u`,
`q.v`, `q.sign` < 0 inside), `wp.mesh_query_ray(mesh_id, start, dir, max_t)` the nearest hit,
`q = wp.mesh_query_aabb(mesh_id, low, high)` with `while wp.mesh_query_next(q, face):` the faces whose
boxes overlap a box, and `wp.mesh_eval_position(mesh_id, face, u, v)` a point on a face (the point
u * p0 + v * p1 + (1 - u - v) * p2). Signs come from three axis-aligned rays (`mesh_query_point`),
angle-weighted pseudo-normals (`_sign_normal`), ray parity (`_sign_parity`) or fast winding numbers
(`_sign_winding_number`, meshes built with `support_winding_number=True`). The queries live in
geometry/native/mesh.h.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import ArrayDesc
from loomwork.kernels.builtins import Exact, InOut, Out
from loomwork.kernels.extensions import (
    add_builtin,
    export_name,
    register_handle_type,
    register_header,
    register_value_type,
)
from loomwork.kernels.ir import ArrayType

from .bvh import BvhConstructor, Tree, groups_or_raise, leaf_size_or_raise, query_type
from .common import GeometryError, Handle, finite_or_raise, host_library, int32_array, vec3_array

HEADER = register_header(Path(__file__).parent / "native" / "mesh.h")


class MeshDesc(ctypes.Structure):
    """Mirrors `lw::mesh_t` in mesh.h."""

    _fields_ = [("tag", ctypes.c_uint32), ("num_points", ctypes.c_int32), ("num_tris", ctypes.c_int32),
                ("has_winding", ctypes.c_int32), ("bvh", ctypes.c_uint64), ("points", ctypes.c_uint64),
                ("velocities", ctypes.c_uint64), ("indices", ctypes.c_uint64), ("moments", ctypes.c_uint64),
                ("points_grad", ctypes.c_uint64), ("velocities_grad", ctypes.c_uint64),
                ("leaf_corners", ctypes.c_uint64), ("avg_edge", ctypes.c_float),
                ("pad", ctypes.c_int32), ("nodes4", ctypes.c_uint64), ("tri_blocks", ctypes.c_uint64)]


_NODE4_BYTES = 128  # bvh4_node_t in mesh.h
_TRI_BLOCK_BYTES = 160  # tri4_block_t in mesh.h


def _aligned_zeros(nbytes: int) -> np.ndarray:
    """nbytes zeroed bytes on a 64-byte boundary (the 4-wide tree's SIMD loads)."""
    raw = np.zeros(nbytes + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip:skip + nbytes]


class Mesh:
    """A triangle mesh: `points` (wp.vec3), `indices` (int32, three per triangle, flattened), optional
    per-point `velocities`; kept by reference (`refit()` after moving the points in place, or assign
    `mesh.points = new_points`)."""

    def __init__(self, points: Any, indices: Any, velocities: Any = None, support_winding_number: bool = False,
                 bvh_constructor: Any = None, bvh_leaf_size: int | None = None, groups: Any = None) -> None:
        self._tree: Tree | None = None
        self._desc, self._id = None, 0
        points = vec3_array(points, "Mesh points")
        indices = int32_array(indices, "Mesh indices", points.device)
        if indices.ndim != 1:
            raise GeometryError(f"Mesh indices must be a flattened 1-D array (3 per triangle), got shape "
                                f"{indices.shape}")
        if indices.size % 3 or indices.size == 0:
            raise GeometryError(f"Mesh indices must hold three entries per triangle and at least one triangle, "
                                f"got {indices.size} entries")
        if indices.device != points.device:
            raise GeometryError(f"Mesh: points are on {points.device}, indices on {indices.device}")
        velocities = vec3_array(velocities, "Mesh velocities", points.device, allow_none=True)
        if velocities is not None and (len(velocities) != len(points) or velocities.device != points.device):
            raise GeometryError(f"Mesh: {len(velocities)} velocities for {len(points)} points (velocities on "
                                f"{velocities.device}, points on {points.device})")
        tris = indices.numpy().reshape(-1, 3)
        bad = (tris < 0) | (tris >= len(points))
        if bad.any():
            t = int(np.argwhere(bad.any(axis=1))[0, 0])
            raise GeometryError(f"Mesh indices: triangle {t} has {tris[t].tolist()}, out of range for "
                                f"{len(points)} points")
        self.constructor = BvhConstructor.parse(bvh_constructor)
        groups = groups_or_raise(groups, self.constructor, len(tris), "meshes", "triangles", points.device)
        self.leaf_size = leaf_size_or_raise(4 if bvh_leaf_size in (None, 0) else bvh_leaf_size, "Mesh bvh_leaf_size")
        self.device = points.device
        self.indices, self.groups = indices, groups
        self.support_winding_number = bool(support_winding_number)
        self._points, self._velocities = points, velocities
        self._tris = tris
        n = len(tris)
        self._lowers, self._uppers = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32)
        self._perimeters = np.zeros(n, np.float32)
        self._update_geometry()
        self._tree = Tree(self._lowers, self._uppers, None if groups is None else groups.numpy().reshape(-1),
                          self.constructor, self.leaf_size, "Mesh", self.device)
        self._moments = np.zeros((self._tree.desc.num_nodes, 16), np.float32) if self.support_winding_number else None
        self._leaf_corners = np.zeros((n, 3, 3), np.float32)
        # the 4-wide tree and triangle blocks serve CPU rays only: a device's kernels walk the binary tree
        self._four_wide = self.device.backend.host_accessible
        nodes4, blocks = (max(1, self._tree.desc.num_nodes // 2), max(1, n)) if self._four_wide else (0, 0)
        self._nodes4, self._nodes4_count = _aligned_zeros(nodes4 * _NODE4_BYTES), 0
        self._tri_blocks, self._tri_block_count = _aligned_zeros(blocks * _TRI_BLOCK_BYTES), 0
        self._update_tree_data(built=True)
        self._handle = Handle(MeshDesc, self.device)
        self._desc, self._id = self._handle.desc, self._handle.id
        self._publish()

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        if not self._id:
            raise GeometryError("this Mesh was not built")
        return self._id

    @property
    def points(self) -> Any:
        """The vertex positions; assigning an array of the same length refits the mesh to it."""
        return self._points

    @points.setter
    def points(self, new: Any) -> None:
        new = vec3_array(new, "Mesh.points", self.device)
        if new.device != self.device or len(new) != len(self._points):
            raise GeometryError(f"Mesh.points: the new points ({len(new)} on {new.device}) must match the old "
                                f"({len(self._points)} on {self.device})")
        self._points = new
        self.refit()

    @property
    def velocities(self) -> Any:
        """The per-point velocities (None when the mesh has none); assigning needs no refit."""
        return self._velocities

    @velocities.setter
    def velocities(self, new: Any) -> None:
        new = vec3_array(new, "Mesh.velocities", self.device)
        if new.device != self.device or len(new) != len(self._points):
            raise GeometryError(f"Mesh.velocities: the new velocities ({len(new)} on {new.device}) must match the "
                                f"points ({len(self._points)} on {self.device})")
        self._velocities = new
        self._publish(tree_data=False)

    def refit(self) -> None:
        """Refit the tree (and the sign data) to the points' current positions."""
        self._update_geometry()
        self._tree.refit()
        self._update_tree_data(built=False)
        self._publish()

    def _update_geometry(self) -> None:
        # host arrays: the points in place (the triangles too); device arrays: copies read now
        p = self._host_points = np.ascontiguousarray(self._points.numpy().reshape(-1, 3))
        finite_or_raise(p, "Mesh points")
        lib = host_library()
        lib.lw_triangle_bounds(p.ctypes.data, self._tris.ctypes.data, len(self._tris), self._lowers.ctypes.data,
                               self._uppers.ctypes.data, self._perimeters.ctypes.data)
        self._avg_edge = float(self._perimeters.sum(dtype=np.float64)) / (3 * len(self._tris))

    def _update_tree_data(self, built: bool) -> None:
        """The leaf-ordered triangle corners, the 4-wide tree CPU rays traverse (made after a build, refit
        after a refit) and the winding-number moments: after every build or refit."""
        t, lib = self._tree, host_library()
        points, tris = self._host_points.ctypes.data, self._tris.ctypes.data
        lib.lw_leaf_corners(points, tris, t.order.ctypes.data, len(self._tris), self._leaf_corners.ctypes.data)
        if self._four_wide:
            self._update_four_wide(built)
        if self._moments is not None:
            lib.lw_winding_moments(t.nodes.ctypes.data, t.desc.num_nodes, t.order.ctypes.data, points, tris,
                                   self._moments.ctypes.data)

    def _update_four_wide(self, built: bool) -> None:
        """The 4-wide tree (made after a build, refit after a refit) and its triangle blocks, from the binary
        tree and the leaf-ordered corners."""
        t, lib = self._tree, host_library()
        if built:
            blocks = ctypes.c_int32()
            self._nodes4_count = lib.lw_bvh4_collapse(t.nodes.ctypes.data, t.desc.num_nodes, self._nodes4.ctypes.data,
                                                      self._tri_blocks.ctypes.data, ctypes.byref(blocks))
            self._tri_block_count = blocks.value
        else:
            lib.lw_bvh4_refit(t.nodes.ctypes.data, self._nodes4.ctypes.data, self._nodes4_count)
        lib.lw_tri_blocks(self._leaf_corners.ctypes.data, self._tri_blocks.ctypes.data, self._tri_block_count)

    def _publish(self, tree_data: bool = True) -> None:
        """Point the descriptor at the current arrays; `tree_data`: also the leaf corners and moments (after
        a build or refit), which are copied to a device that cannot read host memory."""
        d, t = self._desc, self._tree
        d.num_points, d.num_tris, d.bvh = len(self._points), len(self._tris), t.id
        d.points, d.indices = self._points.ptr, self.indices.ptr
        grad = getattr(self._points, "grad", None)
        d.points_grad = grad.ptr if grad is not None else 0
        d.velocities = self._velocities.ptr if self._velocities is not None else 0
        vgrad = getattr(self._velocities, "grad", None)
        d.velocities_grad = vgrad.ptr if vgrad is not None else 0
        d.has_winding = int(self._moments is not None)
        h = self._handle
        if tree_data:
            d.moments = h.address("moments", self._moments) if self._moments is not None else 0
            d.leaf_corners = h.address("leaf_corners", self._leaf_corners)
            four_wide = self._four_wide and self._nodes4_count  # 0 when the root is a leaf
            d.nodes4 = self._nodes4.ctypes.data if four_wide else 0
            d.tri_blocks = self._tri_blocks.ctypes.data if four_wide else 0
            d.avg_edge = self._avg_edge
        h.publish()

    def __del__(self) -> None:
        if getattr(self, "_id", 0):
            self._handle.release()
            self._id = 0
        tree = getattr(self, "_tree", None)
        if tree is not None:
            tree.free()
            self._tree = None

    def __repr__(self) -> str:
        return f"Mesh(points={len(self._points)}, triangles={len(self._tris)}, device={self.device})"


mesh_query_point_t = register_value_type(
    "mesh_query_point_t", "lw::mesh_query_point_t",
    [("result", T.bool_), ("sign", T.float32), ("face", T.int32), ("u", T.float32), ("v", T.float32)],
    header=HEADER, readable=("result", "sign", "face", "u", "v"))
mesh_query_ray_t = register_value_type(
    "mesh_query_ray_t", "lw::mesh_query_ray_t",
    [("result", T.bool_), ("sign", T.float32), ("face", T.int32), ("t", T.float32), ("u", T.float32),
     ("v", T.float32), ("normal", T.vec3f)],
    header=HEADER, readable=("result", "sign", "face", "t", "u", "v", "normal"))
mesh_query_aabb_t = query_type("mesh_query_aabb_t", "lw::mesh_query_aabb_t", "mesh_query_next")
_ARRAY = T.vector(ctypes.sizeof(ArrayDesc) // 8, T.uint64)  # the bytes of an array descriptor, for the layout
mesh_arrays_t = register_value_type(
    "mesh_arrays_t", "lw::mesh_arrays_t",
    [("points", _ARRAY), ("velocities", _ARRAY), ("indices", _ARRAY), ("num_points", T.int32),
     ("num_tris", T.int32)], header=HEADER, readable=("num_points", "num_tris"))
# the array members, which register_value_type cannot declare yet: kernels index them like array arguments
mesh_arrays_t.fields = {"points": ArrayType(T.vec3f, 1), "velocities": ArrayType(T.vec3f, 1),
                        "indices": ArrayType(T.int32, 1), **mesh_arrays_t.fields}
# their float fields carry adjoints (read by autodiff): q.u, q.v and q.t differentiate back to the query's inputs
mesh_query_point_t.differentiable = mesh_query_ray_t.differentiable = True

register_handle_type(Mesh)
for _name, _obj in (("Mesh", Mesh), ("MeshQueryPoint", mesh_query_point_t), ("MeshQueryRay", mesh_query_ray_t),
                    ("MeshQueryAABB", mesh_query_aabb_t), ("MeshQuery", mesh_query_aabb_t),
                    ("mesh_query_point_t", mesh_query_point_t), ("mesh_query_ray_t", mesh_query_ray_t),
                    ("mesh_query_aabb_t", mesh_query_aabb_t)):
    export_name(_name, _obj)

U64, V3, F32, I32 = Exact(T.uint64), Exact(T.vec3f), Exact(T.float32), Exact(T.int32)
# Warp's out-parameter forms leave the caller's variables alone on a miss: in-out parameters
OF, OI, OV = InOut(T.float32), InOut(T.int32), InOut(T.vec3f)
_G = {"header": HEADER, "group": "Geometry"}


def _point(name: str, extra: tuple, doc: str, *, outs: tuple = (OF, OI, OF, OF), differentiable: bool = True) -> None:
    """The struct form `name(id, point, max_dist, *extra)` and Warp's out-parameter form (`inside`, `face`, `u`,
    `v` after max_dist, then the extra parameters); both with and without the optional extras."""
    adjoint = {"differentiable": differentiable, "adjoint": f"lw::adj_{name}" if differentiable else None}
    for ex in ((extra, ()) if extra else ((),)):
        add_builtin(name, (U64, V3, F32, *ex), mesh_query_point_t, f"lw::{name}", **adjoint, **_G, doc=doc)
        add_builtin(name, (U64, V3, F32, *outs, *ex), T.bool_, f"lw::{name}", **adjoint, **_G, doc=doc)


_PT = ": the closest point strictly within max_dist (q.result, q.face, q.u, q.v"
_point("mesh_query_point", (), "mesh_query_point(id, point, max_dist)" + _PT + ", q.sign < 0 inside by a vote of "
       "three axis-aligned rays: for watertight meshes)")
_point("mesh_query_point_no_sign", (), "mesh_query_point_no_sign(id, point, max_dist)" + _PT + "; no sign)",
       outs=(OI, OF, OF))
_point("mesh_query_furthest_point_no_sign", (), "mesh_query_furthest_point_no_sign(id, point, min_dist): the "
       "furthest point strictly beyond min_dist (a vertex of q.face)", outs=(OI, OF, OF), differentiable=False)
_point("mesh_query_point_sign_normal", (F32,), "mesh_query_point_sign_normal(id, point, max_dist, epsilon=1e-3)"
       + _PT + ", q.sign from the angle-weighted pseudo-normal of the nearest face, edge or vertex)")
_point("mesh_query_point_sign_parity", (I32, F32), "mesh_query_point_sign_parity(id, point, max_dist, n_sample=1, "
       "perturbation_scale=0.1)" + _PT + ", q.sign < 0 when at least half of n_sample rays cross an odd count)")
_point("mesh_query_point_sign_winding_number", (F32, F32), "mesh_query_point_sign_winding_number(id, point, "
       "max_dist, accuracy=2, threshold=0.5)" + _PT + ", q.sign < 0 where the fast winding number exceeds threshold; "
       "needs support_winding_number=True, else the ray vote)")
_RAY = ("mesh_query_ray(id, start, dir, max_t, root=-1): the nearest hit with t < max_t (in multiples of |dir|): "
        "q.result, q.t, q.face, q.u, q.v, q.normal (unit), q.sign > 0 on a face's front")
for _root in ((), (I32,)):
    add_builtin("mesh_query_ray", (U64, V3, V3, F32, *_root), mesh_query_ray_t, "lw::mesh_query_ray",
                adjoint="lw::adj_mesh_query_ray", **_G, doc=_RAY)
    add_builtin("mesh_query_ray", (U64, V3, V3, F32, OF, OF, OF, OF, OV, OI, *_root), T.bool_, "lw::mesh_query_ray",
                adjoint="lw::adj_mesh_query_ray", **_G, doc=_RAY)
    add_builtin("mesh_query_ray_anyhit", (U64, V3, V3, F32, *_root), T.bool_, "lw::mesh_query_ray_anyhit",
                differentiable=False, **_G, doc="mesh_query_ray_anyhit(id, start, dir, max_t, root=-1): whether the "
                                                "ray hits a face with t < max_t")
    add_builtin("mesh_query_ray_count_intersections", (U64, V3, V3, *_root), T.int32,
                "lw::mesh_query_ray_count_intersections", differentiable=False, **_G,
                doc="mesh_query_ray_count_intersections(id, start, dir, root=-1): the faces the ray crosses at t >= 0")
add_builtin("mesh_query_aabb", (U64, V3, V3), mesh_query_aabb_t, "lw::mesh_query_aabb", differentiable=False, **_G,
            doc="mesh_query_aabb(id, low, high): iterate (mesh_query_next) the faces whose boxes overlap [low, high]")
add_builtin("mesh_query_sphere", (U64, V3, F32), mesh_query_aabb_t, "lw::mesh_query_sphere", differentiable=False,
            **_G, doc="mesh_query_sphere(id, center, radius): iterate the faces that come within radius of center")
for _next in ("mesh_query_next", "mesh_query_aabb_next"):
    add_builtin(_next, (InOut(mesh_query_aabb_t), Out(T.int32)), T.bool_, "lw::mesh_query_next", differentiable=False,
                **_G, doc=f"{_next}(query, index): the next face into `index`; False at the end")
for _name, _what in (("mesh_eval_position", "points"), ("mesh_eval_velocity", "velocities")):
    add_builtin(_name, (U64, I32, F32, F32), T.vec3f, f"lw::{_name}", adjoint=f"lw::adj_{_name}", reads_state=True,
                **_G,
                doc=f"{_name}(id, face, u, v): u * x0 + v * x1 + (1 - u - v) * x2 of the face's {_what} "
                    f"(differentiable in u and v, and in the {_what} when they have a .grad)")
add_builtin("mesh_eval_face_normal", (U64, I32), T.vec3f, "lw::mesh_eval_face_normal", differentiable=False, **_G,
            doc="mesh_eval_face_normal(id, face): the face's unit normal (by its winding)")
for _name, _what in (("mesh_get_point", "point"), ("mesh_get_velocity", "velocity")):
    add_builtin(_name, (U64, I32), T.vec3f, f"lw::{_name}", adjoint=f"lw::adj_{_name}", reads_state=True, **_G,
                doc=f"{_name}(id, index): the {_what} of corner `index` (3 * face + k); its gradient reaches the "
                    "mesh's array when that has a .grad")
add_builtin("mesh_get_index", (U64, I32), T.int32, "lw::mesh_get_index", differentiable=False, **_G,
            doc="mesh_get_index(id, index): indices[index]: the point of corner `index`")
add_builtin("mesh_get", (U64,), mesh_arrays_t, "lw::mesh_get", differentiable=False, **_G,
            doc="mesh_get(id): the mesh's arrays (mesh.points, mesh.velocities, mesh.indices; gradients of points "
                "read through it reach Mesh.points.grad) and counts (num_points, num_tris)")
add_builtin("mesh_get_bvh", (U64,), T.uint64, "lw::mesh_get_bvh", differentiable=False, **_G,
            doc="mesh_get_bvh(id): the id of the mesh's tree over its faces' boxes")
add_builtin("mesh_get_group_root", (U64, I32), T.int32, "lw::mesh_get_group_root", differentiable=False, **_G,
            doc="mesh_get_group_root(id, group): the root of a group's subtree for mesh_query_ray (-1: none)")
