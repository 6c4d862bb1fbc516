"""Narrow-phase routines (loomwork.sim.narrow_phase): contact slots of capsule-capsule, capsule-box and box-box
pairs in resting, crossing, clipped, degenerate and separated configurations, and separation gradients
against finite differences. All configurations run in one launch of one kernel."""

import numpy as np
import pytest

import loomwork as wp
from loomwork.sim.narrow_phase import ContactPoint, box_box_contact, capsule_box_contact, capsule_capsule_contact

CAPSULE_CAPSULE = 0
CAPSULE_BOX = 1
BOX_BOX = 2
SLOTS = 8
GAP = 0.01
RANDOM_COUNT = 40  # random configurations of each pair kind


@wp.kernel
def contacts_kernel(kind: wp.array(dtype=wp.int32), x0: wp.array(dtype=wp.transform),
                    x1: wp.array(dtype=wp.transform), size0: wp.array(dtype=wp.vec3),
                    size1: wp.array(dtype=wp.vec3), gap: float, valid: wp.array2d(dtype=wp.int32),
                    point0: wp.array2d(dtype=wp.vec3), point1: wp.array2d(dtype=wp.vec3),
                    normal: wp.array2d(dtype=wp.vec3), separation: wp.array2d(dtype=float)):
    i, k = wp.tid()
    cp = ContactPoint()
    cp.valid = 0
    if kind[i] == CAPSULE_CAPSULE:
        if k < 2:
            cp = capsule_capsule_contact(x0[i], size0[i][0], size0[i][1], x1[i], size1[i][0], size1[i][1], k, gap)
    elif kind[i] == CAPSULE_BOX:
        if k < 2:
            cp = capsule_box_contact(x0[i], size0[i][0], size0[i][1], x1[i], size1[i], k, gap)
    else:
        cp = box_box_contact(x0[i], size0[i], x1[i], size1[i], k, gap)
    valid[i, k] = cp.valid
    point0[i, k] = cp.point0
    point1[i, k] = cp.point1
    normal[i, k] = cp.normal
    separation[i, k] = wp.dot(cp.normal, cp.point1 - cp.point0) - cp.margin0 - cp.margin1


def quat(axis, angle):
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    return [*(axis * np.sin(angle / 2)), np.cos(angle / 2)]


def qmul(a, b):
    av, aw, bv, bw = np.array(a[:3]), a[3], np.array(b[:3]), b[3]
    return [*(aw * bv + bw * av + np.cross(av, bv)), aw * bw - av @ bv]


ID = [0.0, 0.0, 0.0, 1.0]
ALONG_X = quat((0, 1, 0), np.pi / 2)  # a capsule's axis turned from Z onto X
ALONG_Y = quat((1, 0, 0), np.pi / 2)
# A cube standing on a corner: its diagonal (1, 1, 1) turned onto -Z.
_DIAG = np.array([1.0, 1.0, 1.0]) / np.sqrt(3)
ON_CORNER = quat(np.cross(_DIAG, (0, 0, -1)), np.arccos(-_DIAG[2]))
S3 = np.sqrt(3.0)
S2 = np.sqrt(2.0)
_TILT = np.arctan2(0.3, 1.0)  # a capsule whose lower end lies inside a box, near its +X face

