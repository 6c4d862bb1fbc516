"""The shape-shape broad phases: the pair list and the Bvh find the same contacts, keep worlds apart, honour
filters and groups, say when their buffers are too small, and pass gradients through a Tape."""

import math

import numpy as np
import pytest

import loomwork as wp
import loomwork.sim as newton


def jumble(seed: int = 0, count: int = 14) -> newton.ModelBuilder:
    """Shapes of every primitive type dropped close together over a ground plane, some overlapping."""
    rng = np.random.default_rng(seed)
    b = newton.ModelBuilder()
    for i in range(count):
        pos = rng.uniform((-0.6, -0.6, 0.1), (0.6, 0.6, 0.9))
        rot = wp.quat_rpy(*rng.uniform(-math.pi, math.pi, 3))
        body = b.add_body(xform=wp.transform(wp.vec3(*pos), rot))
        kind = i % 4
        if kind == 0:
            b.add_shape_sphere(body, radius=0.15)
        elif kind == 1:
            b.add_shape_box(body, hx=0.2, hy=0.1, hz=0.15)
        elif kind == 2:
            b.add_shape_capsule(body, radius=0.08, half_height=0.2)
        else:
            b.add_shape_cylinder(body, radius=0.12, half_height=0.1)
    b.add_shape_box(-1, xform=wp.transform((0.0, 0.0, 0.05), wp.quat_identity()), hx=0.3, hy=0.3, hz=0.05)
    return b


def found(model, state, broad_phase, **kwargs):
    """The contacts as a sorted list of (shape0, shape1, point0, point1, normal) rows."""
    pipeline = newton.CollisionPipeline(model, broad_phase=broad_phase, **kwargs)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    return pipeline, rows_of(contacts)


def test_bvh_and_pair_list_find_the_same_contacts_in_many_worlds():
    world = jumble()
    b = newton.ModelBuilder()
    b.replicate(world, 3)  # three copies in one place: worlds must not see each other
    b.add_ground_plane()
    m = b.finalize()
    state = m.state()
    explicit, rows_e = found(m, state, "explicit")
    bvh, rows_b = found(m, state, "bvh")
    assert explicit.broad_phase == "explicit" and bvh.broad_phase == "bvh"
    assert len(rows_e) > 20
    np.testing.assert_allclose(rows_b, rows_e, atol=1e-5)
    shape_world = m.shape_world.numpy()
    w0, w1 = shape_world[rows_b[:, 0].astype(int)], shape_world[rows_b[:, 1].astype(int)]
    assert np.all((w0 == w1) | (w0 < 0) | (w1 < 0))
    # each world alone gives the same contacts as the first copy
    single = jumble()
    single.add_ground_plane()
    ms = single.finalize()
    _, rows_s = found(ms, ms.state(), "bvh")
    assert len(rows_b) == 3 * len(rows_s)


def test_filters_and_groups_are_honoured_by_both_broad_phases():
    b = newton.ModelBuilder()
    bodies = [b.add_body(xform=wp.transform((0.1 * i, 0.0, 0.5), wp.quat_identity())) for i in range(4)]
    s = [b.add_shape_sphere(body, radius=0.2) for body in bodies]
    b.add_shape_collision_filter_pair(s[0], s[1])
    b.shape_collision_group[s[3]] = 2  # meets only group 2 and negative groups
    b.shape_collision_group[s[2]] = -1  # meets every group
    m = b.finalize()
    pairs = set()
    for mode in ("explicit", "bvh"):
        _, rows = found(m, m.state(), mode)
        got = {tuple(sorted(map(int, r[:2]))) for r in rows}
        pairs.add(frozenset(got))
        assert got == {(0, 2), (1, 2), (2, 3)}, mode
    assert len(pairs) == 1


def test_default_picks_the_tree_for_a_crowded_world_and_the_list_for_small_worlds():
    crowded = jumble(count=40).finalize()
    assert newton.CollisionPipeline(crowded).broad_phase == "bvh"
    b = newton.ModelBuilder()
    b.replicate(jumble(count=3), 16)
    assert newton.CollisionPipeline(b.finalize()).broad_phase == "explicit"
    with pytest.raises(ValueError, match="broad_phase"):
        newton.CollisionPipeline(crowded, broad_phase="octree")


