"""loomwork.geometry: geometry types of the kernel layer, added through its extension registry (native
headers, value types, handle types and builtins registered from this package's own files)."""

from . import (  # noqa: F401 - register closest_point_edge_edge / intersect_tri_tri, the block queries and names
    param_names,
    primitives,
    tile_queries,
)
from .bvh import Bvh, BvhConstructor, bvh_query_t
from .common import GeometryError
from .hash_grid import HashGrid, hash_grid_query_t
from .io import load_mesh, mesh_from_trimesh, mesh_from_usd, mesh_to_pyvista, mesh_to_trimesh, mesh_to_usd
from .marching_cubes import IsoSurfaceMarchingCubes
from .mesh import Mesh, mesh_query_aabb_t, mesh_query_point_t, mesh_query_ray_t
from .volume import Volume

__all__ = ["Bvh", "BvhConstructor", "GeometryError", "HashGrid", "IsoSurfaceMarchingCubes", "Mesh", "bvh_query_t",
           "hash_grid_query_t", "load_mesh", "mesh_from_trimesh", "mesh_from_usd", "mesh_query_aabb_t",
           "mesh_query_point_t", "mesh_query_ray_t", "mesh_to_pyvista", "mesh_to_trimesh", "mesh_to_usd", "Volume"]
