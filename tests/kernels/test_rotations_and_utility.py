"""Euler angles, swing-twist, 4x4 compose/decompose and spatial frame changes against NumPy oracles;
the Utility/Operator builtins (cast, unot, block_dim, div_approx, inverse_approx, scalar / matrix,
breakpoint, sample_cdf) and functions returning several values, with their gradients and errors."""

from typing import Any

import numpy as np
import pytest

import loomwork as wp
from loomwork.autograd import gradcheck

DTYPES = {"f32": (wp.float32, 2e-5), "f64": (wp.float64, 1e-11)}
SEQUENCES = [(i, j, k) for i in range(3) for j in range(3) for k in range(3) if i != j and j != k]


def qmul(p, q):
    (px, py, pz, pw), (qx, qy, qz, qw) = p, q
    return np.array([pw * qx + px * qw + py * qz - pz * qy, pw * qy - px * qz + py * qw + pz * qx,
                     pw * qz + px * qy - py * qx + pz * qw, pw * qw - px * qx - py * qy - pz * qz])


def axis_quat(axis, angle):
    q = np.zeros(4)
    q[:3] = np.asarray(axis, dtype=np.float64) * np.sin(angle / 2) / np.linalg.norm(axis)
    q[3] = np.cos(angle / 2)
    return q


def basis(i):
    return np.eye(3)[i]


def rotation_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def same_rotation(a, b):
    return min(np.abs(a - b).max(), np.abs(a + b).max())


@wp.kernel(enable_backward=False)
def euler(q: wp.array(dtype=Any), seq: wp.array(dtype=wp.vec3i), e: wp.array(dtype=Any), back: wp.array(dtype=Any)):
    t = wp.tid()
    s = seq[t]
    e[t] = wp.quat_to_euler(q[t], s[0], s[1], s[2])
    back[t] = wp.quat_from_euler(e[t], s[0], s[1], s[2])


@wp.kernel(enable_backward=False)
def twists(axis: wp.array(dtype=Any), q: wp.array(dtype=Any), tw: wp.array(dtype=Any), ang: wp.array2d(dtype=Any)):
    t = wp.tid()
    tw[t] = wp.quat_twist(axis[t], q[t])
    ang[t, 0] = wp.quat_twist_angle(axis[t], q[t])
    ang[t, 1] = wp.quat_twist_angle_signed(axis[t], q[t])


@wp.kernel(enable_backward=False)
def compose(p: wp.array(dtype=Any), q: wp.array(dtype=Any), s: wp.array(dtype=Any), m: wp.array(dtype=Any),
            p2: wp.array(dtype=Any), q2: wp.array(dtype=Any), s2: wp.array(dtype=Any)):
    t = wp.tid()
    m[t] = wp.transform_compose(p[t], q[t], s[t])
    pos, rot, scale = wp.transform_decompose(m[t])
    p2[t] = pos
    q2[t] = rot
    s2[t] = scale


@wp.kernel(enable_backward=False)
def spatial(tf: wp.array(dtype=Any), x: wp.array(dtype=Any), r: wp.array(dtype=Any), twist: wp.array(dtype=Any),
            wrench: wp.array(dtype=Any), vel: wp.array(dtype=Any)):
    t = wp.tid()
    twist[t] = wp.transform_twist(tf[t], x[t])
    wrench[t] = wp.transform_wrench(tf[t], x[t])
    vel[t] = wp.velocity_at_point(x[t], r[t])


