"""Ellipsoid and cone shapes (Newton's add_shape_ellipsoid / add_shape_cone): mass properties, signed
distances, resting contact on the ground and on each other, particles on them, and drawing them."""

import math

import numpy as np

import loomwork as wp
import loomwork.sim as newton
from loomwork.sim.shape_kernels import shape_distance


def test_mass_properties_of_solid_ellipsoids_and_cones():
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(density=1000.0)
    e = b.add_body()
    b.add_shape_ellipsoid(e, rx=0.3, ry=0.2, rz=0.1, cfg=cfg)
    c = b.add_body()
    b.add_shape_cone(c, radius=0.2, half_height=0.3, cfg=cfg)
    m = b.finalize()
    mass, com, inertia = m.body_mass.numpy(), m.body_com.numpy(), m.body_inertia.numpy()
    me = 4.0 / 3.0 * math.pi * 0.3 * 0.2 * 0.1 * 1000.0
    np.testing.assert_allclose(mass[0], me, rtol=1e-5)
    np.testing.assert_allclose(np.diag(inertia[0]), np.array([0.05, 0.1, 0.13]) * me / 5.0, rtol=1e-5)
    mc = math.pi * 0.04 * 0.6 / 3.0 * 1000.0
    np.testing.assert_allclose(mass[1], mc, rtol=1e-5)
    np.testing.assert_allclose(com[1], (0.0, 0.0, -0.15), atol=1e-6)  # a quarter of the height above the base
    ixx = mc * (3.0 / 20.0 * 0.04 + 3.0 / 80.0 * 0.36)
    np.testing.assert_allclose(np.diag(inertia[1]), (ixx, ixx, 0.3 * mc * 0.04), rtol=1e-5)


@wp.kernel
def _distances(geo: int, scale: wp.vec3, points: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    out[i] = shape_distance(geo, scale, wp.uint64(0), points[i], 10.0)


def _sampled(geo, scale, points):
    out = wp.zeros(len(points), dtype=wp.vec4)
    wp.launch(_distances, len(points), inputs=[int(geo), wp.vec3(*scale), wp.array(points, dtype=wp.vec3), out])
    return out.numpy()


def test_cone_distance_is_exact_and_ellipsoid_distance_exact_on_its_axes():
    rng = np.random.default_rng(1)
    r, hh = 0.4, 0.5
    pts = rng.uniform(-1.0, 1.0, (400, 3)).astype(np.float32)
    got = _sampled(newton.GeoType.CONE, (r, hh, 0.0), pts)
    # brute force: the distance to the cone's surface, sampled finely on its (radial, z) profile
    rho, z = np.hypot(pts[:, 0], pts[:, 1]), pts[:, 2]
    t = np.linspace(0.0, 1.0, 4001)
    profile = np.concatenate([np.stack([r * t, np.full_like(t, -hh)], 1),  # base
                              np.stack([r * (1 - t), -hh + 2 * hh * t], 1)])  # side, base rim to apex
    dist = np.min(np.hypot(rho[:, None] - profile[None, :, 0], z[:, None] - profile[None, :, 1]), axis=1)
    inside = (z >= -hh) & (z <= hh) & (rho * 2 * hh <= r * (hh - z))
    np.testing.assert_allclose(got[:, 0], np.where(inside, -dist, dist), atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(got[:, 1:], axis=1), 1.0, atol=1e-5)
    # the normal points the way the distance grows
    step = _sampled(newton.GeoType.CONE, (r, hh, 0.0), pts + 1e-3 * got[:, 1:])
    assert np.all(step[:, 0] - got[:, 0] > 0.5e-3)
    axes = np.array([[0.7, 0, 0], [0, -0.5, 0], [0, 0, 0.3], [0.1, 0, 0], [0, 0, -0.05]], np.float32)
    e = _sampled(newton.GeoType.ELLIPSOID, (0.5, 0.4, 0.2), axes)
    np.testing.assert_allclose(e[:, 0], [0.2, 0.1, 0.1, -0.4, -0.15], atol=1e-6)
    np.testing.assert_allclose(e[:, 1:], [[1, 0, 0], [0, -1, 0], [0, 0, 1], [1, 0, 0], [0, 0, -1]], atol=1e-6)


def settle(m, steps, iterations, soft_contact_gap=None):
    """``steps`` XPBD steps of 1/240 s with contacts found each step; the last state."""
    pipeline = newton.CollisionPipeline(m, soft_contact_gap=soft_contact_gap)
    contacts = pipeline.contacts()
    solver = newton.solvers.SolverXPBD(m, iterations=iterations)
    s0, s1 = m.state(), m.state()
    for _ in range(steps):
        pipeline.collide(s0, contacts)
        s0.clear_forces()
        solver.step(s0, s1, None, contacts, 1.0 / 240)
        s0, s1 = s1, s0
    return s0


def drop(add, z0, tilt=0.0):
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, z0), wp.quat_rpy(tilt, -0.8 * tilt, 0.3)))
    add(b, body)
    b.add_ground_plane()
    return settle(b.finalize(), 480, 8)


