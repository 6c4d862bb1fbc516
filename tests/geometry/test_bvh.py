"""wp.Bvh: box, ray, sphere and capsule queries in kernels against brute force, refits, rebuilds, groups,
freed handles and bad input."""

import gc

import numpy as np
import pytest

import loomwork as wp

AABB, RAY, SPHERE, CAPSULE = 0, 1, 2, 3


@wp.kernel
def query(bvh: wp.uint64, kind: int, a: wp.vec3, b: wp.vec3, radius: float, max_dist: float, root: int,
          hits: wp.array(dtype=int)):
    # one query variable for every kind: the kind is chosen at run time
    if kind == 0:
        q = wp.bvh_query_aabb(bvh, a, b, root)
    elif kind == 1:
        q = wp.bvh_query_ray(bvh, a, b, root)
    elif kind == 2:
        q = wp.bvh_query_sphere(bvh, a, radius, root)
    else:
        q = wp.bvh_query_capsule(bvh, a, b, radius, root)
    i = 0
    while wp.bvh_query_next(q, i, max_dist):
        hits[i] += 1


@wp.kernel
def group_roots(bvh: wp.uint64, roots: wp.array(dtype=int)):
    g = wp.tid()
    roots[g] = wp.bvh_get_group_root(bvh, g)


def run(bvh, n, kind, a, b=(0.0, 0.0, 0.0), radius=0.0, max_dist=1e30, root=-1):
    hits = wp.zeros(n, dtype=int)
    wp.launch(query, dim=1, inputs=[bvh, kind, wp.vec3(*a), wp.vec3(*b), radius, max_dist, root, hits])
    return hits.numpy()


def slab(lo, hi, o, d, pad=0.0):
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(d == 0, 1e-30, d)
        t1, t2 = (lo - pad - o) * inv, (hi + pad - o) * inv
    return np.minimum(t1, t2).max(axis=1), np.maximum(t1, t2).min(axis=1)


def expected(kind, lo, hi, a, b, radius, max_dist):
    a, b = np.asarray(a), np.asarray(b)
    if kind == AABB:
        return ~((lo > b).any(1) | (hi < a).any(1))
    if kind == SPHERE:
        return (np.maximum(np.maximum(lo - a, a - hi), 0) ** 2).sum(1) <= radius * radius
    tmin, tmax = slab(lo, hi, a, b, radius if kind == CAPSULE else 0.0)
    if kind == RAY:
        return (tmax >= 0) & (tmax >= tmin) & (tmin <= max_dist)
    return np.maximum(tmin, 0) <= np.minimum(tmax, max_dist)


def random_boxes(rng, n):
    lo = rng.random((n, 3)).astype(np.float32) * 5.0
    return lo, (lo + rng.random((n, 3)) * 2.0).astype(np.float32)


CASES = [(AABB, (2.0, 2.0, 2.0), (4.0, 5.0, 3.0), 0.0, 1e30), (RAY, (0.0, 0.0, 0.0), (0.6, 0.48, 0.64), 0.0, 1e30),
         (RAY, (-1.0, 2.5, 2.5), (1.0, 0.0, 0.0), 0.0, 3.0), (SPHERE, (3.0, 3.0, 3.0), (0, 0, 0), 1.5, 1e30),
         (CAPSULE, (0.0, 0.0, 0.0), (6.0, 6.0, 5.0), 0.5, 1.0)]


@pytest.mark.parametrize("constructor,leaf_size", [("sah", 1), ("median", 1), ("sah", 4)])
def test_queries_match_brute_force_through_refit_and_rebuild(constructor, leaf_size):
    """Every query kind visits exactly the boxes it touches, each once; also after refit() and rebuild()."""
    rng = np.random.default_rng(7)
    n = 300
    lo, hi = random_boxes(rng, n)
    lowers, uppers = wp.array(lo, dtype=wp.vec3), wp.array(hi, dtype=wp.vec3)
    bvh = wp.Bvh(lowers, uppers, constructor=constructor, leaf_size=leaf_size)
    for step in ("built", "refit", "rebuild"):
        if step != "built":
            lo, hi = random_boxes(rng, n)
            lowers.numpy()[:], uppers.numpy()[:] = lo, hi
            bvh.refit() if step == "refit" else bvh.rebuild()
        for kind, a, b, radius, max_dist in CASES:
            got = run(bvh.id, n, kind, a, b, radius, max_dist)
            want = expected(kind, lo, hi, a, b, radius, max_dist)
            assert want.any() and not want.all()
            np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=f"{step} kind {kind}")