for _dtype in (wp.float32, wp.float64):  # instantiated up front: one module build, not one per launch
    _v3, _q = wp.types.vector(3, _dtype), wp.types.quaternion(_dtype)
    _m44, _tf, _sv = wp.types.matrix((4, 4), _dtype), wp.types.transformation(_dtype), wp.types.vector(6, _dtype)
    wp.overload(euler, [wp.array(dtype=_q), wp.array(dtype=wp.vec3i), wp.array(dtype=_v3), wp.array(dtype=_q)])
    wp.overload(twists, [wp.array(dtype=_v3), wp.array(dtype=_q), wp.array(dtype=_q), wp.array2d(dtype=_dtype)])
    wp.overload(compose, [wp.array(dtype=t) for t in (_v3, _q, _v3, _m44, _v3, _q, _v3)])
    wp.overload(spatial, [wp.array(dtype=t) for t in (_tf, _sv, _v3, _sv, _sv, _v3)])


def unit_quats(rng, n):
    q = rng.standard_normal((n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.mark.parametrize("prec", DTYPES)
def test_euler_angles_round_trip_for_all_twelve_sequences(prec):
    dtype, tol = DTYPES[prec]
    rng = np.random.default_rng(1)
    per = 24
    qs = unit_quats(rng, per * len(SEQUENCES))
    seq = np.array([s for s in SEQUENCES for _ in range(per)], dtype=np.int32)
    for n, (i, j, k) in enumerate(SEQUENCES):  # gimbal lock: the middle angle at its limit
        e = np.zeros(3)
        e[i], e[j] = 0.4, (np.pi / 2 if i != k else 0.0)
        e[k if i != k else 3 - i - j] = -0.9
        qs[n * per] = qmul(axis_quat(basis(k), e[k if i != k else 3 - i - j]),
                           qmul(axis_quat(basis(j), e[j]), axis_quat(basis(i), e[i])))
        if i == k:
            qs[n * per + 1] = axis_quat(basis(j), np.pi)  # the other proper-Euler singularity
    q_t = wp.types.quaternion(dtype)
    v3 = wp.types.vector(3, dtype)
    e, back = wp.zeros(len(qs), dtype=v3), wp.zeros(len(qs), dtype=q_t)
    wp.launch(euler, len(qs), inputs=[wp.array(qs, dtype=q_t), wp.array(seq, dtype=wp.vec3i), e, back])
    e, back = e.numpy(), back.numpy()
    loose = max(tol, 2e-5) * 20
    for n, (q, (i, j, k)) in enumerate(zip(qs, seq, strict=True)):
        ang = e[n]
        assert np.all(np.abs(ang) <= 2 * np.pi + 1e-6)
        if i != k:  # Tait-Bryan: quat_from_euler inverts it; the middle angle in [-pi/2, pi/2]
            assert -np.pi / 2 - 1e-6 <= ang[j] <= np.pi / 2 + 1e-6
            assert same_rotation(back[n], q) < loose, (i, j, k, q, ang)
            rebuilt = qmul(axis_quat(basis(k), ang[k]), qmul(axis_quat(basis(j), ang[j]), axis_quat(basis(i), ang[i])))
        else:  # proper Euler: the third angle is stored in the remaining slot; middle angle in [0, pi]
            assert -1e-6 <= ang[j] <= np.pi + 1e-6
            third = ang[3 - i - j]
            rebuilt = qmul(axis_quat(basis(i), third), qmul(axis_quat(basis(j), ang[j]), axis_quat(basis(i), ang[i])))
        assert same_rotation(rebuilt, q) < loose, (i, j, k, q, ang)


def test_quat_from_euler_matches_quat_rpy_and_rejects_bad_axes():
    @wp.kernel
    def rpy_vs_euler(e: wp.array(dtype=wp.vec3), a: wp.array(dtype=wp.quat), b: wp.array(dtype=wp.quat),
                     bad: wp.array(dtype=wp.vec3)):
        t = wp.tid()
        a[t] = wp.quat_from_euler(e[t], 0, 1, 2)
        b[t] = wp.quat_rpy(e[t][0], e[t][1], e[t][2])
        bad[t] = wp.quat_to_euler(a[t], 0, 0, 1) + wp.quat_to_euler(a[t], 0, 1, 3)

    rng = np.random.default_rng(2)
    e = wp.array(rng.uniform(-3, 3, (16, 3)).astype(np.float32), dtype=wp.vec3)
    a, b, bad = wp.zeros(16, dtype=wp.quat), wp.zeros(16, dtype=wp.quat), wp.zeros(16, dtype=wp.vec3)
    wp.launch(rpy_vs_euler, 16, inputs=[e, a, b, bad])
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    assert np.isnan(bad.numpy()).all()  # invalid axis sequences give NaNs, not garbage


@pytest.mark.parametrize("prec", DTYPES)
def test_swing_twist_decomposition(prec):
    dtype, tol = DTYPES[prec]
    rng = np.random.default_rng(3)
    n = 64
    axes = rng.standard_normal((n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    theta = rng.uniform(-3.0, 3.0, n)
    qs, expect = [], []
    for a, th in zip(axes, theta, strict=True):
        perp = np.cross(a, rng.standard_normal(3))
        twist = axis_quat(a, th)
        qs.append(qmul(axis_quat(perp, rng.uniform(-1.5, 1.5)), twist))  # swing after twist
        expect.append(twist)
    qs[0], expect[0] = np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0])
    qs[1] = axis_quat(np.cross(axes[1], [1.0, 0.0, 0.0]), np.pi)  # unspecified case: must stay finite
    q_t, v3 = wp.types.quaternion(dtype), wp.types.vector(3, dtype)
    tw, ang = wp.zeros(n, dtype=q_t), wp.zeros((n, 2), dtype=dtype)
    wp.launch(twists, n, inputs=[wp.array(axes, dtype=v3), wp.array(np.array(qs), dtype=q_t), tw, ang])
    tw, ang = tw.numpy(), ang.numpy()
    assert np.isfinite(tw).all() and np.isfinite(ang).all()
    loose = max(tol, 1e-5) * 10
    for t in [0, *range(2, n)]:
        assert same_rotation(tw[t], expect[t]) < loose
        assert abs(np.linalg.norm(tw[t]) - 1) < loose
        w = qs[t][3] * np.sign(expect[t][3]) if t else 1.0
        assert w >= 0 or t == 0
        signed = theta[t] if t else 0.0
        assert ang[t, 1] == pytest.approx(signed, abs=loose)
        assert ang[t, 0] == pytest.approx(abs(signed), abs=loose)


@pytest.mark.parametrize("prec", DTYPES)
def test_transform_compose_and_decompose(prec):
    dtype, tol = DTYPES[prec]
    rng = np.random.default_rng(4)
    n = 32
    p = rng.uniform(-2, 2, (n, 3))
    q = unit_quats(rng, n)
    q *= np.sign(q[:, 3:4])
    s = rng.uniform(0.2, 3.0, (n, 3))
    s[0] = (-1.0, -2.0, -3.0)  # a mirror: decomposed with every scale negated
    v3, q_t, m44 = wp.types.vector(3, dtype), wp.types.quaternion(dtype), wp.types.matrix((4, 4), dtype)
    m, p2, q2, s2 = wp.zeros(n, dtype=m44), wp.zeros(n, dtype=v3), wp.zeros(n, dtype=q_t), wp.zeros(n, dtype=v3)
    wp.launch(compose, n, inputs=[wp.array(p, dtype=v3), wp.array(q, dtype=q_t), wp.array(s, dtype=v3), m, p2, q2, s2])
    loose = max(tol, 1e-5) * 10
    for t in range(n):
        ref = np.eye(4)
        ref[:3, :3] = rotation_matrix(q[t]) @ np.diag(s[t])
        ref[:3, 3] = p[t]
        np.testing.assert_allclose(m.numpy()[t], ref, atol=loose)
        np.testing.assert_allclose(p2.numpy()[t], p[t], atol=loose)
        np.testing.assert_allclose(s2.numpy()[t], s[t], atol=loose)
        assert same_rotation(q2.numpy()[t], q[t]) < loose


@pytest.mark.parametrize("prec", DTYPES)
def test_twist_wrench_and_point_velocity(prec):
    dtype, tol = DTYPES[prec]
    rng = np.random.default_rng(5)
    n = 16
    p, q = rng.uniform(-2, 2, (n, 3)), unit_quats(rng, n)
    x, r = rng.uniform(-1, 1, (n, 6)), rng.uniform(-1, 1, (n, 3))
    tf_t, sv, v3 = wp.types.transformation(dtype), wp.types.vector(6, dtype), wp.types.vector(3, dtype)
    twist, wrench, vel = wp.zeros(n, dtype=sv), wp.zeros(n, dtype=sv), wp.zeros(n, dtype=v3)
    wp.launch(spatial, n, inputs=[wp.array(np.hstack([p, q]), dtype=tf_t), wp.array(x, dtype=sv),
                                  wp.array(r, dtype=v3), twist, wrench, vel])
    loose = max(tol, 1e-6) * 10
    for t in range(n):
        rot = rotation_matrix(q[t])
        w, v = rot @ x[t, :3], rot @ x[t, 3:]
        np.testing.assert_allclose(twist.numpy()[t], np.hstack([w, v + np.cross(p[t], w)]), atol=loose)
        np.testing.assert_allclose(wrench.numpy()[t], np.hstack([w + np.cross(p[t], v), v]), atol=loose)
        np.testing.assert_allclose(vel.numpy()[t], x[t, 3:] + np.cross(x[t, :3], r[t]), atol=loose)


@wp.func
def polar(v: wp.vec2d):
    """Several results from one function: a tuple record the caller unpacks or indexes."""
    r = wp.length(v)
    if r == wp.float64(0.0):
        return wp.float64(0.0), wp.float64(0.0), wp.vec2d()
    return r, wp.atan2(v[1], v[0]), v / r


@wp.kernel
def rotation_loss(q: wp.array(dtype=wp.quatd), m: wp.array(dtype=wp.mat44d), x: wp.array(dtype=wp.spatial_vectord),
                  v: wp.array(dtype=wp.vec2d), out: wp.array(dtype=wp.float64)):
    t = wp.tid()
    e = wp.quat_to_euler(q[t], 2, 0, 1)
    f = wp.quat_to_euler(q[t], 1, 0, 1)
    a = wp.quat_twist_angle_signed(wp.vec3d(wp.float64(0.0), wp.float64(0.6), wp.float64(0.8)), q[t])
    tw = wp.quat_twist(wp.vec3d(wp.float64(1.0), wp.float64(0.0), wp.float64(0.0)), q[t])
    pos, rot, scale = wp.transform_decompose(m[t])
    tf = wp.transform(pos, rot)
    y = wp.transform_twist(tf, x[t]) + wp.transform_wrench(tf, x[t])
    r, phi, d = polar(v[t])
    res = polar(v[t] * wp.float64(2.0))
    inv = wp.inverse_approx(wp.mat22d(r, phi, d[0], wp.float64(3.0)))
    out[t] = (e[0] - e[1] * e[2] + f[0] * f[2] + a + tw[0] * tw[3] + wp.dot(scale, pos) + wp.dot(y, x[t])
              + wp.length(wp.velocity_at_point(x[t], scale)) + wp.div_approx(phi, wp.float64(3.0) + r)
              + res[0] * res[2][1] + wp.ddot(wp.float64(1.0) / (inv + wp.identity(2, wp.float64) * wp.float64(4.0)),
                                            inv))


def test_new_builtins_and_tuple_returns_have_correct_gradients():
    rng = np.random.default_rng(6)
    n = 4
    q = unit_quats(rng, n)
    mats = np.zeros((n, 4, 4))
    for t in range(n):
        mats[t] = np.eye(4)
        mats[t][:3, :3] = rotation_matrix(unit_quats(rng, 1)[0]) @ np.diag(rng.uniform(0.5, 2.0, 3))
        mats[t][:3, 3] = rng.uniform(-1, 1, 3)
    arrays = [wp.array(q, dtype=wp.quatd, requires_grad=True), wp.array(mats, dtype=wp.mat44d, requires_grad=True),
              wp.array(rng.uniform(-1, 1, (n, 6)), dtype=wp.spatial_vectord, requires_grad=True),
              wp.array(rng.uniform(0.5, 1.5, (n, 2)), dtype=wp.vec2d, requires_grad=True)]
    gradcheck(rotation_loss, n, arrays, [wp.zeros(n, dtype=wp.float64, requires_grad=True)], eps=1e-6, atol=1e-5,
              rtol=1e-5)


def test_tuple_returns_in_kernels_and_python():
    @wp.kernel
    def unpack(v: wp.array(dtype=wp.vec2d), out: wp.array2d(dtype=wp.float64)):
        t = wp.tid()
        r, phi, d = polar(v[t])
        res = polar(v[t])
        out[t, 0] = r
        out[t, 1] = phi
        out[t, 2] = d[1]
        out[t, 3] = res[-3] - r

    v = np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]])
    out = wp.zeros((3, 4), dtype=wp.float64)
    wp.launch(unpack, 3, inputs=[wp.array(v, dtype=wp.vec2d), out])
    np.testing.assert_allclose(out.numpy(), [[5.0, np.arctan2(4, 3), 0.8, 0.0], [0.0] * 4, [1.0, np.pi, 0.0, 0.0]])
    r, phi, d = polar(wp.vec2d(3.0, 4.0))
    assert (r, d[0]) == pytest.approx((5.0, 0.6))
    assert (wp.transform_decompose(wp.transform_compose(wp.vec3(1, 2, 3), wp.quat_identity(), wp.vec3(2, 2, 2)))[2]
            == wp.vec3(2, 2, 2))


