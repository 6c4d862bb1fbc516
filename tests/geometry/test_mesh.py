"""wp.Mesh: closest/furthest points, signs, rays, face-box queries and evaluation against brute force NumPy,
gradients against finite differences, refits, freed handles and bad input."""

import gc

import numpy as np
import pytest

import loomwork as wp

SIGN_RAYS, SIGN_NORMAL, SIGN_PARITY, SIGN_WINDING, NO_SIGN = 0, 1, 2, 3, 4


@wp.kernel
def closest(mesh: wp.uint64, mode: int, pts: wp.array(dtype=wp.vec3), max_dist: float,
            found: wp.array(dtype=int), pos: wp.array(dtype=wp.vec3), signs: wp.array(dtype=float),
            faces: wp.array(dtype=int)):
    i = wp.tid()
    p = pts[i]
    if mode == 0:
        q = wp.mesh_query_point(mesh, p, max_dist)
    elif mode == 1:
        q = wp.mesh_query_point_sign_normal(mesh, p, max_dist)
    elif mode == 2:
        q = wp.mesh_query_point_sign_parity(mesh, p, max_dist, 3, 0.1)
    elif mode == 3:
        q = wp.mesh_query_point_sign_winding_number(mesh, p, max_dist, 2.0, 0.5)
    else:
        q = wp.mesh_query_point_no_sign(mesh, p, max_dist)
    if q.result:
        found[i] = 1
        pos[i] = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        signs[i] = q.sign
        faces[i] = q.face


@wp.kernel
def furthest(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), pos: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q = wp.mesh_query_furthest_point_no_sign(mesh, pts[i], 0.0)
    if q.result:
        pos[i] = wp.mesh_eval_position(mesh, q.face, q.u, q.v)


@wp.kernel
def rays(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), t: wp.array(dtype=float),
         faces: wp.array(dtype=int), signs: wp.array(dtype=float), hit: wp.array(dtype=wp.vec3),
         counts: wp.array(dtype=int)):
    i = wp.tid()
    q = wp.mesh_query_ray(mesh, o[i], d[i], 100.0)
    counts[i] = wp.mesh_query_ray_count_intersections(mesh, o[i], d[i])
    if q.result:
        t[i] = q.t
        faces[i] = q.face
        signs[i] = q.sign * wp.dot(q.normal, wp.mesh_eval_face_normal(mesh, q.face))
        hit[i] = wp.mesh_eval_position(mesh, q.face, q.u, q.v)


@wp.kernel
def faces_in_box(mesh: wp.uint64, lo: wp.vec3, hi: wp.vec3, hits: wp.array(dtype=int)):
    q = wp.mesh_query_aabb(mesh, lo, hi)
    f = 0
    while wp.mesh_query_next(q, f):
        hits[f] += 1


@wp.kernel
def faces_near(mesh: wp.uint64, center: wp.vec3, radius: float, hits: wp.array(dtype=int)):
    for f in wp.mesh_query_sphere(mesh, center, radius):
        hits[f] += 1


@wp.kernel
def corners(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), vel: wp.array(dtype=wp.vec3), idx: wp.array(dtype=int)):
    i = wp.tid()
    pts[i] = wp.mesh_get_point(mesh, i)
    vel[i] = wp.mesh_get_velocity(mesh, i)
    idx[i] = wp.mesh_get_index(mesh, i)


@wp.kernel
def closest_loss(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), weights: wp.vec3, loss: wp.array(dtype=float)):
    # the out-parameter form: the closest point's weights u, v carry gradients back to the query point
    i = wp.tid()
    p = pts[i]
    face = 0
    u = 0.0
    v = 0.0
    sign = 0.0
    if wp.mesh_query_point(mesh, p, 1.0e6, sign, face, u, v):
        c = wp.mesh_eval_position(mesh, face, u, v)
        wp.atomic_add(loss, 0, wp.length(p - c) + wp.dot(weights, c))


@wp.kernel
def closest_loss_struct(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3), weights: wp.vec3, loss: wp.array(dtype=float)):
    # the struct forms: q.u and q.v carry gradients too
    i = wp.tid()
    p = pts[i]
    q = wp.mesh_query_point_sign_normal(mesh, p, 1.0e6)
    if q.result:
        c = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        wp.atomic_add(loss, 0, wp.length(p - c) + wp.dot(weights, c))


@wp.kernel
def ray_loss_struct(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3),
                    loss: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_ray(mesh, o[i], d[i], 100.0)
    if q.result:
        wp.atomic_add(loss, 0, q.t + 0.3 * q.u - 0.7 * q.v)


