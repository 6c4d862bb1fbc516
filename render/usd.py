"""`UsdRenderer`: writes what a program draws into a USD stage, one time sample per frame (Warp's
`warp.render.UsdRenderer` API). Needs usd-core (`pip install usd-core`), imported on first use."""

from __future__ import annotations

from typing import Any

import numpy as np

from loomwork.kernels.logger import get_logger, log_info

from .common import (
    AXES,
    as_numpy,
    axis_index,
    line_segments,
    points_or_raise,
    quat_rotate,
    rotation_between,
    segment_rotation,
    vec_or_raise,
)

# unit ground corners per up axis, in the order Warp writes them (so stages compare point for point),
# drawn as the face [0, 2, 3, 1], counter-clockwise seen from above
_GROUND_CORNERS = {
    "X": np.array([(0.0, 1.0, -1.0), (0.0, -1.0, -1.0), (0.0, 1.0, 1.0), (0.0, -1.0, 1.0)]),
    "Y": np.array([(-1.0, 0.0, -1.0), (1.0, 0.0, -1.0), (-1.0, 0.0, 1.0), (1.0, 0.0, 1.0)]),
    "Z": np.array([(-1.0, 1.0, 0.0), (1.0, 1.0, 0.0), (-1.0, -1.0, 0.0), (1.0, -1.0, 0.0)]),
}


def _pxr() -> Any:
    """The pxr modules, or an ImportError saying how to install them."""
    try:
        from pxr import Gf, Sdf, Usd, UsdGeom, UsdLux, Vt
    except ImportError as e:
        raise ImportError("loomwork.render.UsdRenderer needs the USD Python bindings: pip install usd-core "
                          "(or ImageRenderer, which writes PNG frames and needs only pillow)") from e
    return Gf, Sdf, Usd, UsdGeom, UsdLux, Vt


def _extent(lower: np.ndarray, upper: np.ndarray) -> list:
    """A USD extent value [(lower), (upper)]."""
    Gf = _pxr()[0]
    return [Gf.Vec3f(*map(float, lower)), Gf.Vec3f(*map(float, upper))]


