"""loomwork.geometry: geometry types of the kernel layer, added through its extension registry (native
headers, value types, handle types and builtins registered from this package's own files)."""

from .bvh import Bvh, BvhConstructor, bvh_query_t
from .common import GeometryError
from .hash_grid import HashGrid, hash_grid_query_t
from .mesh import Mesh, mesh_query_aabb_t, mesh_query_point_t, mesh_query_ray_t

__all__ = ["Bvh", "BvhConstructor", "GeometryError", "HashGrid", "Mesh", "bvh_query_t", "hash_grid_query_t",
           "mesh_query_aabb_t", "mesh_query_point_t", "mesh_query_ray_t"]
