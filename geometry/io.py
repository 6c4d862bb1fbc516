"""Meshes in and out of the ecosystem: trimesh, USD (usd-core) and PyVista, each imported only when used.

    mesh = load_mesh("bunny.obj")                  # any format trimesh reads; .usd/.usda/.usdc/.usdz through USD
    tm = mesh_to_trimesh(mesh)                     # trimesh.Trimesh sharing nothing with the Mesh
    mesh_to_usd(mesh, "out.usda", "/World/bunny")  # a UsdGeom.Mesh (time samples with time=)
    mesh_to_pyvista(mesh).plot()                   # pyvista.PolyData for viewing

Polygons read from USD are split into triangle fans; a left-handed USD mesh has its winding flipped, and
the prim's local-to-world transform is applied, so every Mesh is right-handed in world space.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.array import array

from .common import GeometryError
from .mesh import Mesh

USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


def require(module: str, install: str, purpose: str) -> Any:
    """Import an optional package, or raise an ImportError saying what needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{purpose} needs {install.split()[-1]}: pip install {install}") from None


def _usd() -> tuple[Any, Any, Any, Any]:
    require("pxr", "usd-core", "reading and writing USD")
    from pxr import Gf, Usd, UsdGeom, Vt

    return Gf, Usd, UsdGeom, Vt


def triangulate(counts: Any, indices: Any, what: str = "mesh") -> np.ndarray:
    """Triangle fans of polygons given as per-face vertex counts and flat vertex indices: an (n, 3) int32
    array, the faces in order (a quad (a, b, c, d) gives (a, b, c) and (a, c, d))."""
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    if counts.size and counts.min() < 3:
        f = int(np.argmax(counts < 3))
        raise GeometryError(f"{what}: face {f} has {counts[f]} vertices; faces need at least 3")
    if counts.sum() != indices.size:
        raise GeometryError(f"{what}: the face vertex counts add up to {counts.sum()}, but there are "
                            f"{indices.size} face vertex indices")
    starts = np.cumsum(counts) - counts
    ntri = counts - 2
    first = np.cumsum(ntri) - ntri
    face = np.repeat(np.arange(counts.size), ntri)
    k = np.arange(int(ntri.sum())) - np.repeat(first, ntri)  # the triangle's number within its face
    s = starts[face]
    return np.stack([indices[s], indices[s + k + 1], indices[s + k + 2]], axis=1).astype(np.int32)


def _host(mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"expected a wp.Mesh, got {type(mesh).__name__}")
    return mesh.points.numpy().astype(np.float32), mesh.indices.numpy().reshape(-1, 3)


def mesh_from_trimesh(tm: Any, **mesh_options: Any) -> Mesh:
    """A wp.Mesh of a `trimesh.Trimesh` (a `trimesh.Scene` is flattened into one mesh in world space);
    `mesh_options` go to wp.Mesh (device=, support_winding_number=, bvh_constructor=, ...)."""
    trimesh = require("trimesh", "trimesh", "mesh_from_trimesh")
    device = mesh_options.pop("device", None)
    if isinstance(tm, trimesh.Scene):
        tm = tm.to_geometry() if hasattr(tm, "to_geometry") else tm.dump(concatenate=True)
    if not isinstance(tm, trimesh.Trimesh):
        raise TypeError(f"mesh_from_trimesh takes a trimesh.Trimesh or Scene, got {type(tm).__name__}")
    if len(tm.faces) == 0:
        raise GeometryError("mesh_from_trimesh: the trimesh has no faces")
    return _make_mesh(np.asarray(tm.vertices), np.asarray(tm.faces), device, mesh_options)


def _make_mesh(points: np.ndarray, tris: np.ndarray, device: Any, options: dict) -> Mesh:
    pts = array(np.ascontiguousarray(points, dtype=np.float32), dtype=T.vec3f, device=device)
    idx = array(np.ascontiguousarray(tris, dtype=np.int32).reshape(-1), dtype=T.int32, device=device)
    return Mesh(pts, idx, **options)


def mesh_to_trimesh(mesh: Mesh) -> Any:
    """A `trimesh.Trimesh` copy of a wp.Mesh's points and triangles (not processed: vertices stay as they are)."""
    trimesh = require("trimesh", "trimesh", "mesh_to_trimesh")
    points, tris = _host(mesh)
    return trimesh.Trimesh(vertices=points, faces=tris, process=False)


def mesh_to_pyvista(mesh: Mesh) -> Any:
    """A `pyvista.PolyData` copy of a wp.Mesh, for viewing and VTK filters."""
    pv = require("pyvista", "pyvista", "mesh_to_pyvista")
    points, tris = _host(mesh)
    faces = np.hstack([np.full((len(tris), 1), 3, np.int64), tris.astype(np.int64)]).reshape(-1)
    return pv.PolyData(points, faces)