class UsdRenderer:
    """Records shapes, meshes, points and lines into a USD stage under `/root`, at time code
    `round(time * fps)` of the current `begin_frame(time)`.

    Args:
        stage: a file path (a new stage is created there) or an open `Usd.Stage`.
        up_axis: the stage's up axis, "X", "Y" or "Z".
        fps: frames per second of the stage's time codes.
        scaling: a uniform scale applied to everything (a scale op on `/root`).
    """

    def __init__(self, stage: Any, up_axis: str = "Y", fps: int = 60, scaling: float = 1.0) -> None:
        Gf, Sdf, Usd, UsdGeom, UsdLux, _ = _pxr()
        if isinstance(stage, str):
            stage = Usd.Stage.CreateNew(stage)
        elif not isinstance(stage, Usd.Stage):
            raise TypeError(f"UsdRenderer: stage must be a file path or a Usd.Stage, got {type(stage).__name__}")
        if not fps > 0:
            raise ValueError(f"UsdRenderer: fps must be positive, got {fps}")
        self.stage = stage
        self.up_axis = AXES[axis_index(up_axis, "UsdRenderer")]
        self.fps = float(fps)
        self.scaling = float(scaling)
        self.time = 0.0
        self.root = UsdGeom.Xform.Define(stage, "/root")
        self.root.ClearXformOpOrder()
        self.root.AddScaleOp().Set(Gf.Vec3d(self.scaling, self.scaling, self.scaling), 0.0)
        stage.SetDefaultPrim(self.root.GetPrim())
        stage.SetStartTimeCode(0.0)
        stage.SetEndTimeCode(0.0)
        stage.SetFramesPerSecond(self.fps)
        stage.SetTimeCodesPerSecond(self.fps)
        UsdGeom.SetStageUpAxis(stage, getattr(UsdGeom.Tokens, self.up_axis.lower()))
        # soft sky light plus a sun, so the stage looks lit when opened in a viewer
        dome = UsdLux.DomeLight.Define(stage, "/dome_light")
        dome.GetIntensityAttr().Set(1000.0)
        sun = UsdLux.DistantLight.Define(stage, "/distant_light")
        sun.AddRotateXYZOp().Set(Gf.Vec3f(-40.0, 30.0, 0.0))
        sun.GetIntensityAttr().Set(3000.0)
        self._bodies: set[str] = set()

    # -- frames --------------------------------------------------------------------------------------
    def begin_frame(self, time: float) -> None:
        """Write the following calls at time code round(time * fps)."""
        self.time = float(round(float(time) * self.fps))
        if self.time > self.stage.GetEndTimeCode():
            self.stage.SetEndTimeCode(self.time)
        if self.time < self.stage.GetStartTimeCode():
            self.stage.SetStartTimeCode(self.time)

    def end_frame(self) -> None:
        """End the frame (USD needs nothing more; kept so renderers are interchangeable)."""

    def save(self) -> bool:
        """Write the stage to its file; False (with the error logged) if that fails."""
        try:
            self.stage.Save()
        except Exception as e:  # pxr raises its own Tf.ErrorException
            get_logger().error(f"UsdRenderer: could not save the stage: {e}")
            return False
        log_info(f"UsdRenderer: saved {self.stage.GetRootLayer().realPath}")
        return True

    # -- prims and transforms ------------------------------------------------------------------------
    def register_body(self, body_name: str) -> None:
        """Create the transform `/root/<body_name>` that shapes drawn with `parent_body=body_name` sit under."""
        UsdGeom = _pxr()[3]
        self._add_xform_ops(UsdGeom.Xform.Define(self.stage, self.root.GetPath().AppendChild(body_name)))
        self._bodies.add(body_name)

    def _path(self, name: str, parent_body: str | None = None, is_template: bool = False) -> Any:
        root = self.root.GetPath()
        if is_template:
            return root.AppendChild("_template_shapes").AppendChild(name)
        if parent_body is not None:
            if parent_body not in self._bodies:
                raise ValueError(f"UsdRenderer: parent_body {parent_body!r} was not registered (register_body)")
            root = root.AppendChild(parent_body)
        return root.AppendChild(name)

    @staticmethod
    def _add_xform_ops(xformable: Any) -> None:
        """Give the prim translate, orient and scale ops, in that order."""
        UsdGeom = _pxr()[3]
        xf = UsdGeom.Xformable(xformable)
        xf.ClearXformOpOrder()
        xf.AddTranslateOp()
        xf.AddOrientOp()
        xf.AddScaleOp()

    def _set_xform(self, prim: Any, pos: Any = None, rot: Any = None, scale: Any = None, time: Any = None) -> None:
        """Set the prim's translate / orient (x, y, z, w) / scale at `time` (default: this frame)."""
        Gf, UsdGeom = _pxr()[0], _pxr()[3]
        ops = UsdGeom.Xformable(prim).GetOrderedXformOps()
        time = self.time if time is None else time
        if pos is not None:
            ops[0].Set(Gf.Vec3d(*vec_or_raise(pos, 3, "pos")), time)
        if rot is not None:
            x, y, z, w = vec_or_raise(rot, 4, "rot (a quaternion x, y, z, w)")
            ops[1].Set(Gf.Quatf(float(w), float(x), float(y), float(z)), time)
        if scale is not None:
            ops[2].Set(Gf.Vec3f(*vec_or_raise(scale, 3, "scale")), time)

    def _gprim(self, schema: Any, name: str, parent_body: str | None, is_template: bool, child: str) -> tuple:
        """Get or define the prim a shape call writes: (the path returned to the caller, the geometry prim,
        whether it was just created). A template is an instanceable class prim holding the geometry."""
        UsdGeom, Sdf = _pxr()[3], _pxr()[1]
        prim_path = self._path(name, parent_body, is_template)
        geom_path = prim_path
        if is_template:
            scope = UsdGeom.Scope.Define(self.stage, prim_path).GetPrim()
            scope.SetInstanceable(True)
            scope.SetSpecifier(Sdf.SpecifierClass)
            geom_path = prim_path.AppendChild(child)
        geom = schema.Get(self.stage, geom_path)
        created = not geom
        if created:
            geom = schema.Define(self.stage, geom_path)
            self._add_xform_ops(geom)
        return prim_path, geom, created

    def _finish(self, geom: Any, pos: Any, rot: Any, scale: Any, is_template: bool, color: Any,
                visible: bool) -> None:
        """The steps every shape call ends with: transform, colour and visibility at this frame."""
        Gf = _pxr()[0]
        if not is_template:
            self._set_xform(geom, pos, rot, scale)
        if color is not None:
            geom.GetDisplayColorAttr().Set([Gf.Vec3f(*vec_or_raise(color, 3, "color"))], self.time)
        geom.GetVisibilityAttr().Set("inherited" if visible else "invisible", self.time)

    # -- analytic shapes -----------------------------------------------------------------------------
    def render_sphere(self, name: str, pos: tuple, rot: tuple, radius: float, parent_body: str | None = None,
                      is_template: bool = False, color: tuple | None = None, visible: bool = True) -> Any:
        """A sphere of `radius` at `pos`; returns its prim path."""
        path, geom, _ = self._gprim(_pxr()[3].Sphere, name, parent_body, is_template, "sphere")
        geom.GetRadiusAttr().Set(float(radius), self.time)
        r = float(radius)
        geom.GetExtentAttr().Set(_extent((-r, -r, -r), (r, r, r)), self.time)
        self._finish(geom, pos, rot, (1.0, 1.0, 1.0), is_template, color, visible)
        return path

    def _axial(self, schema: Any, child: str, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
               parent_body: str | None, is_template: bool, up_axis: int, color: Any, visible: bool) -> Any:
        """Capsules, cylinders and cones: `radius`, total height 2 * `half_height` along local `up_axis`."""
        path, geom, _ = self._gprim(schema, name, parent_body, is_template, child)
        axis = AXES[axis_index(up_axis, f"render_{child}")]
        geom.GetRadiusAttr().Set(float(radius), self.time)
        geom.GetHeightAttr().Set(float(2.0 * half_height), self.time)
        geom.GetAxisAttr().Set(axis)
        half = np.full(3, float(radius))
        half[AXES.index(axis)] = half_height + (radius if child == "capsule" else 0.0)
        geom.GetExtentAttr().Set(_extent(-half, half), self.time)
        self._finish(geom, pos, rot, (1.0, 1.0, 1.0), is_template, color, visible)
        return path

    def render_capsule(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                       parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                       color: tuple | None = None, visible: bool = True) -> Any:
        """A capsule: a cylinder of 2 * `half_height` along local `up_axis` with hemispherical ends."""
        return self._axial(_pxr()[3].Capsule, "capsule", name, pos, rot, radius, half_height, parent_body,
                           is_template, up_axis, color, visible)

    def render_cylinder(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                        parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                        color: tuple | None = None, visible: bool = True) -> Any:
        """A closed cylinder of height 2 * `half_height` along local `up_axis`."""
        return self._axial(_pxr()[3].Cylinder, "cylinder", name, pos, rot, radius, half_height, parent_body,
                           is_template, up_axis, color, visible)

    def render_cone(self, name: str, pos: tuple, rot: tuple, radius: float, half_height: float,
                    parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                    color: tuple | None = None, visible: bool = True) -> Any:
        """A cone of height 2 * `half_height` along local `up_axis`, its base at -half_height."""
        return self._axial(_pxr()[3].Cone, "cone", name, pos, rot, radius, half_height, parent_body,
                           is_template, up_axis, color, visible)

    def render_box(self, name: str, pos: tuple, rot: tuple, extents: tuple, parent_body: str | None = None,
                   is_template: bool = False, color: tuple | None = None, visible: bool = True) -> Any:
        """A box with half-extents `extents` (a USD Cube of size 2 scaled by them)."""
        path, geom, _ = self._gprim(_pxr()[3].Cube, name, parent_body, is_template, "cube")
        geom.GetSizeAttr().Set(2.0)
        geom.GetExtentAttr().Set(_extent((-1, -1, -1), (1, 1, 1)))
        self._finish(geom, pos, rot, vec_or_raise(extents, 3, "render_box extents"), is_template, color, visible)
        if is_template:
            self._set_xform(geom, None, None, extents, 0.0)
        return path

    def render_plane(self, name: str, pos: tuple, rot: tuple, width: float, length: float,
                     color: tuple = (1.0, 1.0, 1.0), color2: Any = None, parent_body: str | None = None,
                     is_template: bool = False, u_scaling: float = 1.0, v_scaling: float = 1.0,
                     visible: bool = True) -> Any:
        """A double-sided quad of half-sizes `width` (x) and `length` (z) in its local XZ plane
        (100 where a size is not positive); `color2`, `u_scaling`, `v_scaling` shade a checker
        pattern in OpenGLRenderer and are not recorded in USD."""
        path, geom, created = self._gprim(_pxr()[3].Mesh, name, parent_body, is_template, "plane")
        if created:
            w = width if width > 0 else 100.0
            h = length if length > 0 else 100.0
            self._write_quad(geom, np.array([(-w, 0, -h), (w, 0, -h), (w, 0, h), (-w, 0, h)]), (0.0, 1.0, 0.0),
                             (0, 1, 2, 3))
        self._finish(geom, pos, rot, (1.0, 1.0, 1.0), is_template, color, visible)
        return path

    def _write_quad(self, mesh: Any, corners: np.ndarray, normal: tuple, face: tuple = (0, 2, 3, 1)) -> None:
        mesh.CreateDoubleSidedAttr().Set(True)
        mesh.GetPointsAttr().Set(corners.astype(np.float32))
        mesh.GetNormalsAttr().Set(np.tile(np.asarray(normal, dtype=np.float32), (4, 1)))
        mesh.GetFaceVertexCountsAttr().Set([4])
        mesh.GetFaceVertexIndicesAttr().Set(list(face))
        mesh.GetExtentAttr().Set(_extent(corners.min(axis=0), corners.max(axis=0)))

    def render_ground(self, size: float = 100.0, plane: Any = None) -> Any:
        """A square ground of half-size `size` through the origin, normal to the stage's up axis, or
        on the plane (nx, ny, nz, d) with points x where n . x = d (the square turned onto it)."""
        UsdGeom = _pxr()[3]
        up = np.zeros(3)
        up[AXES.index(self.up_axis)] = 1.0
        corners = size * _GROUND_CORNERS[self.up_axis]
        normal = up
        if plane is not None:
            p = vec_or_raise(plane, 4, "render_ground plane (nx, ny, nz, d)")
            norm = np.linalg.norm(p[:3])
            if norm == 0:
                raise ValueError("render_ground: the plane's normal is zero")
            normal = p[:3] / norm
            corners = quat_rotate(rotation_between(up, normal)[0], corners) + normal * (p[3] / norm)
        mesh = UsdGeom.Mesh.Define(self.stage, self.root.GetPath().AppendChild("ground"))
        self._write_quad(mesh, corners, tuple(normal))
        return mesh.GetPath()

    def render_arrow(self, name: str, pos: tuple, rot: tuple, base_radius: float, base_height: float,
                     cap_radius: float | None = None, cap_height: float | None = None,
                     parent_body: str | None = None, is_template: bool = False, up_axis: int = 1,
                     color: tuple | None = None, visible: bool = True) -> Any:
        """An arrow along local `up_axis` from `pos`: a cylinder shaft of `base_height` and a cone head
        (`cap_radius` defaults to 1.8 * base_radius, `cap_height` to 0.18 * base_height)."""
        UsdGeom = _pxr()[3]
        cap_radius = 1.8 * base_radius if cap_radius is None else cap_radius
        cap_height = 0.18 * base_height if cap_height is None else cap_height
        axis = axis_index(up_axis, "render_arrow")
        path, arrow, _ = self._gprim(UsdGeom.Xform, name, parent_body, is_template, "arrow")
        offset = np.zeros(3)
        for part, schema, radius, height, start in (("base", UsdGeom.Cylinder, base_radius, base_height, 0.0),
                                                    ("cap", UsdGeom.Cone, cap_radius, cap_height, base_height)):
            geom = schema.Get(self.stage, arrow.GetPath().AppendChild(part))
            if not geom:
                geom = schema.Define(self.stage, arrow.GetPath().AppendChild(part))
                self._add_xform_ops(geom)
            geom.GetRadiusAttr().Set(float(radius), self.time)
            geom.GetHeightAttr().Set(float(height), self.time)
            geom.GetAxisAttr().Set(AXES[axis])
            offset[axis] = start + 0.5 * height
            self._set_xform(geom, offset, (0.0, 0.0, 0.0, 1.0), (1.0, 1.0, 1.0))
            if color is not None:
                self._finish(geom, None, None, None, True, color, True)
        self._finish(arrow, pos, rot, (1.0, 1.0, 1.0), is_template, None, visible)
        return path

    def render_ref(self, name: str, path: str, pos: tuple, rot: tuple, scale: tuple,
                   color: tuple | None = None) -> None:
        """Place a reference to the USD asset at `path` under `/root/<name>`, with this frame's transform
        (and `color` as the display colour of its first geometry prims)."""
        Gf, _, Usd, UsdGeom = _pxr()[:4]
        ref = UsdGeom.Xform.Get(self.stage, self._path(name))
        if not ref:
            ref = UsdGeom.Xform.Define(self.stage, self._path(name))
            ref.GetPrim().GetReferences().AddReference(str(path))
            self._add_xform_ops(ref)
        self._set_xform(ref, pos, rot, scale)
        if color is not None:
            prims = iter(Usd.PrimRange(ref.GetPrim()))
            for prim in prims:
                if prim.IsA(UsdGeom.Gprim):
                    UsdGeom.Gprim(prim).GetDisplayColorAttr().Set([Gf.Vec3f(*vec_or_raise(color, 3, "color"))],
                                                                  self.time)
                    prims.PruneChildren()

    # -- meshes, points, lines -----------------------------------------------------------------------
    def render_mesh(self, name: str, points: Any, indices: Any, colors: Any = None, pos: tuple = (0.0, 0.0, 0.0),
                    rot: tuple = (0.0, 0.0, 0.0, 1.0), scale: tuple = (1.0, 1.0, 1.0), update_topology: bool = False,
                    parent_body: str | None = None, is_template: bool = False, smooth_shading: bool = True,
                    visible: bool = True) -> Any:
        """A triangle mesh: `points` (n, 3) written every frame, `indices` (three per triangle) on the
        first call or with `update_topology`, `colors` one RGB or one per point."""
        UsdGeom = _pxr()[3]
        pts = points_or_raise(points, f"render_mesh {name!r} points")
        path, mesh, created = self._gprim(UsdGeom.Mesh, name, parent_body, is_template, "mesh")
        cols = None if colors is None else as_numpy(colors, f"render_mesh {name!r} colors").reshape(-1, 3)
        if created:
            interp = "constant" if cols is None or len(cols) == 1 else "vertex"
            UsdGeom.Primvar(mesh.GetDisplayColorAttr()).SetInterpolation(interp)
        mesh.GetPointsAttr().Set(pts, self.time)
        if len(pts):
            mesh.GetExtentAttr().Set(_extent(pts.min(axis=0), pts.max(axis=0)), self.time)
        if created or update_topology:
            tris = as_numpy(indices, f"render_mesh {name!r} indices", dtype=np.int32).reshape(-1)
            if tris.size % 3:
                raise ValueError(f"render_mesh {name!r}: indices must hold three entries per triangle, got {tris.size}")
            if tris.size and (tris.min() < 0 or tris.max() >= len(pts)):
                raise ValueError(f"render_mesh {name!r}: an index is out of range for {len(pts)} points")
            mesh.GetFaceVertexIndicesAttr().Set(tris, self.time)
            mesh.GetFaceVertexCountsAttr().Set(np.full(tris.size // 3, 3, dtype=np.int32), self.time)
        if cols is not None:
            if len(cols) not in (1, len(pts)):
                raise ValueError(f"render_mesh {name!r}: {len(cols)} colors for {len(pts)} points (give 1 or one each)")
            mesh.GetDisplayColorAttr().Set(cols, self.time)
        mesh.GetSubdivisionSchemeAttr().Set("none")
        self._finish(mesh, pos, rot, scale, is_template, None, visible)
        if is_template:
            self._set_xform(mesh, None, None, scale, 0.0)
        return path

    def render_points(self, name: str, points: Any, radius: Any, colors: Any = None, as_spheres: bool = True,
                      visible: bool = True) -> Any:
        """Points of `radius` (one, or one per point): instanced spheres (a PointInstancer), or with
        `as_spheres=False` a UsdGeom.Points prim with widths 2 * radius. `colors`: one RGB or one per point."""
        UsdGeom, Vt, Sdf = _pxr()[3], _pxr()[5], _pxr()[1]
        pts = points_or_raise(points, f"render_points {name!r} points")
        radii = as_numpy(radius, f"render_points {name!r} radius").reshape(-1)
        if radii.size not in (1, len(pts)):
            raise ValueError(f"render_points {name!r}: {radii.size} radii for {len(pts)} points")
        cols = None if colors is None else as_numpy(colors, f"render_points {name!r} colors").reshape(-1, 3)
        if cols is not None and len(cols) not in (1, len(pts)):
            raise ValueError(f"render_points {name!r}: {len(cols)} colors for {len(pts)} points")
        color_interp = "constant" if cols is None or len(cols) == 1 else "vertex"
        r = np.broadcast_to(radii, (len(pts),))
        if as_spheres:
            prim = UsdGeom.PointInstancer.Get(self.stage, self._path(name))
            if not prim:
                prim = UsdGeom.PointInstancer.Define(self.stage, self._path(name))
                sphere = UsdGeom.Sphere.Define(self.stage, prim.GetPath().AppendChild("sphere"))
                prim.CreatePrototypesRel().SetTargets([sphere.GetPath()])
            prim.GetPositionsAttr().Set(pts, self.time)
            prim.GetScalesAttr().Set(np.repeat(r[:, None], 3, axis=1).astype(np.float32), self.time)
            prim.GetProtoIndicesAttr().Set(Vt.IntArray(len(pts)), self.time)
            if cols is not None:
                primvars = UsdGeom.PrimvarsAPI(prim)
                color = primvars.GetPrimvar("displayColor")
                if not color:
                    color = primvars.CreatePrimvar("displayColor", Sdf.ValueTypeNames.Color3fArray, color_interp)
                color.Set(cols, self.time)
        else:
            prim = UsdGeom.Points.Get(self.stage, self._path(name))
            if not prim:
                prim = UsdGeom.Points.Define(self.stage, self._path(name))
                UsdGeom.Primvar(prim.GetWidthsAttr()).SetInterpolation("constant" if radii.size == 1 else "vertex")
                UsdGeom.Primvar(prim.GetDisplayColorAttr()).SetInterpolation(color_interp)
            prim.GetPointsAttr().Set(pts, self.time)
            prim.GetWidthsAttr().Set((2.0 * radii).astype(np.float32), self.time)
            if cols is not None:
                prim.GetDisplayColorAttr().Set(cols, self.time)
        if len(pts):
            prim.GetExtentAttr().Set(_extent((pts - r[:, None]).min(axis=0), (pts + r[:, None]).max(axis=0)),
                                     self.time)
        prim.GetVisibilityAttr().Set("inherited" if visible else "invisible", self.time)
        return prim.GetPath()

    def _render_lines(self, name: str, starts: np.ndarray, ends: np.ndarray, color: Any, radius: float,
                      visible: bool) -> None:
        """Segments as instanced cylinders of `radius` (a unit-height prototype scaled along its axis)."""
        UsdGeom, Vt = _pxr()[3], _pxr()[5]
        if len(starts) == 0:
            return
        prim = UsdGeom.PointInstancer.Get(self.stage, self._path(name))
        if not prim:
            prim = UsdGeom.PointInstancer.Define(self.stage, self._path(name))
            proto = UsdGeom.Cylinder.Define(self.stage, prim.GetPath().AppendChild("segment"))
            proto.GetHeightAttr().Set(1.0)
            proto.GetAxisAttr().Set("Z")
            prim.CreatePrototypesRel().SetTargets([proto.GetPath()])
        proto = UsdGeom.Cylinder.Get(self.stage, prim.GetPath().AppendChild("segment"))
        proto.GetRadiusAttr().Set(float(radius), self.time)
        delta = ends - starts
        q = segment_rotation(delta)
        scales = np.ones((len(starts), 3), dtype=np.float32)
        scales[:, 2] = np.linalg.norm(delta, axis=1)
        prim.GetPositionsAttr().Set((0.5 * (starts + ends)).astype(np.float32), self.time)
        # Vt keeps a quaternion as (i, j, k, real) in memory: Warp's (x, y, z, w) order
        prim.GetOrientationsAttr().Set(Vt.QuathArray.FromNumpy(q.astype(np.float16)), self.time)
        prim.GetScalesAttr().Set(scales, self.time)
        prim.GetProtoIndicesAttr().Set(Vt.IntArray(len(starts)), self.time)
        lower = np.minimum(starts, ends).min(axis=0) - radius
        upper = np.maximum(starts, ends).max(axis=0) + radius
        prim.GetExtentAttr().Set(_extent(lower, upper), self.time)
        if color is not None:
            self._finish(proto, None, None, None, True, color, True)
        prim.GetVisibilityAttr().Set("inherited" if visible else "invisible", self.time)

    def render_line_list(self, name: str, vertices: Any, indices: Any, color: tuple | None = None,
                         radius: float = 0.01, visible: bool = True) -> None:
        """Segments vertices[indices[2i]] -> vertices[indices[2i + 1]], drawn as cylinders of `radius`."""
        starts, ends = line_segments(vertices, indices, f"render_line_list {name!r}")
        self._render_lines(name, starts, ends, color, radius, visible)

    def render_line_strip(self, name: str, vertices: Any, color: tuple | None = None, radius: float = 0.01,
                          visible: bool = True) -> None:
        """The polyline through `vertices`, drawn as cylinders of `radius`."""
        starts, ends = line_segments(vertices, None, f"render_line_strip {name!r}")
        self._render_lines(name, starts, ends, color, radius, visible)