# name: (kind, position 0, rotation 0, size 0, position 1, rotation 1, size 1). Capsule size: (radius, half
# height, 0); box size: half-extents. Every penetrating case penetrates 1 mm.
CASES = {
    "box_on_box": (BOX_BOX, (0, 0, 0), ID, (1, 1, 0.5), (0.1, 0, 0.599), ID, (0.2, 0.3, 0.1)),
    "box_on_box_45": (BOX_BOX, (0, 0, 0), ID, (1, 1, 0.5), (0, 0, 0.599), quat((0, 0, 1), np.pi / 4),
                      (0.2, 0.3, 0.1)),
    "box_under_box": (BOX_BOX, (0, 0, 0.599), ID, (0.2, 0.3, 0.1), (0, 0, 0), ID, (1, 1, 0.5)),
    "box_over_edge": (BOX_BOX, (0, 0, 0), ID, (1, 1, 0.5), (1.0, 0, 0.599), ID, (0.2, 0.2, 0.1)),
    "equal_boxes_stacked": (BOX_BOX, (0, 0, 0), ID, (0.5, 0.5, 0.5), (0, 0, 0.999), ID, (0.5, 0.5, 0.5)),
    "box_on_corner": (BOX_BOX, (0, 0, 0), ID, (1, 1, 0.5), (0, 0, 0.5 + 0.2 * S3 - 0.001), ON_CORNER,
                      (0.2, 0.2, 0.2)),
    "corner_on_box": (BOX_BOX, (0.1, 0.2, 0.5 + 0.2 * S3 - 0.001), ON_CORNER, (0.2, 0.2, 0.2), (0, 0, 0), ID,
                      (1, 1, 0.5)),
    "boxes_octagon": (BOX_BOX, (0, 0, 0), ID, (0.5, 0.5, 0.5), (0, 0, 0.999), quat((0, 0, 1), np.pi / 4),
                      (0.5, 0.5, 0.5)),
    "boxes_edge_to_edge": (BOX_BOX, (0, 0, 0), quat((1, 0, 0), np.pi / 4), (0.5, 0.2, 0.2),
                           (0, 0, 0.4 * S2 - 0.001), quat((0, 1, 0), np.pi / 4), (0.2, 0.5, 0.2)),
    "boxes_apart": (BOX_BOX, (0, 0, 0), ID, (0.5, 0.5, 0.5), (1.2, 0.3, 0), quat((0, 0, 1), 0.3),
                    (0.5, 0.5, 0.5)),
    "capsules_crossed": (CAPSULE_CAPSULE, (0, 0, 0), ALONG_X, (0.1, 0.5, 0), (0.1, 0.05, 0.199), ALONG_Y,
                         (0.1, 0.5, 0)),
    "capsules_parallel": (CAPSULE_CAPSULE, (0, 0, 0), ALONG_X, (0.1, 0.5, 0), (0.3, 0, 0.199), ALONG_X,
                          (0.1, 0.5, 0)),
    "capsules_end_to_end": (CAPSULE_CAPSULE, (0, 0, 0), ALONG_X, (0.1, 0.5, 0), (1.199, 0, 0), ALONG_X,
                            (0.1, 0.5, 0)),
    "spheres": (CAPSULE_CAPSULE, (0, 0, 0), ID, (0.1, 0, 0), (0.1, 0.1, 0.1), ID, (0.1 * S3 - 0.099, 0, 0)),
    "capsule_on_box": (CAPSULE_BOX, (0, 0.2, 0.599), ALONG_X, (0.1, 0.5, 0), (0, 0, 0), ID, (1, 1, 0.5)),
    "capsule_over_box_edge": (CAPSULE_BOX, (1.0, 0, 0.599), ALONG_X, (0.1, 0.5, 0), (0, 0, 0), ID, (1, 1, 0.5)),
    "capsule_tilted_on_box": (CAPSULE_BOX, (0, 0, 0.599 + 0.5 * np.sin(0.3)), quat((0, 1, 0), np.pi / 2 - 0.3),
                              (0.1, 0.5, 0), (0, 0, 0), ID, (1, 1, 0.5)),
    "capsule_into_box": (CAPSULE_BOX, (0.3 + 0.5 * np.sin(_TILT), 0, 0.1 + 0.5 * np.cos(_TILT)),
                         quat((0, 1, 0), _TILT), (0.1, 0.5, 0), (0, 0, 0), ID, (0.5, 0.5, 0.5)),
    "capsule_inside_box_top": (CAPSULE_BOX, (0, 0, 0.4), ALONG_X, (0.1, 0.5, 0), (0, 0, 0), ID, (1, 1, 0.5)),
    "capsule_across_box_edge": (CAPSULE_BOX, (1.0 + 0.099 / S2, 0, 0.5 + 0.099 / S2), quat((0, 1, 0), 0.75 * np.pi),
                                (0.1, 0.5, 0), (0, 0, 0), ID, (1, 1, 0.5)),
    # Generic configurations for the gradient check (each away from feature switches).
    "grad_box_box": (BOX_BOX, (0.02, -0.01, 0.0), quat((1, 2, 0.5), 0.02), (1, 1, 0.5), (0.9, 0.1, 0.58),
                     qmul(quat((0, 0, 1), 0.4), quat((1, 0, 0), 0.01)), (0.2, 0.3, 0.1)),
    "grad_box_under": (BOX_BOX, (0.9, 0.1, 0.58), qmul(quat((0, 0, 1), 0.4), quat((1, 0, 0), 0.01)), (0.2, 0.3, 0.1),
                       (0.02, -0.01, 0.0), quat((1, 2, 0.5), 0.02), (1, 1, 0.5)),
    "grad_edges": (BOX_BOX, (0, 0, 0), quat((1, 0.1, 0), np.pi / 4), (0.5, 0.2, 0.2), (0.03, 0.02, 0.55),
                   qmul(quat((0, 0, 1), 0.2), quat((0, 1, 0), np.pi / 4)), (0.2, 0.5, 0.2)),
    "grad_capsules": (CAPSULE_CAPSULE, (0, 0, 0), qmul(quat((0, 0, 1), 0.7), ALONG_X), (0.1, 0.5, 0),
                      (0.1, 0.05, 0.18), qmul(quat((1, 0, 0), 0.2), ALONG_Y), (0.12, 0.4, 0)),
    "grad_capsule_box": (CAPSULE_BOX, (0.1, 0.2, 0.62), qmul(quat((0, 0, 1), 0.3), quat((0, 1, 0), 1.2)),
                         (0.1, 0.5, 0), (0, 0, 0), quat((1, 1, 0), 0.1), (1, 1, 0.5)),
}
NAMES = list(CASES)


