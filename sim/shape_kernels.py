"""Kernel functions on collision shapes: signed distance, normal, probe points and probe edges, in the
shape's frame."""

from __future__ import annotations

import loomwork as wp

from .enums import GeoType

PLANE = wp.constant(int(GeoType.PLANE))
SPHERE = wp.constant(int(GeoType.SPHERE))
CAPSULE = wp.constant(int(GeoType.CAPSULE))
CYLINDER = wp.constant(int(GeoType.CYLINDER))
BOX = wp.constant(int(GeoType.BOX))
MESH = wp.constant(int(GeoType.MESH))
SDF = wp.constant(int(GeoType.SDF))
ELLIPSOID = wp.constant(int(GeoType.ELLIPSOID))
HFIELD = wp.constant(int(GeoType.HFIELD))
CONE = wp.constant(int(GeoType.CONE))


@wp.func
def box_sdf(h: wp.vec3, p: wp.vec3) -> float:
    q = wp.vec3(wp.abs(p[0]) - h[0], wp.abs(p[1]) - h[1], wp.abs(p[2]) - h[2])
    outside = wp.length(wp.vec3(wp.max(q[0], 0.0), wp.max(q[1], 0.0), wp.max(q[2], 0.0)))
    return outside + wp.min(wp.max(q[0], wp.max(q[1], q[2])), 0.0)


@wp.func
def box_normal(h: wp.vec3, p: wp.vec3) -> wp.vec3:
    q = wp.vec3(wp.abs(p[0]) - h[0], wp.abs(p[1]) - h[1], wp.abs(p[2]) - h[2])
    if q[0] > 0.0 or q[1] > 0.0 or q[2] > 0.0:
        c = wp.vec3(wp.clamp(p[0], -h[0], h[0]), wp.clamp(p[1], -h[1], h[1]), wp.clamp(p[2], -h[2], h[2]))
        return wp.normalize(p - c)
    # Inside: the face of least penetration.
    if q[0] >= q[1] and q[0] >= q[2]:
        return wp.vec3(wp.sign(p[0]), 0.0, 0.0)
    if q[1] >= q[2]:
        return wp.vec3(0.0, wp.sign(p[1]), 0.0)
    return wp.vec3(0.0, 0.0, wp.sign(p[2]))


@wp.func
def capsule_axis_point(r: float, hh: float, p: wp.vec3) -> wp.vec3:
    return wp.vec3(0.0, 0.0, wp.clamp(p[2], -hh, hh))


@wp.func
def cylinder_sdf(r: float, hh: float, p: wp.vec3) -> float:
    dx = wp.length(wp.vec2(p[0], p[1])) - r
    dz = wp.abs(p[2]) - hh
    outside = wp.length(wp.vec2(wp.max(dx, 0.0), wp.max(dz, 0.0)))
    return outside + wp.min(wp.max(dx, dz), 0.0)


@wp.func
def cylinder_normal(r: float, hh: float, p: wp.vec3) -> wp.vec3:
    radial = wp.vec2(p[0], p[1])
    rl = wp.length(radial)
    dx = rl - r
    dz = wp.abs(p[2]) - hh
    side = wp.vec3(1.0, 0.0, 0.0)
    if rl > 1.0e-9:
        side = wp.vec3(p[0] / rl, p[1] / rl, 0.0)
    cap = wp.vec3(0.0, 0.0, wp.sign(p[2]))
    if dx > 0.0 and dz > 0.0:
        return wp.normalize(side * dx + cap * dz)
    if dx > dz:
        return side
    return cap


@wp.func
def ellipsoid_distance(r: wp.vec3, p: wp.vec3) -> wp.vec4:
    """An ellipsoid's signed distance at p (a first-order estimate: exact on the surface, on its axes and for
    spheres, a bound elsewhere) and its outward normal, the implicit function's gradient."""
    g = wp.vec3(p[0] / (r[0] * r[0]), p[1] / (r[1] * r[1]), p[2] / (r[2] * r[2]))
    k1 = wp.length(g)
    if k1 < 1.0e-12:
        return wp.vec4(-wp.min(r[0], wp.min(r[1], r[2])), 0.0, 0.0, 1.0)
    k0 = wp.length(wp.vec3(p[0] / r[0], p[1] / r[1], p[2] / r[2]))
    n = g / k1
    return wp.vec4(k0 * (k0 - 1.0) / k1, n[0], n[1], n[2])