def test_cast_unot_block_dim_div_approx_and_scalar_over_matrix():
    @wp.struct
    class Halves:
        f: wp.float16
        i: wp.int16

    @wp.kernel
    def utility(empty: wp.array(dtype=float), out: wp.array(dtype=wp.int32), fo: wp.array(dtype=float)):
        x = wp.int32(0x40000000)
        f = wp.cast(x, wp.float32)
        s = Halves()
        s.f = wp.float16(2.0)
        s.i = wp.int16(4096)
        out[0] = wp.cast(s, wp.int32)
        out[1] = wp.cast(f, dtype=wp.int32)
        out[2] = int(wp.cast(wp.vec2h(wp.float16(1.0), wp.float16(-2.0)), wp.uint32) == wp.uint32(0xC0003C00))
        out[3] = int(wp.unot(0)) + 2 * int(wp.unot(out)) + 4 * int(wp.unot(2.5)) + 8 * int(wp.unot(empty))
        out[4] = wp.block_dim()
        wp.breakpoint()  # no debugger attached: nothing happens
        fo[0] = wp.div_approx(1.0, 4.0)
        m = wp.mat22(2.0, 1.0, 1.0, 2.0)
        fo[1] = wp.inverse_approx(m)[0, 1]
        fo[2] = (2.0 / m)[0, 1]
        fo[3] = wp.cast(wp.cast(f, wp.uint32) + wp.uint32(1), float) - f

    out, fo = wp.zeros(5, dtype=wp.int32), wp.zeros(4, dtype=float)
    wp.launch(utility, 1, inputs=[wp.array(np.zeros(0, np.float32), dtype=float), out, fo])
    assert out.numpy().tolist() == [0x10004000, 0x40000000, 1, 1 + 8, 1]
    np.testing.assert_allclose(fo.numpy()[:3], [0.25, -1.0 / 3.0, 2.0], rtol=1e-6)
    assert fo.numpy()[3] == np.spacing(np.float32(2.0))
    np.testing.assert_allclose((2.0 / wp.mat22(2.0, 1.0, 1.0, 2.0)).numpy_value(), [[1.0, 2.0], [2.0, 1.0]])


