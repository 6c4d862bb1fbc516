"""Meshes in and out of trimesh, USD and PyVista (geometry/io.py), checked against the other library's view."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.geometry import GeometryError, io

trimesh = pytest.importorskip("trimesh", reason="trimesh is not installed (pip install trimesh)")


def _torus() -> "trimesh.Trimesh":
    return trimesh.creation.torus(1.0, 0.3, major_sections=24, minor_sections=12)


def test_trimesh_round_trip_keeps_points_faces_and_volume():
    """A trimesh becomes a wp.Mesh with the same points and triangles, and comes back with the same volume."""
    tm = _torus()
    mesh = io.mesh_from_trimesh(tm)
    np.testing.assert_allclose(mesh.points.numpy(), tm.vertices, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(mesh.indices.numpy().reshape(-1, 3), tm.faces)
    back = io.mesh_to_trimesh(mesh)
    assert back.is_watertight and back.volume == pytest.approx(tm.volume, rel=1e-5)


def test_trimesh_scene_is_flattened_and_mesh_options_pass_through():
    """A Scene of two placed boxes becomes one mesh in world space; Mesh options reach wp.Mesh."""
    scene = trimesh.Scene()
    scene.add_geometry(trimesh.creation.box((1, 1, 1)), transform=trimesh.transformations.translation_matrix((5, 0, 0)))
    scene.add_geometry(trimesh.creation.box((1, 1, 1)))
    mesh = io.mesh_from_trimesh(scene, support_winding_number=True)
    assert mesh.indices.shape[0] == 2 * 12 * 3
    assert mesh.points.numpy()[:, 0].max() == pytest.approx(5.5)
    assert mesh.support_winding_number


def test_trimesh_without_faces_and_wrong_types_are_refused():
    """An empty trimesh is a GeometryError; something that is not a mesh is a TypeError."""
    with pytest.raises(GeometryError, match="no faces"):
        io.mesh_from_trimesh(trimesh.Trimesh())
    with pytest.raises(TypeError, match="trimesh.Trimesh"):
        io.mesh_from_trimesh(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="wp.Mesh"):
        io.mesh_to_trimesh(_torus())


def test_fans_of_polygons():
    """A quad and a pentagon are split into fans from their first vertex, in order."""
    tris = io.triangulate([4, 5], [0, 1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(tris, [[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7], [4, 7, 8]])
    with pytest.raises(GeometryError, match="face 1 has 2 vertices"):
        io.triangulate([3, 2], [0, 1, 2, 3, 4])
    with pytest.raises(GeometryError, match="add up to 6"):
        io.triangulate([3, 3], [0, 1, 2])


@pytest.fixture
def pxr():
    return pytest.importorskip("pxr", reason="usd-core is not installed (pip install usd-core)")


def test_usd_file_round_trip(pxr, tmp_path):
    """A mesh written to a .usda file reads back with the same points and triangles, an extent that bounds
    it, and a default prim."""
    from pxr import Usd, UsdGeom

    mesh = io.mesh_from_trimesh(_torus())
    path = tmp_path / "torus.usda"
    io.mesh_to_usd(mesh, path, "/World/torus")
    stage = Usd.Stage.Open(str(path))
    assert stage.GetDefaultPrim().GetPath() == "/World" and UsdGeom.GetStageUpAxis(stage) == "Y"
    extent = np.array(UsdGeom.Mesh(stage.GetPrimAtPath("/World/torus")).GetExtentAttr().Get())
    np.testing.assert_allclose(extent, [[-1.3, -1.3, -0.3], [1.3, 1.3, 0.3]], atol=1e-5)
    back = io.load_mesh(path)
    np.testing.assert_array_equal(back.points.numpy(), mesh.points.numpy())
    np.testing.assert_array_equal(back.indices.numpy(), mesh.indices.numpy())


def test_usd_polygons_transforms_and_handedness(pxr):
    """Quads are triangulated, the parent transform is applied, and a left-handed mesh is rewound so its
    triangles face the same way as the right-handed original."""
    from pxr import Gf, Usd, UsdGeom

    stage = Usd.Stage.CreateInMemory()
    xf = UsdGeom.Xform.Define(stage, "/Root")
    xf.AddTranslateOp().Set(Gf.Vec3d(10, 0, 0))
    xf.AddScaleOp().Set(Gf.Vec3f(2, 2, 2))
    quad = UsdGeom.Mesh.Define(stage, "/Root/quad")
    quad.CreatePointsAttr([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0)])
    quad.CreateFaceVertexCountsAttr([4])
    quad.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
    mesh = io.mesh_from_usd(stage, "/Root/quad")
    np.testing.assert_allclose(mesh.points.numpy(), [[10, 0, 0], [12, 0, 0], [12, 2, 0], [10, 2, 0]])
    np.testing.assert_array_equal(mesh.indices.numpy(), [0, 1, 2, 0, 2, 3])
    quad.CreateOrientationAttr(UsdGeom.Tokens.leftHanded)
    np.testing.assert_array_equal(io.mesh_from_usd(stage, "/Root/quad").indices.numpy(), [0, 2, 1, 0, 3, 2])


def test_usd_time_samples(pxr):
    """Writing at two times animates the points; reading at a time gives that frame."""
    mesh = io.mesh_from_trimesh(_torus())
    stage = io.mesh_to_usd(mesh, pxr.Usd.Stage.CreateInMemory(), "/m", time=0.0)
    mesh.points = wp.array(mesh.points.numpy() + np.float32(1.0), dtype=wp.vec3)
    io.mesh_to_usd(mesh, stage, "/m", time=1.0)
    p0 = io.mesh_from_usd(stage, time=0.0).points.numpy()
    p1 = io.mesh_from_usd(stage, time=1.0).points.numpy()
    np.testing.assert_allclose(p1 - p0, 1.0, atol=1e-6)


def test_usd_bad_input(pxr, tmp_path):
    """A missing file, a stage without meshes, a wrong prim path and a prim of another type are named."""
    from pxr import Usd, UsdGeom

    with pytest.raises(FileNotFoundError, match="nothing.usda"):
        io.mesh_from_usd(tmp_path / "nothing.usda")
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/X")
    with pytest.raises(GeometryError, match="no UsdGeom.Mesh"):
        io.mesh_from_usd(stage)
    with pytest.raises(GeometryError, match="no prim at /Y"):
        io.mesh_from_usd(stage, "/Y")
    with pytest.raises(GeometryError, match="/X is a Xform, not a Mesh"):
        io.mesh_from_usd(stage, "/X")


def test_load_mesh_reads_other_formats_through_trimesh(tmp_path):
    """An OBJ file written by trimesh loads as a wp.Mesh of the same volume."""
    tm = _torus()
    path = tmp_path / "torus.obj"
    tm.export(path)
    back = io.mesh_to_trimesh(io.load_mesh(path))
    assert back.volume == pytest.approx(tm.volume, rel=1e-4)
    with pytest.raises(FileNotFoundError):
        io.load_mesh(tmp_path / "missing.obj")


def test_pyvista_polydata():
    """mesh_to_pyvista gives PolyData with the mesh's points and one triangle cell per face."""
    pv = pytest.importorskip("pyvista", reason="pyvista is not installed (pip install pyvista)")
    mesh = io.mesh_from_trimesh(_torus())
    poly = io.mesh_to_pyvista(mesh)
    assert isinstance(poly, pv.PolyData) and poly.n_cells == mesh.indices.shape[0] // 3
    np.testing.assert_array_equal(poly.points, mesh.points.numpy())
    np.testing.assert_array_equal(poly.faces.reshape(-1, 4)[:, 1:], mesh.indices.numpy().reshape(-1, 3))


def test_a_missing_package_says_what_to_install(monkeypatch):
    """Without the optional package, the error names the function and the pip command."""
    import importlib

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "pyvista":
            raise ImportError("no pyvista")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(ImportError, match="mesh_to_pyvista needs pyvista: pip install pyvista"):
        io.mesh_to_pyvista(io.mesh_from_trimesh(_torus()))