def test_groups_restrict_queries_to_their_subtree():
    """Boxes in groups: bvh_get_group_root gives each group's subtree, and queries from it see only that group."""
    rng = np.random.default_rng(1)
    n = 200
    lo, hi = random_boxes(rng, n)
    groups = rng.integers(0, 5, n).astype(np.int32)
    groups[groups == 3] = 7  # ids need not be contiguous: 3 is missing
    bvh = wp.Bvh(wp.array(lo, dtype=wp.vec3), wp.array(hi, dtype=wp.vec3), groups=wp.array(groups, dtype=wp.int32))
    roots = wp.zeros(8, dtype=int)
    wp.launch(group_roots, dim=8, inputs=[bvh, roots])
    roots = roots.numpy()
    assert roots[3] == -1 and roots[5] == -1 and (roots[[0, 1, 2, 4, 7]] >= 0).all()
    everything = ((-1.0, -1.0, -1.0), (10.0, 10.0, 10.0))
    for g in (0, 1, 2, 4, 7):
        np.testing.assert_array_equal(run(bvh.id, n, AABB, *everything, root=int(roots[g])), groups == g)
    np.testing.assert_array_equal(run(bvh.id, n, AABB, *everything, root=-1), np.ones(n))


def test_skewed_boxes_keep_the_tree_shallow():
    """Exponentially spaced boxes (which SAH splits one at a time) still give a tree the query stacks hold."""
    n = 3000
    x = np.exp(np.linspace(-70.0, 0.0, n)).astype(np.float32)
    lo = np.zeros((n, 3), np.float32)
    hi = np.ones((n, 3), np.float32)
    lo[:, 0], hi[:, 0] = x, x * np.float32(1.001)
    bvh = wp.Bvh(wp.array(lo, dtype=wp.vec3), wp.array(hi, dtype=wp.vec3), leaf_size=1)
    assert bvh._tree.depth == 31  # SAH peels boxes off one by one until the depth cap forces medians
    assert run(bvh.id, n, AABB, (-2.0, -1.0, -1.0), (2.0, 2.0, 2.0)).sum() == n


def test_freed_ids_find_nothing():
    """A query on the id of a freed Bvh visits nothing instead of reading freed memory."""
    lo = np.zeros((4, 3), np.float32)
    hi = np.ones((4, 3), np.float32)
    bvh = wp.Bvh(wp.array(lo, dtype=wp.vec3), wp.array(hi, dtype=wp.vec3))
    stale = bvh.id
    assert run(stale, 4, AABB, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)).sum() == 4
    del bvh
    gc.collect()
    assert run(stale, 4, AABB, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)).sum() == 0


def test_bad_input_is_a_clear_error():
    """Mismatched lengths, wrong dtypes, NaN bounds, inverted boxes, bad groups, leaf sizes and constructors."""
    lo = wp.zeros(3, dtype=wp.vec3)
    hi = wp.ones(3, dtype=wp.vec3)
    with pytest.raises(wp.GeometryError, match="differ in length"):
        wp.Bvh(lo, wp.ones(2, dtype=wp.vec3))
    with pytest.raises(wp.GeometryError, match="wp.vec3"):
        wp.Bvh(wp.zeros(3, dtype=float), hi)
    nan = np.zeros((3, 3), np.float32)
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        wp.Bvh(wp.array(nan, dtype=wp.vec3), hi)
    with pytest.raises(RuntimeError, match="box 0 has lower"):
        wp.Bvh(hi, lo)
    with pytest.raises(wp.GeometryError, match="BVHs: groups has 2 entries for 3 boxes"):
        wp.Bvh(lo, hi, groups=wp.zeros(2, dtype=wp.int32))
    with pytest.raises(wp.GeometryError, match="leaf_size"):
        wp.Bvh(lo, hi, leaf_size=0)
    with pytest.raises(wp.GeometryError, match="unknown BVH constructor"):
        wp.Bvh(lo, hi, constructor="octree")


def test_empty_bvh_answers_nothing():
    """A tree over no boxes is valid and every query on it ends at once."""
    bvh = wp.Bvh(wp.zeros(0, dtype=wp.vec3), wp.zeros(0, dtype=wp.vec3))
    assert run(bvh.id, 1, AABB, (-1.0, -1.0, -1.0), (1.0, 1.0, 1.0)).sum() == 0
    bvh.refit()