def test_too_small_a_pair_buffer_is_an_error_that_names_the_fix():
    m = jumble(count=20).finalize()
    with pytest.raises(RuntimeError, match="shape_pairs_max="):
        found(m, m.state(), "bvh", shape_pairs_max=2)


def rows_of(contacts):
    n = int(contacts.rigid_contact_count.numpy()[0])
    rows = np.concatenate([contacts.rigid_contact_shape0.numpy()[:n, None],
                           contacts.rigid_contact_shape1.numpy()[:n, None], contacts.rigid_contact_point0.numpy()[:n],
                           contacts.rigid_contact_point1.numpy()[:n],
                           contacts.rigid_contact_normal.numpy()[:n]], axis=1).astype(np.float64)
    return rows[np.lexsort(np.round(rows.T[::-1], 5))]


def test_the_tree_keeps_finding_the_pair_lists_contacts_as_a_pile_settles():
    """Over a rollout the tree is refitted every step and rebuilt every 64: at each step it finds the
    contacts the pair list finds in the same state. (The trajectories themselves drift apart: the contacts come
    in another order, and the pile amplifies rounding.)"""
    b = jumble(seed=3, count=10)
    b.add_ground_plane()
    m = b.finalize()
    explicit = newton.CollisionPipeline(m, broad_phase="explicit")
    bvh = newton.CollisionPipeline(m, broad_phase="bvh")
    solver = newton.solvers.SolverXPBD(m, iterations=4)
    c_explicit, c_bvh = explicit.contacts(), bvh.contacts()
    s0, s1 = m.state(), m.state()
    for t in range(150):
        explicit.collide(s0, c_explicit)
        bvh.collide(s0, c_bvh)
        if t % 10 == 9:
            np.testing.assert_allclose(rows_of(c_bvh), rows_of(c_explicit), atol=1e-5, err_msg=f"step {t}")
        solver.step(s0, s1, None, c_bvh, 1.0 / 120)
        s0, s1 = s1, s0
    assert np.all(s0.body_q.numpy()[:, 2] > 0.07)  # nothing fell through the ground


@wp.kernel
def _point_sum(point0: wp.array(dtype=wp.vec3), count: wp.array(dtype=wp.int32), loss: wp.array(dtype=float)):
    i = wp.tid()
    if i < count[0]:
        wp.atomic_add(loss, 0, point0[i][0] + point0[i][1] + point0[i][2])


