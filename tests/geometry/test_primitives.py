"""closest_point_edge_edge and intersect_tri_tri against NumPy references."""

import numpy as np

import loomwork as wp


@wp.kernel
def edge_edge(seg: wp.array2d(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.closest_point_edge_edge(seg[i, 0], seg[i, 1], seg[i, 2], seg[i, 3], 1.0e-12)


@wp.kernel
def tri_tri(t: wp.array2d(dtype=wp.vec3d), out: wp.array(dtype=int)):
    i = wp.tid()
    out[i] = wp.intersect_tri_tri(t[i, 0], t[i, 1], t[i, 2], t[i, 3], t[i, 4], t[i, 5])


def test_closest_points_of_segments():
    """The returned (s, t) give points at the returned distance, no farther than the best of a fine sampling;
    degenerate segments and parallel ones are handled."""
    rng = np.random.default_rng(0)
    seg = rng.uniform(-1, 1, (200, 4, 3)).astype(np.float32)
    seg[0, 1] = seg[0, 0]  # the first is a point
    seg[1, 2:] = seg[1, :2] + np.float32(0.5)  # parallel segments
    out = wp.zeros(200, dtype=wp.vec3)
    wp.launch(edge_edge, 200, inputs=[wp.array(seg, dtype=wp.vec3), out])
    r = out.numpy()
    u = np.linspace(0, 1, 101)
    for k in range(200):
        p1, q1, p2, q2 = seg[k].astype(np.float64)
        s, t, d = r[k]
        assert 0 <= s <= 1 and 0 <= t <= 1
        assert abs(np.linalg.norm(p1 + s * (q1 - p1) - p2 - t * (q2 - p2)) - d) < 1e-5
        a = p1 + u[:, None] * (q1 - p1)
        b = p2 + u[:, None] * (q2 - p2)
        sampled = np.linalg.norm(a[:, None] - b[None], axis=-1).min()
        assert d <= sampled + 1e-5 and d >= sampled - 0.03


def segment_hits_triangle(a, b, tri) -> bool:
    """Moller-Trumbore on the segment's line, restricted to the segment (generic position only)."""
    e1, e2, d = tri[1] - tri[0], tri[2] - tri[0], b - a
    h = np.cross(d, e2)
    det = e1 @ h
    if abs(det) < 1e-12:
        return False
    f = 1 / det
    s = a - tri[0]
    u = f * (s @ h)
    q = np.cross(s, e1)
    v = f * (d @ q)
    t = f * (e2 @ q)
    return u >= 0 and v >= 0 and u + v <= 1 and 0 <= t <= 1


def test_triangle_pairs_match_a_reference():
    rng = np.random.default_rng(1)
    tris = rng.uniform(-1, 1, (300, 6, 3))
    special = np.array([
        [[0, 0, 0], [2, 0, 0], [0, 2, 0], [1, 1, -1], [1, 1, 1], [1, -1, 0]],  # piercing
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.2, 0], [2, 0.2, 0], [0.2, 2, 0]],  # coplanar, overlapping
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [2, 2, 0], [3, 2, 0], [2, 3, 0]],  # coplanar, apart
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [2, 0, 1], [2, 1, 0]],  # touching at a vertex
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.5, 0.1, 0], [0.5, 0.1, 1], [5, 5, 5]],  # an edge starts inside
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [-1, 0.2, 0], [3, 0.2, 0], [1, 0.2, 1]],  # an edge crosses in-plane
        [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1]],  # parallel planes
    ], dtype=np.float64)
    expect_special = [1, 1, 0, 1, 1, 1, 0]
    all_tris = np.concatenate([tris, special])
    out = wp.zeros(len(all_tris), dtype=int)
    wp.launch(tri_tri, len(all_tris), inputs=[wp.array(all_tris, dtype=wp.vec3d), out])
    got = out.numpy()
    for k in range(300):
        v, w = tris[k, :3], tris[k, 3:]
        ref = any(segment_hits_triangle(v[i], v[(i + 1) % 3], w) or segment_hits_triangle(w[i], w[(i + 1) % 3], v)
                  for i in range(3))
        assert got[k] == ref, k
    assert got[300:].tolist() == expect_special


@wp.kernel
def edge_edge_probe(seg: wp.array2d(dtype=wp.vec3), w: wp.vec3, out: wp.array(dtype=float)):
    i = wp.tid()
    r = wp.closest_point_edge_edge(seg[i, 0], seg[i, 1], seg[i, 2], seg[i, 3], 1.0e-12)
    out[i] = wp.dot(r, w)


def _edge_edge_gradients(seg: np.ndarray, w: np.ndarray) -> np.ndarray:
    s = wp.array(seg, dtype=wp.vec3, requires_grad=True)
    out = wp.zeros(len(seg), requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(edge_edge_probe, len(seg), inputs=[s, wp.vec3(*w), out])
    tape.backward(grads={out: wp.array(np.ones(len(seg), np.float32))})
    return s.grad.numpy()


def test_closest_points_of_segments_are_differentiable():
    """The gradients of (s, t, d) match central differences where the closest points are on a smooth branch
    (both parameters free, or one clamped: the sample set has both), and the distance's gradient stays
    bounded by 1 for nearly parallel segments (it needs no derivative of s or t)."""
    rng = np.random.default_rng(3)
    seg = rng.standard_normal((300, 4, 3)).astype(np.float32)
    r = wp.zeros(300, dtype=wp.vec3)
    wp.launch(edge_edge, 300, inputs=[wp.array(seg, dtype=wp.vec3), r])
    d1, d2 = seg[:, 1] - seg[:, 0], seg[:, 3] - seg[:, 2]
    sin2 = np.sum(np.cross(d1, d2) ** 2, 1) / (np.sum(d1 * d1, 1) * np.sum(d2 * d2, 1))
    st = r.numpy()[:, :2]
    away = np.all((np.abs(st) > 0.02) & (np.abs(st - 1) > 0.02) | (st == 0) | (st == 1), axis=1)
    seg = seg[away & (sin2 > 0.05)]
    assert len(seg) > 100
    h = 1e-3
    for w in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        g = _edge_edge_gradients(seg, np.array(w, np.float32))
        fd = np.zeros_like(seg, dtype=np.float64)
        for j in range(4):
            for c in range(3):
                plus, minus = seg.astype(np.float64), seg.astype(np.float64)
                plus[:, j, c] += h
                minus[:, j, c] -= h
                f = []
                for x in (plus, minus):
                    o = wp.zeros(len(seg))
                    wp.launch(edge_edge_probe, len(seg), inputs=[wp.array(x.astype(np.float32), dtype=wp.vec3),
                                                                   wp.vec3(*w), o])
                    f.append(o.numpy().astype(np.float64))
                fd[:, j, c] = (f[0] - f[1]) / (2 * h)
        # (a clamp crossed by the step shows as a kink in a few samples)
        assert np.mean(np.abs(g - fd) < 5e-2 * (1.0 + np.abs(fd))) > 0.97
    p1 = rng.standard_normal((200, 3)).astype(np.float32)
    d = rng.standard_normal((200, 3)).astype(np.float32)
    tilt = (10.0 ** rng.uniform(-7, -2, 200))[:, None] * rng.standard_normal((200, 3))
    near = np.stack([p1, p1 + d, p1 + 0.3, p1 + 0.3 + 1.5 * d + tilt], axis=1).astype(np.float32)
    g = _edge_edge_gradients(near, np.array((0.0, 0.0, 1.0), np.float32))
    assert np.all(np.isfinite(g)) and np.abs(g).max() <= 1.0 + 1e-4