@wp.kernel
def ray_loss(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    t = 0.0
    u = 0.0
    v = 0.0
    sign = 0.0
    n = wp.vec3()
    face = 0
    if wp.mesh_query_ray(mesh, o[i], d[i], 100.0, t, u, v, sign, n, face):
        wp.atomic_add(loss, 0, t + 0.3 * u - 0.7 * v)


@wp.func
def face_area(mesh_id: wp.uint64, f: int):
    m = wp.mesh_get(mesh_id)
    a = m.points[m.indices[3 * f]]
    b = m.points[m.indices[3 * f + 1]]
    c = m.points[m.indices[3 * f + 2]]
    return 0.5 * wp.length(wp.cross(b - a, c - a)) + 0.0 * float(m.num_tris)


@wp.kernel
def total_area(mesh_id: wp.uint64, out: wp.array(dtype=float)):
    wp.atomic_add(out, 0, face_area(mesh_id, wp.tid()))


def sphere(n_lat=24, n_lon=48, radius=1.0):
    """A closed UV sphere, outward winding."""
    th = np.linspace(0, np.pi, n_lat + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, n_lon, endpoint=False)
    pts = [[0, 0, radius]] + [[radius * np.sin(t) * np.cos(p), radius * np.sin(t) * np.sin(p), radius * np.cos(t)]
                              for t in th for p in ph] + [[0, 0, -radius]]
    ring = lambda r, j: 1 + r * n_lon + j % n_lon  # noqa: E731
    tris = [[0, ring(0, j), ring(0, j + 1)] for j in range(n_lon)]
    for r in range(n_lat - 2):
        for j in range(n_lon):
            tris += [[ring(r, j), ring(r + 1, j), ring(r + 1, j + 1)], [ring(r, j), ring(r + 1, j + 1), ring(r, j + 1)]]
    last = len(pts) - 1
    tris += [[last, ring(n_lat - 2, j + 1), ring(n_lat - 2, j)] for j in range(n_lon)]
    return np.array(pts, np.float32), np.array(tris, np.int32)


def closest_brute(p, tris):
    """Closest point on any of the triangles (T, 3, 3) to each point of p, by dense sampling-free projection."""
    best = np.full(len(p), np.inf)
    for a, b, c in tris:
        best = np.minimum(best, point_triangle_dist(p, a, b, c))
    return best


def point_triangle_dist(p, a, b, c):
    """Distances from the points p to triangle abc (face, edges, vertices); a, b, c one triangle or one per point."""
    dot = lambda x, y: (x * y).sum(-1)  # noqa: E731
    n = np.cross(b - a, c - a)
    n2 = dot(n, n)
    w = p - a
    s = dot(np.cross(w, c - a), n) / n2
    t = dot(np.cross(b - a, w), n) / n2
    inside = (s >= 0) & (t >= 0) & (s + t <= 1)
    d = np.where(inside, np.abs(dot(w, n)) / np.sqrt(n2), np.inf)
    for x, y in ((a, b), (b, c), (c, a)):
        e = y - x
        k = np.clip(dot(p - x, e) / dot(e, e), 0, 1)
        d = np.minimum(d, np.linalg.norm(p - (x + k[..., None] * e), axis=-1))
    return d


@pytest.fixture(scope="module")
def ball():
    pts, tris = sphere()
    return wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32),
                   velocities=wp.array(pts * 2.0, dtype=wp.vec3), support_winding_number=True), pts, tris


def query(mesh, mode, p, max_dist=1e6):
    n = len(p)
    out = [wp.zeros(n, dtype=int), wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=float), wp.full(n, -1, dtype=int)]
    wp.launch(closest, dim=n, inputs=[mesh, mode, wp.array(p, dtype=wp.vec3), max_dist, *out])
    return [a.numpy() for a in out]


