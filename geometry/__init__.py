"""loomwork.geometry: geometry types of the kernel layer, added through its extension registry (native
headers, value types, handle types and builtins registered from this package's own files)."""

from . import primitives  # noqa: F401 - registers closest_point_edge_edge and intersect_tri_tri
from .hash_grid import HashGrid, hash_grid_query_t
from .marching_cubes import IsoSurfaceMarchingCubes

__all__ = ["HashGrid", "IsoSurfaceMarchingCubes", "hash_grid_query_t"]