@wp.func
def cone_distance(r: float, hh: float, p: wp.vec3) -> wp.vec4:
    """A solid cone's signed distance and outward normal at p: base of radius r at z = -hh, apex at z = +hh.
    Found in the (radial, z) half plane, against the base and the slanted side."""
    rho = wp.length(wp.vec2(p[0], p[1]))
    q = wp.vec2(rho, p[2])
    a = wp.vec2(r, -hh)
    side = wp.vec2(-r, 2.0 * hh)
    t = wp.clamp(wp.dot(q - a, side) / wp.dot(side, side), 0.0, 1.0)
    to_side = q - (a + side * t)
    to_base = q - wp.vec2(wp.clamp(rho, 0.0, r), -hh)
    d_side = wp.length(to_side)
    d_base = wp.length(to_base)
    inside = p[2] >= -hh and p[2] <= hh and rho * 2.0 * hh <= r * (hh - p[2])
    n2 = wp.vec2(0.0, -1.0)
    d = d_base
    if d_side < d_base:
        d = d_side
        n2 = wp.normalize(wp.vec2(2.0 * hh, r))
    if inside:
        d = -d
    elif d > 1.0e-9:
        if d_side < d_base:
            n2 = to_side / d
        else:
            n2 = to_base / d
    radial = wp.vec3(1.0, 0.0, 0.0)
    if rho > 1.0e-9:
        radial = wp.vec3(p[0] / rho, p[1] / rho, 0.0)
    return wp.vec4(d, radial[0] * n2[0], radial[1] * n2[0], n2[1])


@wp.func
def shape_distance(geo: int, scale: wp.vec3, source: wp.uint64, p: wp.vec3, max_dist: float) -> wp.vec4:
    """Signed distance (x, negative inside) and outward unit normal (yzw) of the shape at local point p."""
    d = 1.0e6
    n = wp.vec3(0.0, 0.0, 1.0)
    if geo == PLANE:
        d = p[2]
        if scale[0] > 0.0 and (wp.abs(p[0]) > scale[0] or wp.abs(p[1]) > scale[1]):
            d = 1.0e6
    elif geo == SPHERE:
        l = wp.length(p)
        d = l - scale[0]
        if l > 1.0e-9:
            n = p / l
    elif geo == BOX:
        d = box_sdf(scale, p)
        n = box_normal(scale, p)
    elif geo == CAPSULE:
        a = capsule_axis_point(scale[0], scale[1], p)
        l = wp.length(p - a)
        d = l - scale[0]
        if l > 1.0e-9:
            n = (p - a) / l
        else:
            n = wp.vec3(1.0, 0.0, 0.0)
    elif geo == CYLINDER:
        d = cylinder_sdf(scale[0], scale[1], p)
        n = cylinder_normal(scale[0], scale[1], p)
    elif geo == ELLIPSOID or geo == CONE:
        dn = ellipsoid_distance(scale, p)
        if geo == CONE:
            dn = cone_distance(scale[0], scale[1], p)
        d = dn[0]
        n = wp.vec3(dn[1], dn[2], dn[3])
    elif geo == MESH or geo == HFIELD:
        s = wp.vec3(p[0] / scale[0], p[1] / scale[1], p[2] / scale[2])
        q = wp.mesh_query_point(source, s, max_dist)
        if q.result:
            c = wp.mesh_eval_position(source, q.face, q.u, q.v)
            side = q.sign
            if geo == HFIELD:  # an open surface, faces up: a point is on the side of its nearest face it lies on
                side = wp.sign(wp.dot(s - c, wp.mesh_eval_face_normal(source, q.face)))
            c = wp.vec3(c[0] * scale[0], c[1] * scale[1], c[2] * scale[2])
            delta = p - c
            l = wp.length(delta)
            d = l * side
            if l > 1.0e-9:
                n = delta * (side / l)
    elif geo == SDF:
        s = wp.vec3(p[0] / scale[0], p[1] / scale[1], p[2] / scale[2])
        uvw = wp.volume_world_to_index(source, s)
        g = wp.vec3()
        d = wp.volume_sample_grad_f(source, uvw, wp.Volume.LINEAR, g)
        gl = wp.length(g)
        if gl > 1.0e-9:
            n = g / gl
    return wp.vec4(d, n[0], n[1], n[2])


@wp.func
def bit_sign(k: int, bit: int) -> float:
    """-1 where `bit` is set in k, else 1: the signs of a box's corners and edges, numbered by their bits."""
    if (k & bit) != 0:
        return -1.0
    return 1.0