def test_closest_points_match_brute_force_and_signs_agree(ball):
    """Closest points lie on the mesh at the brute-force distance; every sign method tells inside from outside."""
    mesh, pts, tris = ball
    rng = np.random.default_rng(0)
    p = (rng.random((400, 3)) * 3.0 - 1.5).astype(np.float32)
    r = np.linalg.norm(p, axis=1)
    p = p[np.abs(r - 1.0) > 0.05]  # away from the surface, where the faceted sphere and the ball agree
    want = closest_brute(p.astype(np.float64), pts[tris].astype(np.float64))
    inside = np.linalg.norm(p, axis=1) < 1.0
    for mode in (SIGN_RAYS, SIGN_NORMAL, SIGN_PARITY, SIGN_WINDING, NO_SIGN):
        found, pos, signs, faces = query(mesh.id, mode, p)
        assert found.all()
        np.testing.assert_allclose(np.linalg.norm(pos - p, axis=1), want, atol=2e-5, err_msg=f"mode {mode}")
        np.testing.assert_allclose(point_triangle_dist(pos.astype(np.float64), *pts[tris[faces]].transpose(1, 0, 2)
                                                       .astype(np.float64)).max(), 0.0, atol=1e-5)
        if mode != NO_SIGN:
            np.testing.assert_array_equal(signs < 0, inside, err_msg=f"sign mode {mode}")


def test_max_dist_is_strict_and_furthest_points_are_far_vertices(ball):
    """No result beyond max_dist; the furthest point is the farthest vertex."""
    mesh, pts, _ = ball
    p = np.array([[0.0, 0.0, 3.0], [0.2, 0.1, 0.0]], np.float32)
    found, *_ = query(mesh.id, NO_SIGN, p, max_dist=1.5)
    assert found.tolist() == [0, 1]
    pos = wp.zeros(2, dtype=wp.vec3)
    wp.launch(furthest, dim=2, inputs=[mesh.id, wp.array(p, dtype=wp.vec3), pos])
    want = np.linalg.norm(pts[None] - p[:, None], axis=2).max(axis=1)
    np.testing.assert_allclose(np.linalg.norm(pos.numpy() - p, axis=1), want, rtol=1e-6)


def test_rays_hit_where_brute_force_says(ball):
    """Ray hits: nearest t, the hit on the face at start + t dir, front/back sign, crossing counts."""
    mesh, pts, tris = ball
    rng = np.random.default_rng(2)
    n = 300
    o = (rng.random((n, 3)) * 4.0 - 2.0).astype(np.float32)
    d = rng.normal(size=(n, 3)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    outs = [wp.full(n, -1.0, dtype=float), wp.full(n, -1, dtype=int), wp.zeros(n, dtype=float),
            wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=int)]
    wp.launch(rays, dim=n, inputs=[mesh.id, wp.array(o, dtype=wp.vec3), wp.array(d, dtype=wp.vec3), *outs])
    t, faces, signs, hit, counts = (a.numpy() for a in outs)
    # brute force: every triangle against every ray (Moller-Trumbore in float64)
    a, b, c = (pts[tris[:, k]].astype(np.float64) for k in range(3))
    e1, e2 = b - a, c - a
    pv = np.cross(d[:, None], e2[None])
    det = (e1[None] * pv).sum(-1)
    tv = o[:, None] - a[None]
    s1 = (tv * pv).sum(-1) / det
    qv = np.cross(tv, e1[None])
    s2 = (d[:, None] * qv).sum(-1) / det
    tt = (e2[None] * qv).sum(-1) / det
    ok = (s1 >= 0) & (s2 >= 0) & (s1 + s2 <= 1) & (tt >= 0)
    want_t = np.where(ok, tt, np.inf).min(axis=1)
    hits = np.isfinite(want_t)
    assert hits.any() and not hits.all()
    np.testing.assert_allclose(t[hits], want_t[hits], rtol=1e-4, atol=1e-5)
    assert (faces[~hits] == -1).all()
    np.testing.assert_allclose(hit[hits], o[hits] + t[hits, None] * d[hits], atol=1e-4)
    outward = np.einsum("ij,ij->i", d[hits], o[hits] + t[hits, None] * d[hits]) < 0  # entering the ball
    np.testing.assert_array_equal(signs[hits] > 0, outward)
    np.testing.assert_array_equal(counts, ok.sum(axis=1))


def test_face_box_queries_are_exactly_the_overlapping_faces(ball):
    """mesh_query_aabb visits each face whose bounding box overlaps the box, once, and no other."""
    mesh, pts, tris = ball
    lo, hi = np.array([0.1, -0.3, -1.0], np.float32), np.array([0.6, 0.4, 0.2], np.float32)
    hits = wp.zeros(len(tris), dtype=int)
    wp.launch(faces_in_box, dim=1, inputs=[mesh.id, wp.vec3(*lo), wp.vec3(*hi), hits])
    c = pts[tris]
    want = ~((c.min(axis=1) > hi).any(1) | (c.max(axis=1) < lo).any(1))
    np.testing.assert_array_equal(hits.numpy(), want.astype(np.int32))