def arrays(cases, requires_grad=False, gap=GAP):
    kind = wp.array([c[0] for c in cases], dtype=wp.int32)
    x0 = wp.array([[*c[1], *c[2]] for c in cases], dtype=wp.transform, requires_grad=requires_grad)
    x1 = wp.array([[*c[4], *c[5]] for c in cases], dtype=wp.transform, requires_grad=requires_grad)
    size0 = wp.array([c[3] for c in cases], dtype=wp.vec3)
    size1 = wp.array([c[6] for c in cases], dtype=wp.vec3)
    n = len(cases)
    out = (wp.zeros((n, SLOTS), dtype=wp.int32), wp.zeros((n, SLOTS), dtype=wp.vec3),
           wp.zeros((n, SLOTS), dtype=wp.vec3), wp.zeros((n, SLOTS), dtype=wp.vec3),
           wp.zeros((n, SLOTS), dtype=float, requires_grad=requires_grad))
    return (kind, x0, x1, size0, size1, gap, *out)


def launch(args):
    wp.launch(contacts_kernel, dim=(len(args[0]), SLOTS), inputs=list(args))


@pytest.fixture(scope="module")
def found():
    """Each case's valid contacts: (point0, point1, normal, separation) arrays, one row per valid slot; the
    valid slots come first."""
    args = arrays(CASES.values())
    launch(args)
    valid, p0, p1, n, sep = (a.numpy() for a in args[6:])
    result = {}
    for i, name in enumerate(NAMES):
        v = valid[i] == 1
        assert not v[v.sum():].any(), f"{name}: valid slots {np.flatnonzero(v)} are not the first ones"
        result[name] = (p0[i][v], p1[i][v], n[i][v], sep[i][v])
    return result


def check(found, name, count, normal=None, separation=-0.001, tol=2e-5):
    p0, p1, n, sep = found[name]
    assert len(sep) == count, f"{name}: {len(sep)} contacts, expected {count}"
    assert np.allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-5)
    # Normals point from shape 0 toward shape 1.
    c0, c1 = np.array(CASES[name][1]), np.array(CASES[name][4])
    assert (n @ (c1 - c0) > 0).all(), f"{name}: normals {n} do not point from shape 0 to shape 1"
    if normal is not None:
        assert np.allclose(n, normal, atol=1e-5), f"{name}: normals {n}"
    if separation is not None:
        assert np.allclose(sep, separation, atol=tol), f"{name}: separations {sep}"
    return p0, p1


