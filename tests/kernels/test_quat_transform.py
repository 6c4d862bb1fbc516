"""Quaternions and rigid transforms in kernels, against independent oracles (Rodrigues, 4x4 matrices)."""

import numpy as np

import loomwork as wp


def rodrigues(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def homogeneous(p, rot):
    m = np.eye(4)
    m[:3, :3] = rot
    m[:3, 3] = p
    return m


@wp.kernel
def quat_ops(axis: wp.array(dtype=wp.vec3d), angle: wp.array(dtype=wp.float64), v: wp.array(dtype=wp.vec3d),
             rotated: wp.array(dtype=wp.vec3d), composed: wp.array(dtype=wp.vec3d), back: wp.array(dtype=wp.vec3d),
             mats: wp.array(dtype=wp.mat33d), parts: wp.array(dtype=wp.vec4d)):
    i = wp.tid()
    q = wp.quat_from_axis_angle(axis[i], angle[i])
    r = wp.quat_from_axis_angle(wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(1.0)), wp.float64(0.3))
    rotated[i] = wp.quat_rotate(q, v[i])
    composed[i] = wp.quat_rotate(r * q, v[i])
    back[i] = wp.quat_rotate_inv(q, wp.quat_rotate(wp.quat_inverse(q), wp.quat_rotate(q, v[i])))
    mats[i] = wp.quat_to_matrix(q)
    parts[i] = wp.vec4d(q.x, q.y, q.z, q.w)


@wp.kernel
def rpy_kernel(rpy: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.quatd)):
    i = wp.tid()
    out[i] = wp.quat_rpy(rpy[i][0], rpy[i][1], rpy[i][2])


@wp.kernel
def transform_ops(p: wp.array(dtype=wp.vec3d), q: wp.array(dtype=wp.quatd), pts: wp.array(dtype=wp.vec3d),
                  moved: wp.array(dtype=wp.vec3d), turned: wp.array(dtype=wp.vec3d), chained: wp.array(dtype=wp.vec3d),
                  undone: wp.array(dtype=wp.vec3d), stored: wp.array(dtype=wp.transformd)):
    i = wp.tid()
    t = wp.transform(p[i], q[i])
    u = wp.transform(p[0], q[0])
    moved[i] = wp.transform_point(t, pts[i])
    turned[i] = wp.transform_vector(t, pts[i])
    chained[i] = wp.transform_point(u * t, pts[i]) + wp.transform_point(wp.transform_multiply(u, t), pts[i])
    undone[i] = wp.transform_point(wp.transform_inverse(t), moved[i])
    s = wp.transform_identity()
    w = wp.transform_identity(dtype=wp.float64)  # (wp.transformd() is zero in kernels, as in Warp)
    stored[i] = wp.transform(t.p + wp.vec3d(wp.float64(s.p[0]) + w.q[3]), wp.transform_get_rotation(t))