def test_a_flat_ellipsoid_and_a_cone_come_to_rest_on_the_ground():
    """The ellipsoid touches the ground at its support point (found from the plane's normal, so a tilted one
    rocks on its curved underside, as it should without rolling resistance, instead of tipping onto a fixed
    probe); the cone stands on its base rim."""
    def flat(b, body):
        return b.add_shape_ellipsoid(body, rx=0.5, ry=0.5, rz=0.25)

    s = drop(flat, 0.6)
    q = s.body_q.numpy()[0]
    assert abs(q[2] - 0.25) < 5e-3 and np.abs(s.body_qd.numpy()[0]).max() < 0.05
    s = drop(flat, 0.6, tilt=0.05)
    q = s.body_q.numpy()[0]
    up = np.array(wp.quat_rotate(wp.quat(*q[3:]), wp.vec3(0.0, 0.0, 1.0)))
    assert up[2] > math.cos(0.1) and 0.24 < q[2] < 0.27  # rocking about upright, on its underside
    s = drop(lambda b, body: b.add_shape_cone(body, radius=0.3, half_height=0.4), 0.6, tilt=0.05)
    q = s.body_q.numpy()[0]
    assert abs(q[2] - 0.4) < 5e-3 and np.abs(s.body_qd.numpy()[0]).max() < 0.05


def test_particles_rest_on_an_ellipsoid_and_a_cone():
    for shape, top in (("ellipsoid", 0.3), ("cone", 0.5)):
        b = newton.ModelBuilder()
        b.add_particle((0.0, 0.0, top + 0.2), (0.0, 0.0, 0.0), 0.1, radius=0.05)
        if shape == "ellipsoid":
            b.add_shape_ellipsoid(-1, rx=0.4, ry=0.4, rz=0.3)
        else:
            b.add_shape_cone(-1, radius=0.4, half_height=0.5)
        s = settle(b.finalize(), 240, 4, soft_contact_gap=0.02)
        assert abs(s.particle_q.numpy()[0][2] - (top + 0.05)) < 5e-3, shape


def test_viewers_draw_ellipsoids_and_cones(tmp_path):
    from loomwork.render import ViewerImage

    b = newton.ModelBuilder()
    b.add_shape_ellipsoid(-1, xform=wp.transform((-0.6, 0.0, 0.3), wp.quat_identity()), rx=0.4, ry=0.3, rz=0.3)
    b.add_shape_cone(-1, xform=wp.transform((0.6, 0.0, 0.4), wp.quat_identity()), radius=0.3, half_height=0.4)
    m = b.finalize()
    view = ViewerImage(str(tmp_path), width=64, height=48, camera_pos=(0.0, -4.0, 1.0))
    view.set_model(m)
    view.begin_frame(0.0)
    view.log_state(m.state())
    view.end_frame()
    view.close()
    assert list(tmp_path.glob("*.png"))


def test_heightfield_terrain_holds_particles_and_bodies_at_its_height():
    """Newton's Heightfield: a bumpy grid; particles dropped on it and a box and a sphere dropped on it rest at
    the surface's height under them (the grid's triangles), and a point below it is inside."""
    rng = np.random.default_rng(3)
    nrow, ncol = 12, 16
    data = rng.uniform(0.0, 1.0, (nrow, ncol))
    hf = newton.Heightfield(data, nrow, ncol, hx=2.0, hy=1.5, min_z=-0.1, max_z=0.2)
    assert abs(hf.height(-2.0, -1.5) - (-0.1 + 0.3 * hf.data[0, 0])) < 1e-6
    b = newton.ModelBuilder()
    b.add_shape_heightfield(heightfield=hf)
    spots = [(-1.2, 0.4), (0.3, -0.7), (1.5, 1.0)]
    for x, y in spots:
        b.add_particle((x, y, 0.6), (0.0, 0.0, 0.0), 0.05, radius=0.03)
    sphere = b.add_body(xform=wp.transform((0.8, 0.2, 0.8), wp.quat_identity()))
    b.add_shape_sphere(sphere, radius=0.1)
    m = b.finalize()
    s0 = settle(m, 360, 4, soft_contact_gap=0.02)
    q = s0.particle_q.numpy()
    for k in range(len(spots)):  # resting on the surface under them (a bump may roll them a little)
        assert -0.01 < q[k][2] - 0.03 - hf.height(q[k][0], q[k][1]) < 0.03, k
    ball = s0.body_q.numpy()[0]
    assert -0.15 < ball[2] < 0.35 and abs(ball[0]) < 2.0 and abs(ball[1]) < 1.5  # on the terrain, not through it
    points = wp.array([[0.1, 0.1, hf.height(0.1, 0.1) - 0.05], [0.1, 0.1, hf.height(0.1, 0.1) + 0.05]],
                      dtype=wp.vec3)
    out = wp.zeros(2, dtype=wp.vec4)
    wp.launch(_terrain_distances, 2, inputs=[m.shape_source_ptr, points, out])
    d = out.numpy()
    assert -0.06 < d[0, 0] < -0.01 and 0.01 < d[1, 0] < 0.06 and d[1, 3] > 0.5  # below is inside; normal up


@wp.kernel
def _terrain_distances(source: wp.array(dtype=wp.uint64), points: wp.array(dtype=wp.vec3),
                       out: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    out[i] = shape_distance(int(newton.GeoType.HFIELD), wp.vec3(1.0, 1.0, 1.0), source[0], points[i], 1.0)
