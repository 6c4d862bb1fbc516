"""Decompositions (svd2/svd3, qr3, eig3), matrix construction and reductions, rotations from and to
matrices, local fixed-size arrays and constant slices, each against NumPy or an analytic oracle."""

import math
from typing import Any

import numpy as np
import pytest

import loomwork as wp
from loomwork.autograd import gradcheck

DTYPES = {"f32": (wp.float32, 2e-5), "f64": (wp.float64, 1e-11)}


@wp.kernel(enable_backward=False)
def decompose(a: wp.array(dtype=Any), u: wp.array(dtype=Any), s: wp.array(dtype=Any), v: wp.array(dtype=Any),
              q: wp.array(dtype=Any), r: wp.array(dtype=Any), eq: wp.array(dtype=Any), ed: wp.array(dtype=Any)):
    i = wp.tid()
    U = u[i]
    sigma = s[i]
    V = v[i]
    wp.svd3(a[i], U, sigma, V)
    u[i] = U
    s[i] = sigma
    v[i] = V
    Q = q[i]
    R = r[i]
    wp.qr3(a[i], Q, R)
    q[i] = Q
    r[i] = R
    E = eq[i]
    d = ed[i]
    wp.eig3(a[i] + wp.transpose(a[i]), E, d)
    eq[i] = E
    ed[i] = d


@wp.kernel(enable_backward=False)
def decompose2(a: wp.array(dtype=Any), u: wp.array(dtype=Any), s: wp.array(dtype=Any), v: wp.array(dtype=Any)):
    i = wp.tid()
    U = u[i]
    sigma = s[i]
    V = v[i]
    wp.svd2(a[i], U, sigma, V)
    u[i] = U
    s[i] = sigma
    v[i] = V


for _dtype in (wp.float32, wp.float64):  # instantiated up front: one module build, not one per launch
    _m3, _v3 = wp.types.matrix((3, 3), _dtype), wp.types.vector(3, _dtype)
    _m2, _v2 = wp.types.matrix((2, 2), _dtype), wp.types.vector(2, _dtype)
    wp.overload(decompose, [wp.array(dtype=t) for t in (_m3, _m3, _v3, _m3, _m3, _m3, _m3, _v3)])
    wp.overload(decompose2, [wp.array(dtype=t) for t in (_m2, _m2, _v2, _m2)])


def sample_matrices(rng, n=64):
    a = rng.uniform(-1, 1, (n, 3, 3))
    a[0] = np.eye(3)
    a[1] = 0.0
    a[2] = np.diag([2.0, 2.0, 1.0])  # repeated singular values
    a[3] = np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])  # rank one
    a[4] = np.diag([1.0, -2.0, 3.0])  # negative determinant
    return a


@pytest.mark.parametrize("prec", DTYPES)
def test_svd3_qr3_eig3_match_numpy(prec):
    dtype, tol = DTYPES[prec]
    m33, v3 = wp.types.matrix((3, 3), dtype), wp.types.vector(3, dtype)
    a = sample_matrices(np.random.default_rng(1))
    n = len(a)
    outs = [wp.zeros(n, dtype=t) for t in (m33, v3, m33, m33, m33, m33, v3)]
    wp.launch(decompose, n, inputs=[wp.array(a, dtype=m33), *outs])
    U, s, V, Q, R, E, d = (o.numpy().astype(np.float64) for o in outs)
    scale = 10 * tol
    for k in range(n):
        assert np.allclose(U[k] @ np.diag(s[k]) @ V[k].T, a[k], atol=scale), k
        for rot in (U[k], V[k], Q[k], E[k]):
            assert np.allclose(rot @ rot.T, np.eye(3), atol=scale) and np.isclose(np.linalg.det(rot), 1.0, atol=scale)
        ref = np.linalg.svd(a[k], compute_uv=False)
        assert np.allclose(np.abs(s[k]), ref, atol=scale), (k, s[k], ref)
        assert s[k][0] >= s[k][1] >= abs(s[k][2]) - scale
        assert np.all(s[k][:2] >= -scale) and (s[k][2] < scale if np.linalg.det(a[k]) < -1e-6 else s[k][2] > -scale)
        assert np.allclose(Q[k] @ R[k], a[k], atol=scale) and np.allclose(np.tril(R[k], -1), 0.0)
        sym = a[k] + a[k].T
        assert np.allclose(d[k], np.linalg.eigvalsh(sym), atol=scale)
        assert np.allclose(sym @ E[k], E[k] @ np.diag(d[k]), atol=10 * scale)


@pytest.mark.parametrize("prec", DTYPES)
def test_svd2_matches_numpy(prec):
    dtype, tol = DTYPES[prec]
    m22, v2 = wp.types.matrix((2, 2), dtype), wp.types.vector(2, dtype)
    a = np.random.default_rng(2).uniform(-1, 1, (32, 2, 2))
    a[0], a[1], a[2] = np.eye(2), 0.0, np.diag([1.0, -3.0])
    outs = [wp.zeros(32, dtype=t) for t in (m22, v2, m22)]
    wp.launch(decompose2, 32, inputs=[wp.array(a, dtype=m22), *outs])
    U, s, V = (o.numpy().astype(np.float64) for o in outs)
    for k in range(32):
        assert np.allclose(U[k] @ np.diag(s[k]) @ V[k].T, a[k], atol=10 * tol)
        for rot in (U[k], V[k]):
            assert np.isclose(np.linalg.det(rot), 1.0, atol=10 * tol)
        assert np.allclose(np.abs(s[k]), np.linalg.svd(a[k], compute_uv=False), atol=10 * tol)