def test_sample_cdf_draws_each_bin_with_its_probability():
    @wp.kernel
    def draw(seed: int, cdf: wp.array(dtype=float), out: wp.array(dtype=wp.int32)):
        t = wp.tid()
        state = wp.rand_init(seed, t)
        first = wp.sample_cdf(state, cdf)
        out[t] = wp.sample_cdf(state, cdf) * 0 + first

    weights = np.array([0.1, 0.0, 0.4, 0.5, 0.0])
    cdf = wp.array((np.cumsum(weights) / weights.sum()).astype(np.float32), dtype=float)
    n = 200_000
    a, b = wp.zeros(n, dtype=wp.int32), wp.zeros(n, dtype=wp.int32)
    wp.launch(draw, n, inputs=[5, cdf, a])
    wp.launch(draw, n, inputs=[5, cdf, b])
    assert np.array_equal(a.numpy(), b.numpy())  # reproducible
    counts = np.bincount(a.numpy(), minlength=5)
    assert counts[1] == 0 and counts[4] == 0  # empty bins are never drawn
    expected = weights * n
    chi2 = sum((counts[i] - expected[i]) ** 2 / expected[i] for i in (0, 2, 3))
    assert chi2 < 13.8  # chi-square, 2 degrees of freedom, p = 0.001