def random_rotations(rng, n):
    axis = rng.standard_normal((n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    return axis, rng.uniform(-3, 3, n)


def test_quaternion_rotations_match_rodrigues():
    """from_axis_angle, rotate, Hamilton product, inverse, rotate_inv and to_matrix against rotation matrices."""
    rng = np.random.default_rng(0)
    n = 16
    axis, angle = random_rotations(rng, n)
    v = rng.standard_normal((n, 3))
    outs = [wp.zeros(n, dtype=t) for t in (wp.vec3d, wp.vec3d, wp.vec3d, wp.mat33d, wp.vec4d)]
    wp.launch(quat_ops, n, inputs=[wp.array(axis, dtype=wp.vec3d), angle, wp.array(v, dtype=wp.vec3d), *outs])
    rotated, composed, back, mats, parts = (o.numpy() for o in outs)
    rz = rodrigues([0, 0, 1], 0.3)
    for i in range(n):
        rot = rodrigues(axis[i], angle[i])
        np.testing.assert_allclose(rotated[i], rot @ v[i], atol=1e-12)
        np.testing.assert_allclose(composed[i], rz @ rot @ v[i], atol=1e-12)
        np.testing.assert_allclose(mats[i], rot, atol=1e-12)
        np.testing.assert_allclose(back[i], rot.T @ v[i], atol=1e-12)
        np.testing.assert_allclose(parts[i], np.r_[axis[i] * np.sin(angle[i] / 2), np.cos(angle[i] / 2)], atol=1e-12)


def test_quat_rpy_is_yaw_pitch_roll_in_that_order():
    """quat_rpy(r, p, y) rotates like Rz(y) Ry(p) Rx(r)."""
    rng = np.random.default_rng(1)
    rpy = rng.uniform(-1.5, 1.5, (8, 3))
    out = wp.zeros(8, dtype=wp.quatd)
    wp.launch(rpy_kernel, 8, inputs=[wp.array(rpy, dtype=wp.vec3d), out])
    for (r, p, y), q in zip(rpy, out.numpy(), strict=True):
        expect = rodrigues([0, 0, 1], y) @ rodrigues([0, 1, 0], p) @ rodrigues([1, 0, 0], r)
        got = np.stack([np.array(wp.quat_rotate(wp.quatd(q), wp.vec3d(e))) for e in np.eye(3)], axis=1)
        np.testing.assert_allclose(got, expect, atol=1e-12)


def test_transforms_match_homogeneous_matrices():
    """transform(p, q), point/vector/multiply/inverse, .p/.q and the identity against 4x4 matrices."""
    rng = np.random.default_rng(2)
    n = 10
    axis, angle = random_rotations(rng, n)
    quats = np.concatenate([axis * np.sin(angle / 2)[:, None], np.cos(angle / 2)[:, None]], axis=1)
    p = rng.standard_normal((n, 3))
    pts = rng.standard_normal((n, 3))
    outs = [wp.zeros(n, dtype=wp.vec3d) for _ in range(4)] + [wp.zeros(n, dtype=wp.transformd)]
    wp.launch(transform_ops, n, inputs=[wp.array(p, dtype=wp.vec3d), wp.array(quats, dtype=wp.quatd),
                                        wp.array(pts, dtype=wp.vec3d), *outs])
    moved, turned, chained, undone, stored = (o.numpy() for o in outs)
    u = homogeneous(p[0], rodrigues(axis[0], angle[0]))
    for i in range(n):
        rot = rodrigues(axis[i], angle[i])
        t = homogeneous(p[i], rot)
        np.testing.assert_allclose(moved[i], (t @ np.r_[pts[i], 1])[:3], atol=1e-12)
        np.testing.assert_allclose(turned[i], rot @ pts[i], atol=1e-12)
        np.testing.assert_allclose(chained[i], 2 * (u @ t @ np.r_[pts[i], 1])[:3], atol=1e-12)
        np.testing.assert_allclose(undone[i], pts[i], atol=1e-12)
        np.testing.assert_allclose(stored[i], np.r_[p[i] + 1.0, quats[i]], atol=1e-12)


def test_python_scope_types_and_arrays():
    """quat() is zero and transform() the identity, as in Warp; arrays of them view as (n, 4) / (n, 7)."""
    assert wp.quat() == wp.quat(0.0, 0.0, 0.0, 0.0)
    assert wp.transform() == wp.transform(wp.vec3(0.0, 0.0, 0.0), wp.quat_identity())
    t = wp.transform(wp.vec3(1.0, 2.0, 3.0), wp.quat_identity())
    assert t.p == wp.vec3(1.0, 2.0, 3.0) and t.q == wp.quat(0.0, 0.0, 0.0, 1.0)
    assert wp.zeros(5, dtype=wp.transform).numpy().shape == (5, 7)
    assert wp.zeros(5, dtype=wp.quatd).numpy().dtype == np.float64
    assert (wp.quat(1.0, 2.0, 3.0, 4.0) * wp.quat(0.0, 1.0, 0.0, 0.0)) == wp.quat(-3.0, 4.0, 1.0, -2.0)


@wp.kernel
def no_argument_constructors(t: wp.array(dtype=wp.transform), td: wp.array(dtype=wp.transformd),
                             q: wp.array(dtype=wp.quat)):
    t[0] = wp.transform()
    td[0] = wp.transformd()
    q[0] = wp.quat()


def test_no_argument_transform_in_a_kernel_is_zero():
    """In a kernel, wp.transform() with no arguments is all zeros, quaternion included (Warp 1.19 documents and
    does this; wp.transform_identity() is the identity), while the Python class's transform() is the identity."""
    t, td, q = (wp.full(1, 5.0, dtype=d) for d in (wp.transform, wp.transformd, wp.quat))
    wp.launch(no_argument_constructors, 1, inputs=[t, td, q])
    for a in (t, td, q):
        np.testing.assert_array_equal(a.numpy(), np.zeros_like(a.numpy()))
    assert list(wp.transform()) == [0.0] * 6 + [1.0]


@wp.kernel
def spatial_ops(a: wp.array(dtype=wp.spatial_vectord), b: wp.array(dtype=wp.spatial_vectord),
                out: wp.array(dtype=wp.spatial_vectord), dots: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.spatial_vector(wp.spatial_top(a[i]), wp.spatial_bottom(b[i]))
    out[i * 3 + 0] = wp.spatial_cross(a[i], b[i])
    out[i * 3 + 1] = wp.spatial_cross_dual(a[i], b[i])
    out[i * 3 + 2] = s
    dots[i] = wp.spatial_dot(a[i], b[i])


def test_spatial_math_matches_its_definition():
    """Spatial cross products (motion and force) against their 6x6 matrix forms; top/bottom/dot/constructor."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    out, dots = wp.zeros(12, dtype=wp.spatial_vectord), wp.zeros(4, dtype=wp.float64)
    wp.launch(spatial_ops, 4, inputs=[wp.array(a, dtype=wp.spatial_vectord), wp.array(b, dtype=wp.spatial_vectord),
                                      out, dots])
    o = out.numpy().reshape(4, 3, 6)

    def skew(v):
        return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])

    for i in range(4):
        w, v = a[i, :3], a[i, 3:]
        motion = np.block([[skew(w), np.zeros((3, 3))], [skew(v), skew(w)]])
        np.testing.assert_allclose(o[i, 0], motion @ b[i], atol=1e-12)
        np.testing.assert_allclose(o[i, 1], -motion.T @ b[i], atol=1e-12)  # the dual is -(motion)^T
        np.testing.assert_allclose(o[i, 2], np.r_[a[i, :3], b[i, 3:]])
        np.testing.assert_allclose(dots.numpy()[i], np.dot(a[i], b[i]), rtol=1e-14)


@wp.kernel
def identities_of_dtype(out: wp.array(dtype=wp.transformd), o2: wp.array(dtype=wp.transform)):
    out[0] = wp.transform_identity(dtype=wp.float64)
    o2[0] = wp.transform(p=wp.vec3(1.0, 2.0, 3.0))  # q defaults to the identity
    o2[1] = wp.transform(wp.vec3(4.0, 5.0, 6.0), q=wp.quat_identity(dtype=wp.float32))


def test_identities_of_a_dtype_and_transform_keywords():
    """quat_identity/transform_identity take dtype= (in kernels and Python); transform(p=...) defaults q."""
    out, o2 = wp.zeros(1, dtype=wp.transformd), wp.zeros(2, dtype=wp.transform)
    wp.launch(identities_of_dtype, 1, inputs=[out, o2])
    assert out.numpy()[0].tolist() == [0, 0, 0, 0, 0, 0, 1]
    assert o2.numpy().tolist() == [[1, 2, 3, 0, 0, 0, 1], [4, 5, 6, 0, 0, 0, 1]]
    assert type(wp.quat_identity(dtype=wp.float64)) is wp.quatd
    assert type(wp.transform_identity(dtype=wp.float16)) is wp.transformh