def test_sphere_queries_are_exactly_the_faces_within_the_radius(ball):
    """mesh_query_sphere visits the faces that come within the radius (not just those whose boxes do)."""
    mesh, pts, tris = ball
    c = pts[tris].astype(np.float64)
    for center, radius in (((0.3, 0.2, 0.9), 0.25), ((0.0, 0.0, 0.0), 1.0), ((1.2, 0.0, 0.0), 0.3)):
        hits = wp.zeros(len(tris), dtype=int)
        wp.launch(faces_near, dim=1, inputs=[mesh.id, wp.vec3(*center), radius, hits])
        dist = point_triangle_dist(np.array(center, np.float64), c[:, 0], c[:, 1], c[:, 2])
        sure = (dist < radius - 1e-5) | (dist > radius + 1e-5)  # away from float32 rounding at the boundary
        assert (dist < radius).any()
        np.testing.assert_array_equal(hits.numpy()[sure], (dist < radius)[sure].astype(np.int32))


def test_corner_accessors(ball):
    """mesh_get_point / velocity / index read corner i = 3 * face + k."""
    mesh, pts, tris = ball
    n = 3 * len(tris)
    outs = [wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=int)]
    wp.launch(corners, dim=n, inputs=[mesh.id, *outs])
    np.testing.assert_array_equal(outs[2].numpy(), tris.reshape(-1))
    np.testing.assert_array_equal(outs[0].numpy(), pts[tris.reshape(-1)])
    np.testing.assert_array_equal(outs[1].numpy(), 2.0 * pts[tris.reshape(-1)])


def fd_grad(f, x, eps=1e-3):
    g = np.zeros_like(x, dtype=np.float64)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += eps
        xm.flat[i] -= eps
        g.flat[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("kernel", [closest_loss, closest_loss_struct])
def test_closest_point_gradients_match_finite_differences(ball, kernel):
    """d/dp of |p - c(p)| + w.c(p), through the closest point's weights (face, edge and vertex regions), with
    the out-parameter form and the struct form."""
    mesh = ball[0]
    w = wp.vec3(0.3, -0.5, 0.8)
    p = np.array([[1.4, 0.3, 0.2], [0.3, 0.2, 0.5], [0.0, 0.05, 1.6], [-0.8, 0.8, -0.9]], np.float32)

    def loss(x):
        out = wp.zeros(1, dtype=float)
        wp.launch(kernel, dim=len(x), inputs=[mesh.id, wp.array(x.astype(np.float32), dtype=wp.vec3), w, out])
        return float(out.numpy()[0])

    pa = wp.array(p, dtype=wp.vec3, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(p), inputs=[mesh.id, pa, w, out])
    tape.backward(loss=out)
    np.testing.assert_allclose(pa.grad.numpy(), fd_grad(loss, p.astype(np.float64)), atol=3e-3)


@pytest.mark.parametrize("kernel", [ray_loss, ray_loss_struct])
def test_ray_gradients_match_finite_differences(ball, kernel):
    """d/d(origin, direction) of t + 0.3 u - 0.7 v of the nearest hit (out-parameter and struct forms)."""
    mesh = ball[0]
    o = np.array([[0.1, 0.2, -3.0], [2.5, 0.3, 0.1]], np.float32)
    d = np.array([[0.05, -0.02, 1.0], [-1.0, 0.1, 0.05]], np.float32)

    def loss(x):
        out = wp.zeros(1, dtype=float)
        oo, dd = x[:6].reshape(2, 3).astype(np.float32), x[6:].reshape(2, 3).astype(np.float32)
        wp.launch(kernel, dim=2, inputs=[mesh.id, wp.array(oo, dtype=wp.vec3), wp.array(dd, dtype=wp.vec3), out])
        return float(out.numpy()[0])

    oa, da = wp.array(o, dtype=wp.vec3, requires_grad=True), wp.array(d, dtype=wp.vec3, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=2, inputs=[mesh.id, oa, da, out])
    tape.backward(loss=out)
    want = fd_grad(loss, np.concatenate([o.ravel(), d.ravel()]).astype(np.float64), eps=1e-3)
    np.testing.assert_allclose(np.concatenate([oa.grad.numpy().ravel(), da.grad.numpy().ravel()]), want, atol=5e-3)


def test_sign_normal_is_right_next_to_a_sharp_concave_edge():
    """Two faces meeting at a sharp concave (inward) edge: points just inside, by the edge, are inside."""
    # a closed wedge-shaped box with a deep notch: the notch's two faces meet at a concave edge along y
    pts = np.array([[0, 0, 0], [2, 0, 0], [2, 0, 2], [1, 0, 0.2], [0, 0, 2],
                    [0, 1, 0], [2, 1, 0], [2, 1, 2], [1, 1, 0.2], [0, 1, 2]], np.float32)
    front = [[0, 1, 3], [1, 2, 3], [0, 3, 4]]
    tris = front + [[a + 5, c + 5, b + 5] for a, b, c in front]  # the back face, reversed
    ring = [0, 1, 2, 3, 4]
    for k in range(5):
        a, b = ring[k], ring[(k + 1) % 5]
        tris += [[a, a + 5, b + 5], [a, b + 5, b]]
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(np.array(tris, np.int32).reshape(-1), dtype=wp.int32))
    p = np.array([[1.0, 0.5, 0.19], [1.0, 0.5, 0.21], [0.999, 0.5, 0.18], [1.02, 0.5, 0.185]], np.float32)
    inside = np.array([True, False, True, True])
    for mode in (SIGN_NORMAL, SIGN_RAYS):
        found, _, signs, _ = query(mesh.id, mode, p)
        assert found.all()
        np.testing.assert_array_equal(signs < 0, inside, err_msg=f"mode {mode}")