def test_errors_name_the_line():
    def build(fn, name):
        kernel = wp.kernel(fn, module=f"test_rotations_errors_{name}")  # its own module: the error breaks no other
        with pytest.raises(wp.KernelError) as e:
            wp.launch(kernel, 1, inputs=[wp.zeros(2, dtype=float)])
        return str(e.value)

    def wrong_size(a: wp.array(dtype=float)):
        a[0] = wp.cast(wp.int64(3), wp.float32)

    msg = build(wrong_size, "size")
    assert "int64 has 8 bytes but float32 has 4" in msg and "wp.cast(wp.int64(3), wp.float32)" in msg

    def int_cdf(a: wp.array(dtype=float)):
        s = wp.uint32(3)
        a[0] = float(wp.sample_cdf(s, wp.zeros(2, dtype=int)))

    assert "sample_cdf(inout uint32, array(dtype=Float, ndim=1))" in build(int_cdf, "cdf")

    def too_many(a: wp.array(dtype=float)):
        r, phi = polar(wp.vec2d())
        a[0] = float(r)

    assert "cannot unpack 3 values into 2 names" in build(too_many, "unpack")

    def out_of_range(a: wp.array(dtype=float)):
        res = polar(wp.vec2d())
        a[0] = float(res[3])

    assert "a tuple of 3 values takes a constant index in [-3, 3)" in build(out_of_range, "index")

    @wp.func
    def nested(x: float):
        return x, (x, x)

    def uses_nested(a: wp.array(dtype=float)):
        u, v = nested(a[0])

    assert "tuples cannot be nested" in build(uses_nested, "nested")


def _make_struct():
    @wp.struct
    class Pair:  # the same Python name in every call: distinct types, distinct C++ records
        a: float

    return Pair


_PairOne, _PairTwo = _make_struct(), _make_struct()


@wp.func
def _split_one(x: float):
    p = _PairOne()
    p.a = x * 2.0
    return p, x


@wp.func
def _split_two(x: float):
    p = _PairTwo()
    p.a = x * 3.0
    return p, x


def test_tuples_of_same_named_structs_stay_distinct():
    @wp.kernel
    def both(out: wp.array(dtype=float)):
        p, x = _split_one(1.0)
        q, y = _split_two(1.0)
        out[0] = p.a + q.a + x + y

    out = wp.zeros(1, dtype=float)
    wp.launch(both, 1, inputs=[out])
    assert out.numpy()[0] == 7.0
