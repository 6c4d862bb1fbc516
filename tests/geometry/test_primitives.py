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
