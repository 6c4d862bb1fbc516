"""Geometric primitives as kernel builtins: closest points between segments, triangle-triangle tests
(`geometry/native/primitives.h`, registered through the kernel layer's extension registry)."""

from __future__ import annotations

from pathlib import Path

from loomwork.kernels import types as T
from loomwork.kernels.builtins import Exact
from loomwork.kernels.extensions import add_builtin, register_header

HEADER = register_header(Path(__file__).parent / "native" / "primitives.h")

_V3 = Exact(T.vec3f)
add_builtin("closest_point_edge_edge", (_V3, _V3, _V3, _V3, Exact(T.float32)), T.vec3f, "lw::closest_point_edge_edge",
            header=HEADER, group="Geometry", adjoint="lw::adj_closest_point_edge_edge",
            doc="closest_point_edge_edge(p1, q1, p2, q2, epsilon): (s, t, d), the closest points p1 + s (q1 - p1) "
                "and p2 + t (q2 - p2) of two segments and their distance; a segment of squared length <= epsilon "
                "counts as a point. Differentiable: d's gradient is bounded at any angle; s and t have gradients "
                "where they are not clamped (none for parallel segments, where they are not unique)")
for _v in (T.vec3f, T.vec3d):
    add_builtin("intersect_tri_tri", (Exact(_v),) * 6, T.int32, "lw::intersect_tri_tri", header=HEADER,
                group="Geometry", differentiable=False,
                doc="intersect_tri_tri(v0, v1, v2, u0, u1, u2): 1 when the two triangles intersect (touching and "
                    "coplanar overlap count), else 0")