def test_winding_numbers_classify_points_of_an_open_mesh():
    """A sphere with a hole: the winding number still tells the inside (threshold 0.5)."""
    pts, tris = sphere()
    tris = tris[6:]  # a hole at the north pole
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32),
                   support_winding_number=True)
    p = np.array([[0.0, 0.0, 0.3], [0.3, -0.2, -0.4], [0.0, 0.0, 1.5], [1.2, 0.5, 0.0]], np.float32)
    _, _, signs, _ = query(mesh.id, SIGN_WINDING, p)
    np.testing.assert_array_equal(signs < 0, [True, True, False, False])


def test_refit_and_points_assignment_follow_the_points(ball):
    """Moving points in place and refit(), or assigning new points, moves every query with them."""
    _, pts, tris = ball
    points = wp.array(pts, dtype=wp.vec3)
    mesh = wp.Mesh(points, wp.array(tris.reshape(-1), dtype=wp.int32))
    p = np.array([[0.0, 0.0, 4.0]], np.float32)
    assert abs(np.linalg.norm(query(mesh.id, NO_SIGN, p)[1] - p) - 3.0) < 1e-5
    points.numpy()[:] = pts * 2.0
    mesh.refit()
    assert abs(np.linalg.norm(query(mesh.id, NO_SIGN, p)[1] - p) - 2.0) < 1e-5
    mesh.points = wp.array(pts * 3.0, dtype=wp.vec3)
    assert abs(np.linalg.norm(query(mesh.id, NO_SIGN, p)[1] - p) - 1.0) < 1e-5


def test_degenerate_triangles_are_skipped():
    """Zero-area triangles (repeated and collinear corners) never become the closest face, nor produce NaN."""
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.5, 0.5, 1.0], [2, 2, 2]], np.float32)
    tris = np.array([[0, 1, 2], [3, 3, 3], [0, 1, 1], [0, 4, 4]], np.int32)
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32))
    found, pos, _, faces = query(mesh.id, NO_SIGN, np.array([[0.5, 0.5, 0.9], [1.5, 1.5, 1.8]], np.float32))
    assert found.all() and (faces == 0).all() and np.isfinite(pos).all()


def test_freed_mesh_ids_find_nothing():
    """A query on the id of a freed Mesh finds nothing instead of reading freed memory."""
    pts, tris = sphere(6, 8)
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32))
    stale = mesh.id
    assert query(stale, NO_SIGN, np.zeros((1, 3), np.float32))[0].all()
    del mesh
    gc.collect()
    assert not query(stale, NO_SIGN, np.zeros((1, 3), np.float32))[0].any()