@wp.kernel
def svd_loss(a: wp.array(dtype=wp.mat33d), w: wp.array(dtype=wp.mat33d), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    U = wp.mat33d()
    s = wp.vec3d()
    V = wp.mat33d()
    wp.svd3(a[i], U, s, V)
    Q = wp.mat33d()
    R = wp.mat33d()
    wp.qr3(a[i], Q, R)
    E = wp.mat33d()
    d = wp.vec3d()
    wp.eig3(a[i], E, d)
    # sign-invariant functions of the factors: the polar rotation U V^T, and products that fix signs
    out[i] = (wp.ddot(U * wp.transpose(V), w[i]) + s[0] * s[1] + s[2] + wp.ddot(Q, w[i]) + R[0, 2] + R[1, 1]
              + d[0] * d[2] + wp.ddot(wp.outer(E[0], E[0]), w[i]) + E[1, 2] * E[1, 2])


def test_decomposition_gradients_match_finite_differences():
    """Gradients through all factors of svd3, qr3 and eig3 at once, in a kernel."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (4, 3, 3)) + np.diag([3.0, 1.5, 0.5])
    a[:, 2, 0] += 0.3
    w = rng.uniform(-1, 1, (4, 3, 3))
    gradcheck(svd_loss, 4, [wp.array(a, dtype=wp.mat33d, requires_grad=True), wp.array(w, dtype=wp.mat33d)],
              [wp.zeros(4, dtype=wp.float64, requires_grad=True)], eps=1e-6, atol=1e-6, rtol=1e-5)


@wp.kernel(enable_backward=False)
def construct(out: wp.array(dtype=float), i_out: wp.array(dtype=wp.uint32), b_out: wp.array(dtype=wp.bool)):
    m = wp.identity(n=3, dtype=float)
    out[0] = m[0, 0] + m[1, 1] + m[2, 2] + m[0, 1]
    v = wp.vector(1.0, 2.0, 3.0, 4.0, 5.0)
    out[1] = v[4] + float(len(v))
    z = wp.vector(length=6, dtype=wp.float64)
    out[2] = float(z[5]) + float(len(z))
    mm = wp.matrix(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, shape=(2, 3))
    out[3] = mm[1, 2]
    r = wp.matrix_from_rows(wp.vec3(1.0, 2.0, 3.0), wp.vec3(4.0, 5.0, 6.0))
    c = wp.matrix_from_cols(wp.vec3(1.0, 2.0, 3.0), wp.vec3(4.0, 5.0, 6.0))
    out[4] = r[1, 0] * 10.0 + c[1, 0]
    out[5] = wp.ddot(wp.mat22(1.0, 2.0, 3.0, 4.0), wp.mat22(1.0, 1.0, 2.0, 2.0))
    u = wp.vec4(3.0, -1.0, 7.0, -1.0)
    i_out[0] = wp.argmin(u)
    i_out[1] = wp.argmax(u)
    out[6] = wp.min(u) + 100.0 * wp.max(u)
    out[7] = v[-1] + v[-5] * 10.0
    s = v[1:4]
    out[8] = s[0] + 10.0 * s[2] + 100.0 * float(len(s))
    rev = v[::-2]
    out[9] = rev[0] + 10.0 * rev[2]
    col = r[:, 1]
    out[10] = col[0] + 10.0 * col[1]
    block = wp.identity(n=4, dtype=float)[1:3, 0:3]
    out[11] = block[0, 1] + 10.0 * block[1, 2] + 100.0 * float(len(block))
    t = wp.matrix(wp.vec3(1.0, 2.0, 3.0), wp.quat_identity(), wp.vec3(2.0, 2.0, 2.0))
    out[12] = t[0, 0] + t[0, 3] * 10.0 + t[3, 3] * 100.0
    nanv = wp.vec3(0.0, wp.nan, 1.0)
    b_out[0] = wp.isnan(nanv)
    b_out[1] = wp.isfinite(nanv)
    b_out[2] = wp.isinf(wp.mat22(0.0, 0.0, wp.inf, 0.0))
    b_out[3] = wp.isfinite(wp.vec3(1.0))


def test_constructors_reductions_and_slices():
    out = wp.zeros(13, dtype=float)
    i_out = wp.zeros(2, dtype=wp.uint32)
    b_out = wp.zeros(4, dtype=wp.bool)
    wp.launch(construct, 1, inputs=[out, i_out, b_out])
    assert out.numpy().tolist() == [3.0, 10.0, 6.0, 6.0, 42.0, 17.0, 699.0, 15.0, 342.0, 15.0, 52.0, 211.0, 112.0]
    assert i_out.numpy().tolist() == [1, 2]
    assert b_out.numpy().tolist() == [True, False, True, True]


VEC0, MAT00 = wp.types.vector(0, float), wp.types.matrix((0, 0), float)


@wp.kernel
def empty_slices(out: wp.array(dtype=float)):
    v = wp.vec4(1.0, 2.0, 3.0, 4.0)
    m = wp.identity(n=4, dtype=float)
    q = wp.quat_identity()
    out[0] = float(v[123:] == VEC0())
    out[1] = float(len(v[:-123]) + len(q[3:0]))
    out[2] = float(m[123:] == MAT00()) + float(m[:, 5:] == MAT00()) + float(m[1:1, 0:2] == MAT00())
    out[3] = wp.length_sq(v[2:2]) + wp.dot(q[:0], VEC0())
    v[2:2] = VEC0()
    out[4] = v[2]


def test_empty_slices_of_vectors_and_matrices():
    """As in Warp 1.19: a slice that keeps nothing is a zero-length vector, or a matrix of shape (0, 0) (a matrix
    slice empty in one dimension is empty in both); it compares, measures and assigns like any other."""
    out = wp.zeros(5, dtype=float)
    wp.launch(empty_slices, 1, inputs=[out])
    assert out.numpy().tolist() == [1.0, 0.0, 3.0, 0.0, 3.0]


def test_python_scope_constructors():
    assert np.array_equal(wp.identity(3, wp.float64).numpy_value(), np.eye(3))
    v = wp.vector(1.0, 2.0, 3.0)
    assert type(v) is wp.vec3 and list(v) == [1.0, 2.0, 3.0]
    assert type(wp.vector(length=4, dtype=wp.int32)) is wp.vec4i
    m = wp.matrix(1.0, 2.0, 3.0, 4.0)
    assert type(m) is wp.mat22
    t = wp.matrix(wp.vec3(1.0, 2.0, 3.0), wp.quat_identity(), wp.vec3(2.0, 2.0, 2.0))
    assert np.allclose(t.numpy_value(), [[2, 0, 0, 1], [0, 2, 0, 2], [0, 0, 2, 3], [0, 0, 0, 1]])
    assert wp.ddot(wp.mat22(1.0, 2.0, 3.0, 4.0), wp.mat22(1.0, 1.0, 1.0, 1.0)) == 10.0
    assert wp.argmax(wp.vec3(1.0, 5.0, 2.0)) == 1 and wp.min(wp.vec3(1.0, 5.0, 2.0)) == 1.0
    assert math.isclose(wp.erfinv(0.5), 0.4769362762044699, rel_tol=1e-12)


@wp.kernel(enable_backward=False)
def error_functions(x: wp.array(dtype=Any), out: wp.array2d(dtype=Any)):
    i = wp.tid()
    out[i, 0] = wp.erf(x[i])
    out[i, 1] = wp.erfc(x[i])
    out[i, 2] = wp.erfinv(wp.erf(x[i]))
    out[i, 3] = wp.erfcinv(wp.erfc(x[i]))


for _dtype in (wp.float32, wp.float64):
    wp.overload(error_functions, [wp.array(dtype=_dtype), wp.array2d(dtype=_dtype)])


@pytest.mark.parametrize("prec", DTYPES)
def test_error_functions(prec):
    dtype, tol = DTYPES[prec]
    x = np.linspace(-1.8, 1.8, 37)
    out = wp.zeros((37, 4), dtype=dtype)
    wp.launch(error_functions, 37, inputs=[wp.array(x, dtype=dtype), out])
    got = out.numpy().astype(np.float64)
    assert np.allclose(got[:, 0], [math.erf(t) for t in x], atol=10 * tol)
    assert np.allclose(got[:, 1], [math.erfc(t) for t in x], atol=10 * tol)
    assert np.allclose(got[:, 2], x, atol=1e3 * tol)
    assert np.allclose(got[:, 3], x, atol=1e3 * tol)


@wp.kernel(enable_backward=False)
def rotations(q: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.float64), out_q: wp.array2d(dtype=wp.quatd),
              rpy: wp.array(dtype=wp.vec3d), axis_angle: wp.array(dtype=wp.vec4d), tr: wp.array(dtype=wp.transformd),
              m44: wp.array(dtype=wp.mat44d), pts: wp.array2d(dtype=wp.vec3d)):
    i = wp.tid()
    r = wp.quat_to_matrix(q[i])
    out_q[i, 0] = wp.quat_from_matrix(r)
    out_q[i, 1] = wp.quat_slerp(q[i], q[(i + 1) % 16], t[i])
    rpy[i] = wp.quat_to_rpy(q[i])
    axis = wp.vec3d()
    angle = wp.float64(0.0)
    wp.quat_to_axis_angle(q[i], axis, angle)
    axis_angle[i] = wp.vec4d(axis[0], axis[1], axis[2], angle)
    x = wp.transform(wp.vec3d(1.0, 2.0, 3.0) * t[i], q[i])
    m = wp.transform_to_matrix(x)
    m44[i] = m
    tr[i] = wp.transform_from_matrix(m)
    out_q[i, 2] = wp.quat_from_matrix(m)
    p = wp.vec3d(0.5, -1.0, 2.0)
    pts[i, 0] = wp.transform_point(m, p) - wp.transform_point(x, p)
    pts[i, 1] = wp.transform_vector(m, p) - wp.transform_vector(x, p)


def quat_mul(a, b):
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return np.r_[aw * bv + bw * av + np.cross(av, bv), aw * bw - av @ bv]


def test_rotation_conversions_round_trip():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(16, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1
    q[0] = [0, 0, 0, 1]
    q[1] = [1, 0, 0, 0]  # 180 degrees: the branches away from the trace
    q[2] = [0, 1, 0, 0]
    q[3] = [0, 0, 1, 0]
    t = rng.uniform(0, 1, 16)
    out_q = wp.zeros((16, 3), dtype=wp.quatd)
    rpy, aa = wp.zeros(16, dtype=wp.vec3d), wp.zeros(16, dtype=wp.vec4d)
    tr, m44, pts = wp.zeros(16, dtype=wp.transformd), wp.zeros(16, dtype=wp.mat44d), wp.zeros((16, 2), dtype=wp.vec3d)
    wp.launch(rotations, 16, inputs=[wp.array(q, dtype=wp.quatd), wp.array(t, dtype=wp.float64), out_q, rpy, aa, tr,
                                     m44, pts])
    got = out_q.numpy()
    for k in range(16):
        for j in (0, 2):  # the same rotation: q or -q
            assert min(np.abs(got[k, j] - q[k]).max(), np.abs(got[k, j] + q[k]).max()) < 1e-12
        # slerp: unit length, endpoints, constant angular speed (angle to q0 is t * total angle)
        q0, q1 = q[k], q[(k + 1) % 16]
        s = got[k, 1]
        assert np.isclose(np.linalg.norm(s), 1.0)
        total = np.arccos(np.clip(abs(q0 @ q1), -1, 1))  # the shorter way round
        assert np.isclose(np.arccos(np.clip(q0 @ s, -1, 1)), t[k] * total, atol=1e-7)
    r, p, y = rpy.numpy().T
    for k in range(16):
        back = np.asarray(wp.quat_rpy(r[k], p[k], y[k]))  # Python scope: float32
        assert min(np.abs(back - q[k]).max(), np.abs(back + q[k]).max()) < 1e-6, k
    a = aa.numpy()
    for k in range(16):
        rebuilt = np.r_[a[k, :3] * np.sin(a[k, 3] / 2), np.cos(a[k, 3] / 2)]
        assert np.allclose(rebuilt, q[k], atol=1e-12)
    assert np.allclose(tr.numpy()[:, :3], np.outer(t, [1.0, 2.0, 3.0]))
    assert np.abs(pts.numpy()).max() < 1e-12
    assert np.allclose(m44.numpy()[:, 3], [0, 0, 0, 1])


@wp.kernel
def rotation_loss(m: wp.array(dtype=wp.mat33d), q: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.float64),
                  out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = wp.quat_from_matrix(m[i])
    b = wp.quat_slerp(q[i], q[(i + 1) % 4], t[i])
    e = wp.quat_to_rpy(q[i])
    axis = wp.vec3d()
    angle = wp.float64(0.0)
    wp.quat_to_axis_angle(q[i], axis, angle)
    x = wp.transform_from_matrix(wp.transform_to_matrix(wp.transform(wp.vec3d(1.0, 2.0, 3.0) * t[i], q[i])))
    h = wp.matrix(wp.vec3d(1.0, 2.0, 3.0), q[i], wp.vec3d(t[i], 2.0, 3.0))
    out[i] = (a[0] + 2.0 * a[1] + 3.0 * a[3] + wp.dot(b, wp.quatd(1.0, -2.0, 0.5, 0.3)) + e[0] - e[1] * e[2]
              + axis[1] * angle + wp.dot(x, wp.transformd(1.0, 2.0, 3.0, 0.1, 0.2, 0.3, 0.4)) + wp.ddot(h, h))


def test_rotation_conversion_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    q = rng.normal(size=(4, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    m = rng.uniform(-1, 1, (4, 3, 3)) + np.eye(3)
    arrays = [wp.array(m, dtype=wp.mat33d, requires_grad=True), wp.array(q, dtype=wp.quatd, requires_grad=True),
              wp.array(rng.uniform(0.2, 0.8, 4), dtype=wp.float64, requires_grad=True)]
    gradcheck(rotation_loss, 4, arrays, [wp.zeros(4, dtype=wp.float64, requires_grad=True)], eps=1e-6, atol=1e-6,
              rtol=1e-5)


@wp.kernel
def axis_angle_and_slerp(q: wp.array(dtype=wp.quatd), r: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.float64),
                         aa: wp.array(dtype=wp.vec4d), s: wp.array(dtype=wp.quatd)):
    i = wp.tid()
    axis = wp.vec3d()
    angle = wp.float64(0.0)
    wp.quat_to_axis_angle(q[i], axis, angle)
    aa[i] = wp.vec4d(axis[0], axis[1], axis[2], angle)
    s[i] = wp.quat_slerp(q[i], r[i], t[i])


def test_axis_angle_and_slerp_take_the_shorter_way_round():
    """As in Warp 1.19: a quaternion with w < 0 gives the flipped axis and an angle in [0, pi] (q and -q are one
    rotation), and slerp towards a q1 with dot(q0, q1) < 0 goes the short way, reaching -q1 at t = 1."""
    rng = np.random.default_rng(7)
    q = rng.normal(size=(8, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[:4, 3] = -np.abs(q[:4, 3])
    q[4:, 3] = np.abs(q[4:, 3])
    r = -q[::-1] * [1, 1, 1, -1]
    t = np.array([0.0, 1.0, 0.3, 0.7, 0.0, 1.0, 0.5, 0.9])
    aa, s = wp.zeros(8, dtype=wp.vec4d), wp.zeros(8, dtype=wp.quatd)
    wp.launch(axis_angle_and_slerp, 8, inputs=[wp.array(q, dtype=wp.quatd), wp.array(r, dtype=wp.quatd),
                                               wp.array(t, dtype=wp.float64), aa, s])
    a = aa.numpy()
    for k in range(8):
        assert 0.0 <= a[k, 3] <= np.pi
        f = np.sign(q[k, 3])
        np.testing.assert_allclose(a[k, :3], f * q[k, :3] / np.linalg.norm(q[k, :3]), atol=1e-12)
        np.testing.assert_allclose(a[k, 3], 2.0 * np.arctan2(np.linalg.norm(q[k, :3]), abs(q[k, 3])), atol=1e-12)
        # slerp: q0 * exp(t log(q0^-1 q1)) with the shorter log, i.e. towards sign(dot) * q1 at constant speed
        near = np.sign(q[k] @ r[k]) * r[k]
        got = s.numpy()[k]
        assert np.isclose(np.linalg.norm(got), 1.0)
        total = np.arccos(np.clip(q[k] @ near, -1, 1))
        assert np.isclose(np.arccos(np.clip(q[k] @ got, -1, 1)), t[k] * total, atol=1e-7)
        assert np.isclose(np.arccos(np.clip(near @ got, -1, 1)), (1.0 - t[k]) * total, atol=1e-7)
    assert (q * r).sum(axis=1).min() < 0  # some pairs do need the flip


def rotation_chain(S: Any) -> Any:
    V3, Q, M44, TR = wp.types.vector(3, S), wp.types.quaternion(S), wp.types.matrix((4, 4), S), wp.transformation(S)

    def chain(q: wp.array(dtype=Q), out: wp.array(dtype=Q), m: wp.array(dtype=M44), e: wp.array(dtype=V3)):
        out[0] = wp.quat_from_matrix(wp.quat_to_matrix(q[0]))
        out[1] = wp.quat_slerp(q[0], q[1], S(0.25))
        mm = wp.transform_compose(V3(S(1.0), S(2.0), S(3.0)), q[0], V3(S(1.0), S(0.5), S(2.0)))
        p, r, s = wp.transform_decompose(mm)
        out[2] = r
        m[0] = wp.transform_to_matrix(wp.transform_from_matrix(wp.transform_to_matrix(TR(p, r))))
        e[0] = wp.quat_to_rpy(q[0])
        e[1] = wp.quat_to_euler(q[0], 2, 1, 0)
        e[2] = s

    chain.__name__ = chain.__qualname__ = f"rotation_chain_{S.__name__}"
    return wp.kernel(chain, module="unique")


def test_rotation_functions_in_half_precision():
    """The rotation/transform functions written in the kernel language (quat_from_matrix, quat_slerp,
    transform_compose/decompose/to/from_matrix, quat_to_rpy, quat_to_euler) have float16 overloads, as in
    Warp 1.19, and agree with float32 to half precision."""
    q = np.array([[0.1, 0.2, 0.3, 0.9], [0.0, -0.3, 0.6, 0.7]])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    got = {}
    for S in (wp.float16, wp.float32):
        Q, M44, V3 = wp.types.quaternion(S), wp.types.matrix((4, 4), S), wp.types.vector(3, S)
        out, m, e = wp.zeros(3, dtype=Q), wp.zeros(1, dtype=M44), wp.zeros(3, dtype=V3)
        wp.launch(rotation_chain(S), 1, inputs=[wp.array(q, dtype=Q), out, m, e])
        got[S] = [a.numpy().astype(np.float64) for a in (out, m, e)]
    for half, single in zip(got[wp.float16], got[wp.float32], strict=True):
        np.testing.assert_allclose(half, single, atol=5e-3)
    np.testing.assert_allclose(got[wp.float32][2][2], [1.0, 0.5, 2.0], atol=1e-5)


@wp.kernel
def local_arrays(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    acc = wp.zeros(shape=8, dtype=float)
    for k in range(8):
        acc[k] = x[k] * x[k]
    for k in range(8):
        acc[(k + 1) % 8] += acc[k] * 0.5
    grid = wp.zeros(shape=(2, 3), dtype=float)
    grid[1, 2] = x[0]
    pts = wp.zeros((4,), wp.vec3)
    pts[2] = wp.vec3(x[1], x[2], x[3])
    s = 0.0
    for k in range(8):
        s += acc[k] * float(k + 1)
    out[i] = s + grid[1, 2] * grid[1, 2] + wp.length(pts[2]) + float(len(acc))


def test_local_arrays_hold_values_and_gradients():
    x = wp.array(np.linspace(0.1, 0.8, 8, dtype=np.float32), dtype=float, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(local_arrays, 1, inputs=[x, out])
    xs = np.linspace(0.1, 0.8, 8)
    acc = xs * xs
    for k in range(8):
        acc[(k + 1) % 8] += acc[k] * 0.5
    expect = (acc * np.arange(1, 9)).sum() + xs[0] ** 2 + np.linalg.norm(xs[1:4]) + 8
    assert np.isclose(out.numpy()[0], expect, rtol=1e-5)
    gradcheck(local_arrays, 1, [x], [out], eps=1e-3, atol=2e-2, rtol=2e-2)


def kernel_from_source(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(f"import loomwork as wp\n\n@wp.kernel\ndef {name}(x: wp.array(dtype=float)):\n" +
                    "".join(f"    {line}\n" for line in body.splitlines()))
    ns = {"__name__": f"linalg_errors_{name}"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns[name]


@pytest.mark.parametrize("name,body,message", [
    ("dyn_shape", "n = wp.tid() + 3\na = wp.zeros(shape=n, dtype=float)", "must be specified as a constant"),
    ("three_d", "a = wp.zeros(shape=(2, 2, 2), dtype=float)", "1 or 2 positive sizes"),
    ("mat_dtype", "a = wp.zeros(shape=4, dtype=wp.mat22)", "not mat22f"),
    ("svd_args", "U = wp.mat33()\nwp.svd3(wp.mat33(), U)", "no overload of svd3() takes (mat33f, mat33f)"),
    ("svd_type", "U = wp.mat22()\ns = wp.vec3()\nV = wp.mat33()\nwp.svd3(wp.mat33(), U, s, V)",
     "argument 2 of svd3() is an output mat33f, but U is a mat22f"),
    ("svd_int", "U = wp.mat33()\ns = wp.vec3()\nV = wp.mat33()\n"
     "wp.svd3(wp.types.matrix(shape=(3, 3), dtype=int), U, s, V)",
     "no overload of svd3() takes (mat33i, mat33f, vec3f, mat33f)"),
    ("slice_dyn", "k = wp.tid() + 1\nv = wp.vec3()\nw = v[0:k]", "could not evaluate"),
    ("neg_range", "v = wp.vec3()\nx[0] = v[-4]", "index -4 out of range"),
    ("identity_n", "m = wp.identity(dtype=float)", "constant size n"),
    ("slerp_mixed", "q = wp.quat_slerp(wp.quat_identity(), wp.quatd(), 0.5)", "quat_slerp"),
])
def test_errors_name_the_line(tmp_path, name, body, message):
    k = kernel_from_source(tmp_path, name, body)
    with pytest.raises(wp.KernelError) as info:
        wp.launch(k, 1, inputs=[wp.zeros(1, dtype=float)])
    assert message in str(info.value) and f"{name}.py" in str(info.value), str(info.value)


@wp.kernel(enable_backward=False)
def huber(v: wp.array(dtype=wp.vec3d), d: wp.array(dtype=wp.float64), out: wp.array2d(dtype=wp.float64),
          n: wp.array(dtype=wp.vec3d), sa: wp.array(dtype=wp.spatial_matrixd)):
    i = wp.tid()
    out[i, 0] = wp.norm_huber(v[i])
    out[i, 1] = wp.norm_huber(v[i], d[i])
    out[i, 2] = wp.norm_pseudo_huber(v[i])
    out[i, 3] = wp.norm_pseudo_huber(v[i], d[i])
    n[i] = wp.smooth_normalize(v[i], d[i])
    sa[i] = wp.spatial_adjoint(wp.quat_to_matrix(wp.quat_rpy(d[i], 0.5, 0.25)), wp.skew(v[i]))


def test_huber_norms_and_spatial_adjoint_match_their_definitions():
    rng = np.random.default_rng(6)
    v = rng.uniform(-2, 2, (32, 3))
    d = rng.uniform(0.5, 2.0, 32)
    out, n = wp.zeros((32, 4), dtype=wp.float64), wp.zeros(32, dtype=wp.vec3d)
    sa = wp.zeros(32, dtype=wp.spatial_matrixd)
    wp.launch(huber, 32, inputs=[wp.array(v, dtype=wp.vec3d), wp.array(d, dtype=wp.float64), out, n, sa])
    norm = np.linalg.norm(v, axis=1)
    for dd, col in ((1.0, 0), (d, 1)):
        assert np.allclose(out.numpy()[:, col], np.where(norm <= dd, 0.5 * norm**2, dd * (norm - 0.5 * dd)))
    for dd, col in ((1.0, 2), (d, 3)):
        assert np.allclose(out.numpy()[:, col], dd * np.sqrt(1 + norm**2 / dd**2))
    assert np.allclose(n.numpy(), v / (d * np.sqrt(1 + norm**2 / d**2))[:, None])
    m = sa.numpy()
    assert np.allclose(m[:, :3, 3:], 0.0) and np.allclose(m[:, :3, :3], m[:, 3:, 3:])
    assert np.allclose(m[:, 3:, :3] @ np.array([1.0, 0.0, 0.0]), np.cross(v, [1.0, 0.0, 0.0]))


def test_rotation_builtins_in_python_scope():
    """The rotation helpers run in Python too, typed by the overload their arguments pick."""
    q = wp.quat_rpy(0.1, 0.2, 0.3)
    assert np.allclose(wp.quat_to_rpy(q), [0.1, 0.2, 0.3], atol=1e-6)
    back = wp.quat_from_matrix(wp.quat_to_matrix(q))
    assert type(back) is wp.quatf and np.allclose(back, q, atol=1e-6)
    assert np.allclose(wp.quat_slerp(wp.quat_identity(), wp.quat_rpy(0.0, 0.0, 1.0), 0.5), wp.quat_rpy(0.0, 0.0, 0.5),
                       atol=1e-6)
    m = wp.transform_to_matrix(wp.transform(wp.vec3(1.0, 2.0, 3.0), q))
    assert type(m) is wp.mat44 and np.allclose(wp.transform_from_matrix(m), [1.0, 2.0, 3.0, *q], atol=1e-6)
    assert wp.norm_huber(wp.vec3(3.0, 0.0, 0.0)) == 2.5
    # quat_to_axis_angle returns (axis, angle) in Python, as the kernel builtin computes them (w < 0 flips)
    axis, angle = wp.quat_to_axis_angle(wp.quath(1.0, 2.0, 3.0, 4.0))
    assert type(axis) is wp.vec3h and np.allclose(list(axis), np.array([1, 2, 3]) / np.sqrt(14), atol=1e-3)
    assert np.isclose(angle, 2.0 * np.arctan2(np.sqrt(14), 4.0))
    axis, angle = wp.quat_to_axis_angle(wp.quatd(0.0, 0.0, 0.6, -0.8))
    assert type(axis) is wp.vec3d and list(axis) == [0, 0, -1] and np.isclose(angle, 2.0 * np.arctan2(0.6, 0.8))


M23D, M32D, M44D = (wp.types.matrix(s, wp.float64) for s in ((2, 3), (3, 2), (4, 4)))


@wp.kernel(enable_backward=False)
def chained_products(i23: wp.array(dtype=M23D), i32: wp.array(dtype=M32D), i44: wp.array(dtype=M44D),
                     o22: wp.array(dtype=wp.mat22d), o33: wp.array(dtype=wp.mat33d), o44: wp.array(dtype=M44D)):
    i = wp.tid()
    o22[i] = i23[i] @ i32[i]
    o33[i] = i32[i] @ i23[i]
    o44[i] = i44[i] @ i44[i]


def test_chained_float64_matrix_products():
    """Three float64 matrix products in one kernel match NumPy: GCC 12.2's 512-bit SLP vectorization got the last
    one wrong on an AVX-512 machine until the build asked for 256-bit vectors (found by Warp's test_matmul)."""
    rng = np.random.default_rng(123)
    b, c, a = rng.standard_normal((1, 2, 3)), rng.standard_normal((1, 3, 2)), rng.standard_normal((1, 4, 4))
    outs = [wp.zeros(1, dtype=t) for t in (wp.mat22d, wp.mat33d, M44D)]
    wp.launch(chained_products, 1, inputs=[wp.array(b, dtype=M23D), wp.array(c, dtype=M32D), wp.array(a, dtype=M44D),
                                           *outs])
    for got, want in zip(outs, (b @ c, c @ b, a @ a), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)


@wp.kernel
def decompositions_returned(a: wp.array(dtype=wp.mat33), out: wp.array(dtype=float)):
    A = a[0]
    Q, d = wp.eig3(A + wp.transpose(A))
    U, s, V = wp.svd3(A)
    out[0] = d[0] + d[1] + d[2] + s[0] + wp.determinant(Q) * 0.0 + wp.determinant(U @ wp.transpose(V)) * 0.0
    axis, angle = wp.quat_to_axis_angle(wp.quat_identity())
    out[1] = angle + axis[0]


def test_output_parameters_returned_when_left_out():
    """Warp's second form: `Q, d = wp.eig3(A)`, `U, s, V = wp.svd3(A)` return the outputs (differentiably)."""
    a = wp.array([np.diag([3.0, 1.5, 0.5])], dtype=wp.mat33, requires_grad=True)
    out = wp.zeros(2, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(decompositions_returned, 1, inputs=[a, out])
    np.testing.assert_allclose(out.numpy(), [13.0, 0.0], atol=1e-5)
    tape.backward(grads={out: np.array([1.0, 0.0], dtype=np.float32)})
    np.testing.assert_allclose(a.grad.numpy()[0], np.diag([3.0, 2.0, 2.0]), atol=1e-5)


@wp.kernel
def one_row_and_column(v: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.float64)):
    r = wp.matrix_from_rows(v[0])
    c = wp.matrix_from_cols(v[0])
    out[0] = r[0, 0] + 2.0 * r[0, 2] + 3.0 * c[1, 0] * c[2, 0] + wp.ddot(r, wp.transpose(c)) * 0.0


def test_one_vector_matrices_and_their_gradients():
    """matrix_from_rows / matrix_from_cols take one vector too (a 1 x N or N x 1 matrix), as in Warp 1.19, with
    gradients."""
    v = wp.array([[1.0, 2.0, 3.0]], dtype=wp.vec3d, requires_grad=True)
    out = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(one_row_and_column, 1, inputs=[v, out])
    assert out.numpy()[0] == 1.0 + 6.0 + 18.0
    tape.backward(loss=out)
    np.testing.assert_array_equal(v.grad.numpy()[0], [1.0, 9.0, 8.0])
    assert type(wp.matrix_from_rows(wp.vec2(1.0, 2.0))) is wp.types.matrix((1, 2), wp.float32)


@wp.kernel
def slerp_sum(q0: wp.array(dtype=wp.quatd), q1: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.float64),
              out: wp.array(dtype=wp.quatd)):
    i = wp.tid()
    out[i] = wp.quat_slerp(q0[i], q1[i], t[i])


def test_slerp_depends_on_the_direction_of_q1_only():
    """quat_slerp is q0 exp(t log(q0^-1 q1)), as in Warp 1.19: the relative rotation's axis and angle do not change
    when q1 is scaled, so neither do the result nor (the gradient being orthogonal to q1) its derivatives along
    q1; gradients match central differences."""
    rng = np.random.default_rng(11)
    q0 = rng.normal(size=(6, 4))
    q0 /= np.linalg.norm(q0, axis=1, keepdims=True)
    q1 = rng.normal(size=(6, 4))
    q1 /= np.linalg.norm(q1, axis=1, keepdims=True)
    t = rng.uniform(0.1, 0.9, 6)
    outs = []
    for scale in (1.0, 2.5):
        args = [wp.array(q0, dtype=wp.quatd), wp.array(scale * q1, dtype=wp.quatd, requires_grad=True),
                wp.array(t, dtype=wp.float64)]
        out = wp.zeros(6, dtype=wp.quatd, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(slerp_sum, 6, inputs=[*args, out])
        tape.backward(grads={out: wp.full(6, wp.quatd(1.0, -2.0, 0.5, 3.0), dtype=wp.quatd)})
        outs.append(out.numpy())
        assert np.abs((args[1].grad.numpy() * q1).sum(axis=1)).max() < 1e-12
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-13)
    arrays = [wp.array(q0, dtype=wp.quatd, requires_grad=True), wp.array(q1, dtype=wp.quatd, requires_grad=True),
              wp.array(t, dtype=wp.float64, requires_grad=True)]
    gradcheck(slerp_sum, 6, arrays, [wp.zeros(6, dtype=wp.quatd, requires_grad=True)], eps=1e-6, atol=1e-6,
              rtol=1e-5)


@wp.kernel
def _decompose(a: wp.array(dtype=wp.mat33), sig: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3)):
    U, sigma, V = wp.svd3(a[0])
    Q, dd = wp.eig3(a[0])
    sig[0] = sigma
    d[0] = dd