def same_points(a, b, atol=2e-5):
    """a and b hold the same points in any order."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return len(a) == len(b) and all(np.abs(b - p).max(axis=1).min() < atol for p in a)


def test_box_resting_on_a_bigger_box_face_to_face(found):
    p0, p1 = check(found, "box_on_box", 4, normal=(0, 0, 1))
    corners = [(0.1 + x, y, 0.499) for x in (-0.2, 0.2) for y in (-0.3, 0.3)]
    assert same_points(p1, corners)
    assert np.allclose(p0[:, 2], 0.5, atol=1e-6)  # on the bigger box's top face
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    p0, p1 = check(found, "box_on_box_45", 4, normal=(0, 0, 1))
    assert same_points(p1, [(c * x - s * y, s * x + c * y, 0.499) for x in (-0.2, 0.2) for y in (-0.3, 0.3)])
    p0, p1 = check(found, "box_under_box", 4, normal=(0, 0, -1))
    assert same_points(p0, [(x, y, 0.499) for x in (-0.2, 0.2) for y in (-0.3, 0.3)])
    p0, p1 = check(found, "equal_boxes_stacked", 4, normal=(0, 0, 1))  # flush sides: no repeated corners
    assert same_points(p0, [(x, y, 0.5) for x in (-0.5, 0.5) for y in (-0.5, 0.5)])


def test_box_over_an_edge_is_clipped_to_the_face(found):
    p0, p1 = check(found, "box_over_edge", 4, normal=(0, 0, 1))
    assert same_points(p1, [(x, y, 0.499) for x in (0.8, 1.0) for y in (-0.2, 0.2)])
    # A cube turned 45 degrees on an equal one: the two squares overlap in an octagon.
    p0, p1 = check(found, "boxes_octagon", 8, normal=(0, 0, 1))
    t = np.sqrt(2.0) - 1.0  # the octagon's corners lie at (0.5, 0.5 t) and its mirror images
    octagon = [(sx * a, sy * b, 0.5) for sx in (-1, 1) for sy in (-1, 1) for a, b in ((0.5, 0.5 * t), (0.5 * t, 0.5))]
    assert same_points(p0, octagon)


def test_box_standing_on_a_corner_touches_once(found):
    p0, p1 = check(found, "box_on_corner", 1, normal=(0, 0, 1))
    assert same_points(p1, [(0, 0, 0.499)]) and same_points(p0, [(0, 0, 0.5)])
    p0, p1 = check(found, "corner_on_box", 1, normal=(0, 0, -1))  # box 1 owns the face: points swap roles
    assert same_points(p0, [(0.1, 0.2, 0.499)]) and same_points(p1, [(0.1, 0.2, 0.5)])


def test_boxes_crossing_edge_to_edge_touch_at_the_edges_closest_points(found):
    p0, p1 = check(found, "boxes_edge_to_edge", 1, normal=(0, 0, 1))
    assert same_points(p0, [(0, 0, 0.2 * S2)]) and same_points(p1, [(0, 0, 0.2 * S2 - 0.001)])


def test_separated_boxes_have_no_contacts(found):
    assert len(found["boxes_apart"][3]) == 0


def test_capsule_pairs(found):
    p0, p1 = check(found, "capsules_crossed", 1, normal=(0, 0, 1))
    assert same_points(p0, [(0.1, 0, 0)]) and same_points(p1, [(0.1, 0, 0.199)])
    p0, p1 = check(found, "capsules_parallel", 2, normal=(0, 0, 1))  # at both ends of the overlap
    assert same_points(p0, [(-0.2, 0, 0), (0.5, 0, 0)]) and same_points(p1, [(-0.2, 0, 0.199), (0.5, 0, 0.199)])
    p0, p1 = check(found, "capsules_end_to_end", 1, normal=(1, 0, 0))
    assert same_points(p0, [(0.5, 0, 0)]) and same_points(p1, [(0.699, 0, 0)])
    check(found, "spheres", 1, normal=np.ones(3) / S3)


def test_capsule_and_box(found):
    p0, p1 = check(found, "capsule_on_box", 2, normal=(0, 0, -1))  # from the capsule down into the box
    assert same_points(p0, [(-0.5, 0.2, 0.599), (0.5, 0.2, 0.599)])
    assert same_points(p1, [(-0.5, 0.2, 0.5), (0.5, 0.2, 0.5)])
    p0, p1 = check(found, "capsule_over_box_edge", 2, normal=(0, 0, -1))  # clipped to the face
    assert same_points(p0, [(0.5, 0, 0.599), (1.0, 0, 0.599)])
    p0, p1 = check(found, "capsule_tilted_on_box", 1, normal=(0, 0, -1))  # its lower end
    assert same_points(p0, [(-0.5 * np.cos(0.3), 0, 0.599)], atol=1e-4)
    p0, p1 = check(found, "capsule_across_box_edge", 1, normal=(-1 / S2, 0, -1 / S2))
    assert same_points(p1, [(1.0, 0, 0.5)])


def test_capsule_axis_inside_a_box_is_pushed_out_by_its_deepest_point(found):
    # Entering through the top, its lower end deepest: out through the face nearest that end.
    p0, p1 = check(found, "capsule_into_box", 1, normal=(-1, 0, 0), separation=-0.3)
    assert same_points(p0, [(0.3, 0, 0.1)]) and same_points(p1, [(0.5, 0, 0.1)])
    # Lying inside just under the top face: both ends, out through that face.
    p0, p1 = check(found, "capsule_inside_box_top", 2, normal=(0, 0, -1), separation=-0.2)
    assert same_points(p1, [(-0.5, 0, 0.5), (0.5, 0, 0.5)])


def test_separation_gradient_matches_finite_differences():
    """d(separation)/d(either transform: translation and quaternion components) through a Tape, against
    central differences, for every contact of configurations covering each kind of feature pair: clipped face
    vertices of all three kinds (incident corners, reference corners, edge crossings; aligned boxes, whose
    edge cross products vanish, among them), edge-edge, capsule axes crossed and parallel, a capsule across a
    box (one contact) and along a face clipped at its edge (two), two spheres (zero-length axes)."""
    names = ["grad_box_box", "grad_box_under", "box_under_box", "grad_edges", "grad_capsules", "grad_capsule_box",
             "capsules_parallel", "capsule_over_box_edge", "spheres"]
    cases = [CASES[n] for n in names]
    args = arrays(cases, requires_grad=True)
    tape = wp.Tape()
    with tape:
        launch(args)
    valid, sep = args[6].numpy(), args[10].numpy()
    x0, x1 = args[1].numpy(), args[2].numpy()
    for i, name in enumerate(names):
        for k in range(SLOTS):
            if not valid[i, k]:
                continue
            seed = np.zeros((len(names), SLOTS), dtype=np.float32)
            seed[i, k] = 1.0
            tape.backward(grads={args[10]: wp.array(seed, dtype=float)})
            grads = (args[1].grad.numpy()[i].copy(), args[2].grad.numpy()[i].copy())
            tape.zero()
            for which, g in enumerate(grads):
                fd = np.zeros(7)
                for c in range(7):
                    values = []
                    for step in (1e-3, -1e-3):
                        moved = [x0.copy(), x1.copy()]
                        moved[which][i, c] += step
                        probe = arrays(cases)
                        probe[1].assign(moved[0])
                        probe[2].assign(moved[1])
                        launch(probe)
                        values.append(probe[10].numpy()[i, k])
                    fd[c] = (values[0] - values[1]) / 2e-3
                assert np.allclose(g, fd, atol=2e-3), f"{name} slot {k} shape {which}: tape {g}, differences {fd}"
        assert valid[i].any(), f"{name}: no contact to differentiate"
    assert sep.min() < 0.0


def rotation(q):
    """The rotation matrix of quaternion q (x, y, z, w)."""
    return np.array(wp.quat_to_matrix(wp.quat(*map(float, q))), dtype=np.float64).reshape(3, 3)


def box_sdf(h, p):
    """Signed distance of local points p (n, 3) to a box of half-extents h."""
    q = np.abs(p) - h
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


def segment_distance(a, b, p):
    """Distance of points p (n, 3) to segment ab."""
    d = b - a
    t = np.clip((p - a) @ d / max(d @ d, 1e-20), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[:, None] * d), axis=1)


def box_separation(c0, q0, h0, c1, q1, h1):
    """The largest separation of two boxes over the 15 axes of the separating-axis test."""
    c0, c1, h0, h1 = (np.asarray(v, dtype=float) for v in (c0, c1, h0, h1))
    r0, r1 = rotation(q0), rotation(q1)
    axes = [*r0.T, *r1.T] + [np.cross(a, b) for a in r0.T for b in r1.T]
    axes = [a / np.linalg.norm(a) for a in axes if np.linalg.norm(a) > 1e-3]
    return max(along(a, c1 - c0, r0, h0, r1, h1) for a in axes)


def along(a, d, r0, h0, r1, h1):
    """Separation of two boxes (center offset d, rotations r0, r1, half-extents h0, h1) along unit axis a."""
    return abs(a @ d) - np.abs(r0.T @ a) @ h0 - np.abs(r1.T @ a) @ h1


def axis_unit(j):
    return np.eye(3)[j]


def random_cases(seed=3, count=RANDOM_COUNT):
    """Random capsule-capsule, capsule-box and box-box configurations, each kind with a quarter more lying on
    each other (nearly parallel capsules, a capsule along a box face, a box nearly flat on a box face); the
    boxes at separations from -0.1 to 0.03, and each box-box one again with its shapes swapped."""
    rng = np.random.default_rng(seed)

    def rot():
        q = rng.normal(size=4)
        return list(q / np.linalg.norm(q))

    def tilt(q, angle):  # q turned by up to angle about a random axis
        return qmul(q, quat(rng.normal(size=3), rng.uniform(-angle, angle)))

    cases = []
    for i in range(count + count // 4):
        r0, r1 = rng.uniform(0.05, 0.2, 2)
        hh0, hh1 = rng.uniform(0.0, 0.6, 2) * (rng.uniform(size=2) > 0.15)  # some spheres
        q0, c1, q1 = rot(), rng.uniform(-0.6, 0.6, 3), rot()
        if i >= count:  # one lying on the other
            hh0, hh1, q1 = max(hh0, 0.1), max(hh1, 0.1), tilt(q0, 0.015)
            axis = rotation(q0)[:, 2]
            side = np.cross(axis, rng.normal(size=3))
            c1 = axis * rng.uniform(-1, 1) + side / np.linalg.norm(side) * (r0 + r1 + rng.uniform(-0.02, 0.01))
        cases.append((CAPSULE_CAPSULE, (0, 0, 0), q0, (r0, hh0, 0), c1, q1, (r1, hh1, 0)))
    for i in range(count + count // 4):
        h, r, hh, q1 = rng.uniform(0.1, 0.8, 3), rng.uniform(0.05, 0.2), rng.uniform(0.0, 0.6), rot()
        c0, q0 = rng.uniform(-1, 1, 3) * (h + 0.3), rot()
        if i >= count:  # lying on a face, maybe over its edge
            j = int(rng.integers(3))
            local = rng.uniform(-1, 1, 3) * h
            local[j] = h[j] + r + rng.uniform(-0.02, 0.01)
            c0 = rotation(q1) @ local
            q0 = tilt(qmul(q1, [ALONG_X, ALONG_Y, ALONG_X][j]), 0.015)
            hh = max(hh, 0.1)
        cases.append((CAPSULE_BOX, c0, q0, (r, hh, 0), (0, 0, 0), q1, h))
    boxes = []
    for i in range(count + count // 4):
        h0, h1, q0, q1 = rng.uniform(0.1, 0.6, 3), rng.uniform(0.1, 0.6, 3), rot(), rot()
        direction = rng.normal(size=3)
        if i >= count:  # one resting on the other's face, a little tilted, turned about the face normal
            j = int(rng.integers(3))
            q1 = tilt(qmul(q0, quat(axis_unit(j), rng.uniform(-np.pi, np.pi))), 0.02)
            direction = rotation(q0)[:, j] + rng.normal(size=3) * 0.3 * h0.min()
        direction /= np.linalg.norm(direction)
        target, lo, hi = rng.uniform(-0.1, 0.03), 0.0, 3.0
        for _ in range(40):  # the separation grows with the distance along a direction: bisect to the target
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if box_separation((0, 0, 0), q0, h0, direction * mid, q1, h1) < target else (lo, mid)
        boxes.append((BOX_BOX, (0, 0, 0), q0, h0, direction * lo, q1, h1))
    return cases + boxes + [(c[0], c[4], c[5], c[6], c[1], c[2], c[3]) for c in boxes]


@pytest.fixture(scope="module")
def random_found():
    """The random cases and their results with the test's gap and with a gap that takes every slot computed."""
    cases = random_cases()
    results = []
    for gap in (GAP, 10.0):
        args = arrays(cases, gap=gap)
        launch(args)
        results.append([a.numpy() for a in args[6:]])
    return cases, results