def test_bad_meshes_are_clear_errors():
    """Empty meshes, index counts and ranges, NaN points, mismatched velocities, groups and point updates."""
    pts = wp.array(np.eye(3, dtype=np.float32), dtype=wp.vec3)
    with pytest.raises(wp.GeometryError, match="at least one triangle"):
        wp.Mesh(pts, wp.zeros(0, dtype=wp.int32))
    with pytest.raises(wp.GeometryError, match="three entries per triangle"):
        wp.Mesh(pts, wp.array([0, 1], dtype=wp.int32))
    with pytest.raises(ValueError, match=r"triangle 1 has \[0, 3, 1\], out of range for 3 points"):
        wp.Mesh(pts, wp.array([0, 1, 2, 0, 3, 1], dtype=wp.int32))
    with pytest.raises(RuntimeError, match="wp.int32"):
        wp.Mesh(pts, wp.array([0.0, 1.0, 2.0], dtype=float))
    nan = np.eye(3, dtype=np.float32)
    nan[2, 0] = np.nan
    with pytest.raises(wp.GeometryError, match=r"NaN or infinite value \(item 2"):
        wp.Mesh(wp.array(nan, dtype=wp.vec3), wp.array([0, 1, 2], dtype=wp.int32))
    with pytest.raises(wp.GeometryError, match="2 velocities for 3 points"):
        wp.Mesh(pts, wp.array([0, 1, 2], dtype=wp.int32), velocities=wp.zeros(2, dtype=wp.vec3))
    mesh = wp.Mesh(pts, wp.array([0, 1, 2], dtype=wp.int32))
    with pytest.raises(wp.GeometryError, match="must match the old"):
        mesh.points = wp.zeros(4, dtype=wp.vec3)
    with pytest.raises(wp.GeometryError, match=r"velocities \(4 on cpu\) must match the points \(3 on cpu\)"):
        mesh.velocities = wp.zeros(4, dtype=wp.vec3)
    pts.numpy()[0, 0] = np.inf
    with pytest.raises(wp.GeometryError, match="NaN or infinite"):
        mesh.refit()


def test_rays_through_shared_edges_and_vertices_never_slip_through():
    """Camera rays at a subdivided icosphere: rays that pass exactly through edges shared by two triangles hit
    the near side (a ray test that misses both triangles would report the far side, ~0.8 farther)."""
    from loomwork.apps.bench_geometry import camera_rays, icosphere

    pts, tris = icosphere(6)
    o, d = camera_rays(1024)
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32))
    n = len(o)
    t = wp.full(n, -1.0, dtype=float)
    extra = [wp.zeros(n, dtype=int), wp.zeros(n, dtype=float), wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=int)]
    wp.launch(rays, dim=n, inputs=[mesh.id, wp.array(o, dtype=wp.vec3), wp.array(d, dtype=wp.vec3), t, *extra])
    b, c = (o * d).sum(1), (o * o).sum(1) - 1.0
    sphere_t = -b - np.sqrt(np.maximum(b * b - c, 0.0))
    hit = t.numpy() >= 0
    assert 0.3 < hit.mean() < 0.5
    assert np.abs(t.numpy() - sphere_t)[hit].max() < 0.01  # the facets' sagitta


def test_sign_normal_is_right_past_a_sharp_convex_edge():
    """Points just past the tip of a thin wedge, where either face's own normal says 'inside': the edge's
    pseudo-normal says outside; points just within the tip are inside."""
    h = 0.05
    # a prism along y: the sharp edge (x = 0, z = 0), faces opening toward -x to z = +-h
    pts = np.array([[0, 0, 0], [-1, 0, h], [-1, 0, -h], [0, 1, 0], [-1, 1, h], [-1, 1, -h]], np.float32)
    tris = [[0, 1, 2], [3, 5, 4],  # end caps
            [0, 3, 4], [0, 4, 1],  # upper face
            [0, 2, 5], [0, 5, 3],  # lower face
            [1, 4, 5], [1, 5, 2]]  # back
    mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(np.array(tris, np.int32).reshape(-1), dtype=wp.int32))
    p = np.array([[0.01, 0.5, 0.001], [0.01, 0.5, -0.001], [-0.01, 0.5, 0.0002], [-0.5, 0.5, 0.01]], np.float32)
    for mode in (SIGN_NORMAL, SIGN_RAYS, SIGN_PARITY):
        found, _, signs, _ = query(mesh.id, mode, p)
        assert found.all()
        np.testing.assert_array_equal(signs < 0, [False, False, True, True], err_msg=f"mode {mode}")