def test_gradients_flow_through_the_tree_broad_phase():
    """Contacts found through the tree carry gradients to the body poses like the pair list's (the pair
    buffer lives with the contacts, so a Tape's backward reads this step's pairs)."""
    def build():
        b = newton.ModelBuilder()
        top = b.add_body(xform=wp.transform((0.05, 0.02, 0.39), wp.quat_identity()))
        b.add_shape_sphere(top, radius=0.2)
        b.add_shape_box(-1, hx=0.2, hy=0.2, hz=0.2)  # the sphere probes it: point0 is the box's point below it
        return b.finalize(requires_grad=True)

    grads = []
    for mode in ("explicit", "bvh"):
        m = build()
        state = m.state(requires_grad=True)
        pipeline = newton.CollisionPipeline(m, broad_phase=mode, requires_grad=True)
        contacts = pipeline.contacts()
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            pipeline.collide(state, contacts)
            wp.launch(_point_sum, dim=contacts.rigid_contact_max,
                      inputs=[contacts.rigid_contact_point0, contacts.rigid_contact_count], outputs=[loss])
        assert int(contacts.rigid_contact_count.numpy()[0]) >= 1
        tape.backward(loss)
        grads.append(state.body_q.grad.numpy()[0].copy())
    np.testing.assert_allclose(grads[0][:3], (1.0, 1.0, 0.0), atol=1e-5)  # the point below follows the sphere
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_the_narrow_phase_uses_each_pairs_exact_routine():
    """A box resting face down on a wider box touches at its face's four corners, a capsule lying on it at its
    two ends, and a capsule across another at one point, each with the normal of the touching faces."""
    b = newton.ModelBuilder()
    b.add_shape_box(-1, hx=1.0, hy=1.0, hz=0.5)
    box = b.add_body(xform=wp.transform((0.3, 0.0, 0.699), wp.quat_rpy(0.0, 0.0, 0.4)))
    b.add_shape_box(box, hx=0.2, hy=0.1, hz=0.2)
    capsule = b.add_body(xform=wp.transform((-0.5, 0.5, 0.599), wp.quat_rpy(0.0, math.pi / 2, 0.0)))
    b.add_shape_capsule(capsule, radius=0.1, half_height=0.3)
    across = b.add_body(xform=wp.transform((-0.5, 0.5, 0.798), wp.quat_rpy(math.pi / 2, 0.0, 0.0)))
    b.add_shape_capsule(across, radius=0.1, half_height=0.3)
    m = b.finalize()
    for mode in ("explicit", "bvh"):
        _, rows = found(m, m.state(), mode)
        pairs = [tuple(sorted(map(int, r[:2]))) for r in rows]
        assert pairs.count((0, 1)) == 4 and pairs.count((0, 2)) == 2 and pairs.count((2, 3)) == 1, (mode, pairs)
        assert np.allclose(np.abs(rows[:, 8:11]), (0.0, 0.0, 1.0), atol=1e-4)


def test_models_deprecated_collide_uses_a_default_pipeline():
    """Newton 1.8 programs that still call ``model.collide(state)`` get contacts, with a DeprecationWarning."""
    m = jumble(count=6).finalize()
    with pytest.warns(DeprecationWarning, match="CollisionPipeline"):
        contacts = m.collide(m.state())
    with pytest.warns(DeprecationWarning):
        again = m.collide(m.state(), m.contacts())
    n = int(contacts.rigid_contact_count.numpy()[0])
    assert n > 0 and int(again.rigid_contact_count.numpy()[0]) == n


def test_a_given_pair_list_replaces_the_pipelines_own():
    """Newton's ``shape_pairs_filtered``: only the given pairs are tested; bad indices are an IndexError."""
    m = jumble(count=8).finalize()
    _, rows = found(m, m.state(), "explicit")
    touching = sorted({tuple(sorted(map(int, r[:2]))) for r in rows})
    assert len(touching) >= 2
    _, only = found(m, m.state(), None, shape_pairs_filtered=np.array([touching[0]], np.int32))
    assert {tuple(sorted(map(int, r[:2]))) for r in only} == {touching[0]}
    with pytest.raises(IndexError, match="pair list names shape 99"):
        newton.CollisionPipeline(m, shape_pairs_filtered=[(0, 99)])
    with pytest.raises(ValueError, match="explicit"):
        newton.CollisionPipeline(m, shape_pairs_filtered=[(0, 1)], broad_phase="bvh")


def test_the_models_pair_list_and_contact_capacities_steer_the_pipeline():
    """As in Newton: ``model.shape_contact_pairs`` is the explicit broad phase's list (assign it to change the
    pairs), and ``model.rigid_contact_max`` sizes the buffers when the pipeline is given no size."""
    m = jumble(count=8).finalize()
    pairs = m.shape_contact_pairs.numpy()
    assert m.shape_contact_pair_count == len(pairs) > 0
    _, rows = found(m, m.state(), "explicit")
    assert {tuple(sorted(map(int, r[:2]))) for r in rows} <= {tuple(sorted(p)) for p in pairs}
    first = sorted({tuple(sorted(map(int, r[:2]))) for r in rows})[0]
    m.shape_contact_pairs = wp.array([first], dtype=wp.vec2i)
    m.rigid_contact_max = 123
    pipeline, only = found(m, m.state(), "explicit")
    assert {tuple(sorted(map(int, r[:2]))) for r in only} == {first} and pipeline.rigid_contact_max == 123