def test_capsule_pairs_match_brute_force_distances(random_found):
    """Against a fine sampling of the axis of shape 0: the nearer of the pair's slots is the exact distance less
    the radii (two-contact slots, at the ends of nearly parallel axes or of a capsule along a box face, may
    miss a little between them, and report depth along that face); every slot is valid exactly where its
    separation is below the gap, and its box point lies on the box."""
    cases, ((valid, *_), (both, p0, p1, n, sep)) = random_found
    s = np.linspace(0.0, 1.0, 4001)[:, None]
    for i, (kind, c0, q0, size0, c1, q1, size1) in enumerate(cases):
        if kind == BOX_BOX:
            continue
        two = both[i, 1] == 1
        assert both[i, 0] == 1 and not both[i, 2:].any()
        assert (valid[i, :2] == (sep[i, :2] < GAP) * [1, two]).all(), (i, valid[i], sep[i])
        u0 = rotation(q0)[:, 2] * size0[1]
        axis0 = np.asarray(c0) - u0 + 2 * s * u0
        nearest = sep[i, :1 + two].min()
        if kind == CAPSULE_CAPSULE:
            u1 = rotation(q1)[:, 2] * size1[1]
            brute = segment_distance(np.asarray(c1) - u1, np.asarray(c1) + u1, axis0).min() - size0[0] - size1[0]
            assert brute - 2e-4 <= nearest <= brute + (5e-3 if two else 1e-5), (i, nearest, brute)
        else:
            brute = box_sdf(np.asarray(size1), (axis0 - c1) @ rotation(q1)).min() - size0[0]
            assert brute - (size0[0] if two else 2e-4) <= nearest <= brute + 1e-5, (i, nearest, brute)
            on_box = (p1[i, :1 + two] - c1) @ rotation(q1)
            assert np.abs(box_sdf(np.asarray(size1), on_box)).max() < 1e-5
        assert np.allclose(np.linalg.norm(n[i, :1 + two], axis=1), 1.0, atol=1e-5)