def test_rays_along_a_quads_diagonal_hit_one_of_its_triangles():
    """Rays straight down onto a quad of two triangles, many exactly on their shared diagonal, all hit."""
    xx, yy = np.meshgrid(np.arange(0.1, 0.4, 0.01), np.arange(0.1, 0.4, 0.01))
    o = np.stack([xx.ravel(), yy.ravel(), np.ones(xx.size)], axis=1).astype(np.float32)
    d = np.tile(np.array([0.0, 0.0, -1.0], np.float32), (len(o), 1))
    pts = np.array([[0.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.5, 0.5, 0.0]], np.float32)
    tris = np.array([1, 0, 2, 1, 2, 3], np.int32)
    for leaf_size in (1, 4):
        mesh = wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris, dtype=wp.int32), bvh_leaf_size=leaf_size)
        n = len(o)
        t = wp.full(n, -1.0, dtype=float)
        extra = [wp.zeros(n, dtype=int), wp.zeros(n, dtype=float), wp.zeros(n, dtype=wp.vec3),
                 wp.zeros(n, dtype=int)]
        wp.launch(rays, dim=n, inputs=[mesh.id, wp.array(o, dtype=wp.vec3), wp.array(d, dtype=wp.vec3), t, *extra])
        np.testing.assert_allclose(t.numpy(), 1.0)