def test_decompositions_in_python_scope_match_the_kernel_builtins():
    """`U, sigma, V = wp.svd3(A)` (and svd2, qr3, eig3) in Python: the kernel's values and conventions
    (rotations, sigma decreasing with the last negative for det(A) < 0, eigenvalues ascending), A's type."""
    A = wp.mat33(2.0, 1.0, 0.5, -1.0, 3.0, 0.2, 0.3, 0.1, -1.5)
    m = np.array(A.numpy_value())
    U, sigma, V = wp.svd3(A)
    u, v = np.array(U.numpy_value()), np.array(V.numpy_value())
    np.testing.assert_allclose(u @ np.diag(sigma.numpy_value()) @ v.T, m, atol=1e-5)
    assert type(U) is wp.mat33 and np.linalg.det(u) > 0 and np.linalg.det(v) > 0
    Q, R = wp.qr3(A)
    np.testing.assert_allclose(np.array(Q.numpy_value()) @ np.array(R.numpy_value()), m, atol=1e-5)
    assert np.allclose(np.tril(np.array(R.numpy_value()), -1), 0.0) and np.linalg.det(Q.numpy_value()) > 0
    _, d = wp.eig3(A)
    sig, dk = wp.zeros(1, dtype=wp.vec3), wp.zeros(1, dtype=wp.vec3)
    wp.launch(_decompose, 1, inputs=[wp.array([A], dtype=wp.mat33), sig, dk])
    np.testing.assert_allclose(sigma.numpy_value(), sig.numpy()[0], rtol=1e-4)
    np.testing.assert_allclose(d.numpy_value(), dk.numpy()[0], rtol=1e-4)
    U2, s2, V2 = wp.svd2(wp.mat22d(1.0, 2.0, 3.0, 4.0))
    assert type(U2) is wp.mat22d and s2[0] > abs(s2[1])


@wp.kernel
def _determinants(m: wp.array(dtype=wp.mat44), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.determinant(m[i])


def test_float32_determinants_are_summed_in_double():
    """A float32 4x4 determinant is the float64 determinant of the same float32 entries, rounded once: its
    cofactor expansion cancels, and summed in float32 the rounding showed in finite differences."""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((200, 4, 4)).astype(np.float32)
    out = wp.zeros(200)
    wp.launch(_determinants, 200, inputs=[wp.array(m, dtype=wp.mat44), out])
    exact = np.linalg.det(m.astype(np.float64))
    np.testing.assert_allclose(out.numpy(), exact, rtol=2e-7, atol=1e-7)


def test_a_local_array_shape_must_be_constant():
    """wp.zeros(shape=...) in a kernel with a shape known only at run time is refused in Warp's words."""

    @wp.kernel(module="unique")
    def runtime_shape():
        tid = wp.tid()
        wp.zeros(shape=(tid,), dtype=int)

    with pytest.raises(wp.WarpCodegenError, match="the `shape` argument must be specified as a constant"):
        wp.launch(runtime_shape, 1)