def _stage(source: Any, create: bool) -> tuple[Any, Path | None]:
    """A USD stage for `source` (a Usd.Stage, or a file path to open, or to write when `create`)."""
    _, Usd, _, _ = _usd()
    if isinstance(source, Usd.Stage):
        return source, None
    path = Path(source)
    if create:
        return Usd.Stage.CreateInMemory(), path
    if not path.exists():
        raise FileNotFoundError(f"no USD file at {path}")
    stage = Usd.Stage.Open(str(path))
    if stage is None:
        raise GeometryError(f"USD could not open {path}")
    return stage, path


def mesh_from_usd(source: Any, prim_path: str | None = None, *, time: float | None = None,
                  **mesh_options: Any) -> Mesh:
    """A wp.Mesh of a UsdGeom.Mesh prim (the first mesh on the stage when `prim_path` is None) at USD
    time code `time` (default: the default time), in world space, polygons split into triangles.
    `source` is a file path or a Usd.Stage; `mesh_options` go to wp.Mesh."""
    _, Usd, UsdGeom, _ = _usd()
    stage, path = _stage(source, create=False)
    where = path or "the stage"
    if prim_path is None:
        prim = next((p for p in stage.Traverse() if p.IsA(UsdGeom.Mesh)), None)
        if prim is None:
            raise GeometryError(f"mesh_from_usd: {where} has no UsdGeom.Mesh prim")
    else:
        prim = stage.GetPrimAtPath(prim_path)
        if not prim.IsValid():
            raise GeometryError(f"mesh_from_usd: {where} has no prim at {prim_path}")
        if not prim.IsA(UsdGeom.Mesh):
            raise GeometryError(f"mesh_from_usd: {prim_path} is a {prim.GetTypeName()}, not a Mesh")
    code = Usd.TimeCode.Default() if time is None else Usd.TimeCode(time)
    geom = UsdGeom.Mesh(prim)
    points = np.asarray(geom.GetPointsAttr().Get(code), dtype=np.float64).reshape(-1, 3)
    counts = geom.GetFaceVertexCountsAttr().Get(code)
    indices = geom.GetFaceVertexIndicesAttr().Get(code)
    if points.size == 0 or counts is None or len(counts) == 0:
        raise GeometryError(f"mesh_from_usd: {prim.GetPath()} has no points or faces at time {code}")
    tris = triangulate(counts, indices, f"USD mesh {prim.GetPath()}")
    if geom.GetOrientationAttr().Get(code) == UsdGeom.Tokens.leftHanded:
        tris = tris[:, [0, 2, 1]]
    world = np.asarray(UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(code), dtype=np.float64)
    points = points @ world[:3, :3] + world[3, :3]  # USD matrices act on row vectors
    device = mesh_options.pop("device", None)
    return _make_mesh(points, tris, device, mesh_options)


def mesh_to_usd(mesh: Mesh, dest: Any, prim_path: str = "/Mesh", *, time: float | None = None,
                up_axis: str = "Y") -> Any:
    """Write a wp.Mesh as a UsdGeom.Mesh at `prim_path` (points, triangles, extent, velocities if it has them;
    time samples at `time` when given, so calling it per frame animates the prim). `dest` is a Usd.Stage
    (edited, not saved) or a file path (written, replacing the file). Returns the stage."""
    Gf, Usd, UsdGeom, Vt = _usd()
    points, tris = _host(mesh)
    stage, path = _stage(dest, create=True)
    if path is not None:
        UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y if up_axis.upper() == "Y" else UsdGeom.Tokens.z)
    geom = UsdGeom.Mesh.Define(stage, prim_path)
    if path is not None and not stage.GetDefaultPrim():
        root = stage.GetPrimAtPath("/" + prim_path.strip("/").split("/")[0])
        stage.SetDefaultPrim(root)
    code = Usd.TimeCode.Default() if time is None else Usd.TimeCode(time)
    geom.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    geom.CreatePointsAttr().Set(Vt.Vec3fArray.FromNumpy(points), code)
    geom.CreateFaceVertexCountsAttr().Set(Vt.IntArray.FromNumpy(np.full(len(tris), 3, np.int32)), code)
    geom.CreateFaceVertexIndicesAttr().Set(Vt.IntArray.FromNumpy(tris.reshape(-1).astype(np.int32)), code)
    lo, hi = points.min(axis=0), points.max(axis=0)
    geom.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]), code)
    if mesh.velocities is not None:
        vel = mesh.velocities.numpy().astype(np.float32)
        geom.CreateVelocitiesAttr().Set(Vt.Vec3fArray.FromNumpy(vel), code)
    if path is not None:
        stage.GetRootLayer().Export(str(path))
    return stage


def load_mesh(path: Any, **mesh_options: Any) -> Mesh:
    """A wp.Mesh from a file: USD files (.usd, .usda, .usdc, .usdz) through usd-core, everything else
    (OBJ, STL, PLY, GLB, OFF, ...) through trimesh. `mesh_options` go to wp.Mesh."""
    path = Path(path)
    if path.suffix.lower() in USD_SUFFIXES:
        return mesh_from_usd(path, **mesh_options)
    trimesh = require("trimesh", "trimesh", f"loading {path.suffix or 'mesh'} files")
    if not path.exists():
        raise FileNotFoundError(f"no mesh file at {path}")
    return mesh_from_trimesh(trimesh.load(str(path)), **mesh_options)