def test_mesh_get_reads_the_arrays_and_points_gradients_reach_the_points():
    """wp.mesh_get(id).points / .indices in a function: the surface area, and its gradient in Mesh.points.grad."""
    pts, tris = sphere(6, 8)
    rng = np.random.default_rng(4)
    pts = (pts * (1.0 + 0.1 * rng.random((len(pts), 1)))).astype(np.float32)

    def area(x):
        c = x.reshape(-1, 3)[tris]
        return 0.5 * np.linalg.norm(np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), axis=1).sum()

    points = wp.array(pts, dtype=wp.vec3, requires_grad=True)
    mesh = wp.Mesh(points, wp.array(tris.reshape(-1), dtype=wp.int32))
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(total_area, dim=len(tris), inputs=[mesh.id, out])
    tape.backward(loss=out)
    np.testing.assert_allclose(out.numpy()[0], area(pts.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(points.grad.numpy(), fd_grad(area, pts.astype(np.float64)).reshape(-1, 3), atol=1e-5)


@wp.kernel
def out_params_on_a_miss(mesh: wp.uint64, out: wp.array(dtype=float)):
    # Warp's out-parameter forms leave the caller's variables as they were when nothing is found
    face = -1
    u = 7.0
    v = 8.0
    sign = 9.0
    t = -2.0
    n = wp.vec3(1.0, 2.0, 3.0)
    hit = wp.mesh_query_ray(mesh, wp.vec3(5.0, 5.0, 5.0), wp.vec3(1.0, 0.0, 0.0), 10.0, t, u, v, sign, n, face)
    # a bare -1 beside the uint64 id: the literal does not fit uint64, so it takes the int32 parameter's type
    hit = hit or wp.mesh_query_ray(mesh, wp.vec3(5.0, 5.0, 5.0), wp.vec3(1.0, 0.0, 0.0), 10.0, t, u, v, sign, n, face,
                                   -1)
    found = wp.mesh_query_point(mesh, wp.vec3(5.0, 5.0, 5.0), 0.5, sign, face, u, v)
    out[0] = float(face) + u + v + sign + t + n[2] + float(int(hit) + int(found))


def test_out_parameters_keep_their_values_on_a_miss(ball):
    """A ray that misses and a point beyond max_dist leave face, u, v, sign, t and the normal untouched."""
    out = wp.zeros(1, dtype=float)
    wp.launch(out_params_on_a_miss, dim=1, inputs=[ball[0].id, out])
    assert out.numpy()[0] == -1.0 + 7.0 + 8.0 + 9.0 - 2.0 + 3.0


@wp.kernel
def sampled_points_loss(mesh: wp.uint64, faces: wp.array(dtype=int), uv: wp.array(dtype=wp.vec2),
                        targets: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    f = faces[i]
    x = wp.mesh_eval_position(mesh, f, uv[i][0], uv[i][1])
    v = wp.mesh_eval_velocity(mesh, f, uv[i][0], uv[i][1])
    c = wp.mesh_get_point(mesh, 3 * f + 1) + 0.5 * wp.mesh_get_velocity(mesh, 3 * f + 2)
    d = x + 0.25 * v - targets[i]
    wp.atomic_add(out, 0, wp.dot(d, d) + wp.dot(c, c))


def test_gradients_reach_mesh_points_and_velocities_through_eval_and_get():
    """mesh_eval_position/velocity and mesh_get_point/velocity send gradients into Mesh points' and
    velocities' .grad (shared corners accumulate), matching finite differences of the same loss in NumPy."""
    pts, tris = sphere(4, 6)
    rng = np.random.default_rng(9)
    vel = rng.standard_normal(pts.shape).astype(np.float32)
    n = 40
    faces = rng.integers(0, len(tris), n)
    uv = rng.random((n, 2)).astype(np.float32) * 0.5
    targets = rng.standard_normal((n, 3)).astype(np.float32)

    def loss(x, vx):
        x, vx = x.reshape(-1, 3), vx.reshape(-1, 3)
        c = tris[faces]
        w = np.stack([uv[:, 0], uv[:, 1], 1.0 - uv.sum(axis=1)], axis=1)[..., None]
        d = (w * x[c]).sum(1) + 0.25 * (w * vx[c]).sum(1) - targets
        g = x[c[:, 1]] + 0.5 * vx[c[:, 2]]
        return (d * d).sum() + (g * g).sum()

    points = wp.array(pts, dtype=wp.vec3, requires_grad=True)
    velocities = wp.array(vel, dtype=wp.vec3, requires_grad=True)
    mesh = wp.Mesh(points, wp.array(tris.reshape(-1), dtype=wp.int32), velocities=velocities)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sampled_points_loss, n, inputs=[mesh.id, wp.array(faces, dtype=int), wp.array(uv, dtype=wp.vec2),
                                                  wp.array(targets, dtype=wp.vec3), out])
    tape.backward(loss=out)
    x0, v0 = pts.astype(np.float64), vel.astype(np.float64)
    np.testing.assert_allclose(out.numpy()[0], loss(x0, v0), rtol=1e-5)
    np.testing.assert_allclose(points.grad.numpy(), fd_grad(lambda x: loss(x, v0), x0), atol=2e-4)
    np.testing.assert_allclose(velocities.grad.numpy(), fd_grad(lambda v: loss(x0, v), v0), atol=2e-4)


@wp.kernel
def rays_from_root(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), root: int,
                   t: wp.array(dtype=float), face: wp.array(dtype=int)):
    i = wp.tid()
    q = wp.mesh_query_ray(mesh, o[i], d[i], 1.0e6, root)
    t[i] = wp.where(q.result, q.t, -1.0)
    face[i] = wp.where(q.result, q.face, -1)


def test_cpu_rays_through_the_4_wide_tree_match_the_binary_tree():
    """Whole-mesh rays on the CPU traverse a 4-wide copy of the tree (SIMD box tests); from the root node
    (root=0) they traverse the binary tree. Both hit the same rays for random rays and rays along the axes
    (zero direction components, signed zeros) through vertices and from origins on the boxes' planes, also
    after a refit moved the points, and with leaves larger than a SIMD block of triangles."""
    pts, tris = sphere()
    rng = np.random.default_rng(11)
    d = rng.normal(size=(400, 3))
    axes = np.concatenate([np.eye(3), -np.eye(3), [[0.0, -0.0, 1.0], [-0.0, 1.0, 0.0], [0.6, 0.0, -0.8]]])
    d = np.concatenate([d / np.linalg.norm(d, axis=1, keepdims=True), np.repeat(axes, 40, axis=0)])
    o = np.concatenate([rng.random((400, 3)) * 4.0 - 2.0, np.tile(pts[rng.integers(0, len(pts), 40)], (9, 1))
                        - np.repeat(axes, 40, axis=0) * 2.0])
    o[400::7] = np.round(o[400::7], 1)  # some origins on coordinate planes
    O, D = wp.array(o, dtype=wp.vec3), wp.array(d, dtype=wp.vec3)
    meshes = [wp.Mesh(wp.array(pts, dtype=wp.vec3), wp.array(tris.reshape(-1), dtype=wp.int32), bvh_leaf_size=size)
              for size in (None, 7)]  # leaves of up to 4 triangles (one SIMD block each), and of several blocks
    for mesh in [m for m in meshes for _ in range(2)]:  # each before and after a refit
        got = {}
        for root in (-1, 0):
            t, face = wp.zeros(len(o), dtype=float), wp.zeros(len(o), dtype=int)
            wp.launch(rays_from_root, len(o), inputs=[mesh.id, O, D, root, t, face])
            got[root] = (t.numpy(), face.numpy())
        np.testing.assert_array_equal(got[-1][1] >= 0, got[0][1] >= 0)
        np.testing.assert_array_equal(got[-1][1][:400], got[0][1][:400])
        # the axis rays pass through vertices, where the triangles around one tie up to an ulp of t
        np.testing.assert_allclose(got[-1][0], got[0][0], rtol=1e-6)
        assert (got[-1][1] >= 0).sum() > 200
        mesh.points = wp.array(pts * np.array([1.5, 0.7, 1.0], np.float32) + 0.1, dtype=wp.vec3)  # a refit