def test_random_boxes_touch_on_their_surfaces_and_agree_when_swapped(random_found):
    """Each contact's points lie on the two boxes' faces, its normal points from box 0 to box 1, and its
    separation is at least the boxes' separation along that normal; overlapping boxes get contacts, the
    deepest as deep as the separating-axis test says, a polygon's worth where they lie flat on each other;
    swapping the boxes gives the same separations."""
    cases, ((valid, p0, p1, n, sep), _) = random_found
    first = next(i for i, c in enumerate(cases) if c[0] == BOX_BOX)
    count = (len(cases) - first) // 2  # the second half swaps the first
    overlapping = 0
    for i in range(first, len(cases)):
        _, c0, q0, h0, c1, q1, h1 = cases[i]
        c0, c1, h0, h1 = (np.asarray(v, dtype=float) for v in (c0, c1, h0, h1))
        r0, r1 = rotation(q0), rotation(q1)
        largest = box_separation(c0, q0, h0, c1, q1, h1)
        v = valid[i] == 1
        if largest > GAP + 1e-4:
            assert not v.any()
            continue
        if largest < -1e-3:
            overlapping += 1
            assert v.any(), f"case {i}: overlapping boxes without contacts"
            assert sep[i][v].min() <= largest + 2e-3, (i, sep[i][v], largest)
        for k in np.flatnonzero(v):
            assert abs(box_sdf(h0, ((p0[i, k] - c0) @ r0)[None])[0]) < 1e-4
            assert abs(box_sdf(h1, ((p1[i, k] - c1) @ r1)[None])[0]) < 1e-4
            assert n[i, k] @ (c1 - c0) >= 0.0 and np.isclose(np.linalg.norm(n[i, k]), 1.0, atol=1e-5)
            assert sep[i, k] >= along(n[i, k], c1 - c0, r0, h0, r1, h1) - 1e-5
        if largest < -0.03 and (i - first) % count >= RANDOM_COUNT:  # flat: a polygon
            assert v.sum() >= 3, (i, sep[i], largest)
        if i < first + RANDOM_COUNT:  # (nearly flat ones may take either face as reference)
            assert np.allclose(np.sort(sep[i][v]), np.sort(sep[i + count][valid[i + count] == 1]), atol=1e-5), i
    assert overlapping >= count // 4