@wp.func
def probe_point(geo: int, scale: wp.vec3, source: wp.uint64, k: int) -> wp.vec4:
    """Probe point k (xyz, local) of the shape and the radius (w) its surface lies around it (a mesh's probes
    are its scaled vertices)."""
    if geo == MESH:
        v = wp.cw_mul(wp.mesh_get(source).points[k], scale)
        return wp.vec4(v[0], v[1], v[2], 0.0)
    if geo == SPHERE:
        return wp.vec4(0.0, 0.0, 0.0, scale[0])
    if geo == CAPSULE:
        z = scale[1]
        if k == 1:
            z = -scale[1]
        return wp.vec4(0.0, 0.0, z, scale[0])
    if geo == BOX:
        return wp.vec4(bit_sign(k, 1) * scale[0], bit_sign(k, 2) * scale[1], bit_sign(k, 4) * scale[2], 0.0)
    if geo == CONE:
        if k == 8:
            return wp.vec4(0.0, 0.0, scale[1], 0.0)
        a = float(k) * (2.0 * wp.pi / 8.0)
        return wp.vec4(scale[0] * wp.cos(a), scale[0] * wp.sin(a), -scale[1], 0.0)
    if geo == CYLINDER:
        a = float(k % 8) * (2.0 * wp.pi / 8.0)
        z = scale[1]
        if k >= 8:
            z = -scale[1]
        return wp.vec4(scale[0] * wp.cos(a), scale[0] * wp.sin(a), z, 0.0)
    return wp.vec4(0.0, 0.0, 0.0, 0.0)


@wp.struct
class EdgeProbe:
    """A probe edge of a shape: the segment from ``a`` to ``b`` (local) with the radius its surface lies around
    it; ``valid`` 0 for an edge another probe covers (a mesh edge is probed from one of its two triangles)."""

    a: wp.vec3
    b: wp.vec3
    radius: float
    valid: int


@wp.func
def edge_probe(geo: int, scale: wp.vec3, source: wp.uint64, k: int) -> EdgeProbe:
    """Probe edge k of the shape: a capsule's axis (its one edge), a box's 12 edges (4 along each axis), a
    mesh's triangle edges (k = 3 * triangle + corner; valid from the triangle that lists it in increasing
    vertex order, so a closed mesh probes each edge once)."""
    e = EdgeProbe()
    e.valid = 0
    if geo == CAPSULE:
        e.a = wp.vec3(0.0, 0.0, scale[1])
        e.b = wp.vec3(0.0, 0.0, -scale[1])
        e.radius = scale[0]
        e.valid = 1
    elif geo == BOX:
        axis = k // 4
        s1 = bit_sign(k, 1)
        s2 = bit_sign(k, 2)
        if axis == 0:
            e.a = wp.vec3(-scale[0], s1 * scale[1], s2 * scale[2])
            e.b = wp.vec3(scale[0], s1 * scale[1], s2 * scale[2])
        elif axis == 1:
            e.a = wp.vec3(s1 * scale[0], -scale[1], s2 * scale[2])
            e.b = wp.vec3(s1 * scale[0], scale[1], s2 * scale[2])
        else:
            e.a = wp.vec3(s1 * scale[0], s2 * scale[1], -scale[2])
            e.b = wp.vec3(s1 * scale[0], s2 * scale[1], scale[2])
        e.radius = 0.0
        e.valid = 1
    elif geo == MESH:
        m = wp.mesh_get(source)
        tri = k // 3
        c = k - 3 * tri
        i = m.indices[3 * tri + c]
        j = m.indices[3 * tri + (c + 1) % 3]
        if i < j:
            e.a = wp.cw_mul(m.points[i], scale)
            e.b = wp.cw_mul(m.points[j], scale)
            e.radius = 0.0
            e.valid = 1
    return e


@wp.func
def deepest_on_segment(geo: int, scale: wp.vec3, source: wp.uint64, a: wp.vec3, b: wp.vec3,
                       max_dist: float) -> float:
    """The parameter in [0, 1] of the point of segment ab (in the shape's frame) deepest in the shape (least
    signed distance): a golden-section search, exact for convex shapes (the distance is convex along a line)
    to 1e-4 of the segment's length. Where the distance is flat (an edge lying on a face) it narrows to the
    middle of the flat part, away from the faces beside it."""
    lo = 0.0
    hi = 1.0
    for _i in range(20):
        m1 = hi - 0.618034 * (hi - lo)
        m2 = lo + 0.618034 * (hi - lo)
        d1 = shape_distance(geo, scale, source, a + (b - a) * m1, max_dist)[0]
        d2 = shape_distance(geo, scale, source, a + (b - a) * m2, max_dist)[0]
        if d1 < d2 - 1.0e-7:
            hi = m2
        elif d2 < d1 - 1.0e-7:
            lo = m1
        else:
            lo = m1
            hi = m2
    return 0.5 * (lo + hi)
