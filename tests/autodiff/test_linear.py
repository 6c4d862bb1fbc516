"""`loomwork.optim.linear`: CG, CR, BiCGSTAB and GMRES on dense, diagonal and user operators, against SciPy."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.optim.linear as la

scipy_linalg = pytest.importorskip("scipy.sparse.linalg")

N = 24


def _systems(dtype) -> dict:
    rng = np.random.default_rng(7)
    q = rng.standard_normal((N, N))
    spd = q @ q.T / N + np.diag(rng.uniform(0.5, 4.0, N))
    nonsym = spd + 0.3 * rng.standard_normal((N, N))
    b = rng.standard_normal(N)
    return {"spd": spd.astype(dtype), "nonsym": nonsym.astype(dtype), "b": b.astype(dtype)}


SOLVERS = {"cg": (la.cg, "spd"), "cr": (la.cr, "spd"), "bicgstab": (la.bicgstab, "nonsym"),
           "gmres": (la.gmres, "nonsym")}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("precond", [False, True])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_solution_matches_scipy(name, precond, dtype):
    """Each solver, with and without the Jacobi preconditioner, converges to SciPy's solution; the reported
    residual is below the reported tolerance max(atol, tol |b|)."""
    solver, kind = SOLVERS[name]
    sys = _systems(dtype)
    A_np, b_np = sys[kind].astype(np.float64), sys["b"].astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-11
    A, b = wp.array(sys[kind]), wp.array(sys["b"])
    x = wp.zeros(N, dtype=A.dtype)
    M = la.preconditioner(A, "diag") if precond else None
    iters, err, atol = solver(A, b, x, tol=tol, M=M, maxiter=200)
    assert isinstance(iters, int) and 0 < iters < 200
    assert err <= atol and atol == pytest.approx(tol * np.linalg.norm(b_np), rel=1e-5)
    scipy_solver = {"cg": scipy_linalg.cg, "cr": scipy_linalg.minres, "bicgstab": scipy_linalg.bicgstab,
                    "gmres": scipy_linalg.gmres}[name]
    ref, info = scipy_solver(A_np, b_np, rtol=1e-13)
    assert info == 0
    scale = 1e2 if dtype == np.float32 else 1e1
    np.testing.assert_allclose(x.numpy(), ref, atol=scale * tol * np.abs(ref).max())
    true_residual = np.linalg.norm(b_np - A_np @ x.numpy().astype(np.float64))
    assert true_residual <= 10 * atol


def _scipy_iterate(fn, A, b, k, **kw):
    """SciPy's iterate after k iterations (tolerances too small to stop it earlier)."""
    if fn is not scipy_linalg.minres:
        kw["atol"] = 0.0
    return fn(A, b, rtol=1e-300, maxiter=k, **kw)[0]


@pytest.mark.parametrize("name, precond", [("cg", False), ("cg", True), ("cr", False), ("bicgstab", False),
                                           ("bicgstab", True), ("gmres", False)])
def test_iterates_match_scipy(name, precond):
    """After a few iterations (one GMRES(6) cycle) the iterate is SciPy's: the same method, step for step
    (CR's iterates are MINRES's: both minimize the residual over the same Krylov space)."""
    solver, kind = SOLVERS[name]
    sys = _systems(np.float64)
    A_np, b_np = sys[kind], sys["b"]
    d = 1.0 / np.diag(A_np)
    k = 6 if name == "gmres" else 4
    kw = {"M": np.diag(d)} if precond else {}
    if name == "gmres":
        ref = _scipy_iterate(scipy_linalg.gmres, A_np, b_np, 1, restart=k)
    else:
        fn = {"cg": scipy_linalg.cg, "cr": scipy_linalg.minres, "bicgstab": scipy_linalg.bicgstab}[name]
        ref = _scipy_iterate(fn, A_np, b_np, k, **kw)
    assert np.linalg.norm(A_np @ ref - b_np) > 1e-3 * np.linalg.norm(b_np)  # not yet converged: a path to follow
    A, b = wp.array(A_np), wp.array(b_np)
    x = wp.zeros(N, dtype=wp.float64)
    M = la.preconditioner(A) if precond else None
    extra = {"restart": k} if name == "gmres" else {}
    iters, _, _ = solver(A, b, x, tol=0.0, atol=0.0, maxiter=k, M=M, **extra)
    assert iters == k
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-8, atol=1e-10)


@wp.kernel
def laplacian_mv(x: wp.array(dtype=wp.vec3d), y: wp.array(dtype=wp.vec3d), z: wp.array(dtype=wp.vec3d),
                 alpha: wp.float64, beta: wp.float64):
    i = wp.tid()
    n = x.shape[0]
    ax = wp.float64(3.0) * x[i]
    if i > 0:
        ax = ax - x[i - 1]
    if i < n - 1:
        ax = ax - x[i + 1]
    out = alpha * ax
    if beta != wp.float64(0.0):
        out = out + beta * y[i]
    z[i] = out


@wp.kernel
def print_iteration(cur_iter: wp.array(dtype=int), r_norm_sq: wp.array(dtype=wp.float64),
                    atol_sq: wp.array(dtype=wp.float64)):
    wp.printf("iteration %d\n", cur_iter[0])


def _laplacian_operator(n: int) -> la.LinearOperator:
    def matvec(x, y, z, alpha, beta):
        wp.launch(laplacian_mv, n, inputs=[x, y, z, wp.float64(alpha), wp.float64(beta)])

    return la.LinearOperator((3 * n, 3 * n), wp.vec3d, "cpu", matvec)


def test_user_operator_on_vec3_arrays_and_strided_vectors():
    """A LinearOperator of the user's (a kernel over vec3d entries) solves with every method, with b and the
    solution strided views; the result is SciPy's on the equivalent scalar system."""
    n = 10
    rng = np.random.default_rng(3)
    b_np = rng.standard_normal((n, 3))
    lap = 3.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    ref = np.linalg.solve(np.kron(lap, np.eye(3)), b_np.reshape(-1)).reshape(n, 3)
    for solver in (la.cg, la.cr, la.bicgstab, la.gmres):
        storage = wp.zeros(2 * n, dtype=wp.vec3d)
        x = storage[::2]
        b = wp.array(np.repeat(b_np, 3, axis=0), dtype=wp.vec3d)[::3]
        _, err, atol = solver(_laplacian_operator(n), b, x, tol=1e-12, M=wp.full(n, 1.0 / 3.0, dtype=wp.float64))
        assert err <= atol
        np.testing.assert_allclose(x.numpy(), ref, atol=1e-10)
        assert not storage.numpy()[1::2].any()  # the entries between the view's are left alone


def test_diagonal_operators():
    """A 1-D array is a diagonal operator: of vectors (one coefficient per component) or of scalars (one
    per entry, scaling its components); CG solves either exactly in one iteration."""
    d_vec = np.array([[1.0, 2.0, 4.0], [0.5, 1.0, 8.0]], dtype=np.float32)
    b_np = np.array([[1.0, 1.0, 1.0], [2.0, 3.0, 4.0]], dtype=np.float32)
    for diag, expect in ((wp.array(d_vec, dtype=wp.vec3), b_np / d_vec),
                         (wp.array([2.0, 4.0], dtype=wp.float32), b_np / np.array([[2.0], [4.0]]))):
        x = wp.zeros(2, dtype=wp.vec3)
        iters, err, _ = la.cg(diag, wp.array(b_np, dtype=wp.vec3), x, maxiter=10)
        np.testing.assert_allclose(x.numpy(), expect, rtol=1e-6)
        assert la.aslinearoperator(diag).shape == (2,)
    with pytest.raises(ValueError, match="contiguous"):
        strided = wp.zeros(4, dtype=wp.vec3)[::2]
        la.aslinearoperator(wp.array(d_vec, dtype=wp.vec3)).matvec(strided, strided, strided, 1.0, 0.0)


def test_dense_matvec_is_alpha_Ax_plus_beta_y():
    """aslinearoperator(2-D array).matvec(x, y, z, alpha, beta) stores alpha A x + beta y in z."""
    sys = _systems(np.float64)
    A = la.aslinearoperator(wp.array(sys["nonsym"]))
    x, y, z = wp.array(sys["b"]), wp.array(np.arange(N, dtype=np.float64)), wp.zeros(N, dtype=wp.float64)
    A.matvec(x, y, z, 2.0, -0.5)
    np.testing.assert_allclose(z.numpy(), 2.0 * sys["nonsym"] @ sys["b"] - 0.5 * np.arange(N), rtol=1e-12)
    assert A.shape == (N, N) and A.dtype is wp.float64 and A.scalar_type is wp.float64 and A.batch_count == 1


def test_device_side_run_and_kernel_callback(capfd):
    """check_every=0 returns device arrays (iterations, |r|^2, atol^2), stops at convergence on the CPU,
    and launches a kernel callback at the start and after every iteration."""
    sys = _systems(np.float64)
    A, b = wp.array(sys["spd"]), wp.array(sys["b"])
    x = wp.zeros(N, dtype=wp.float64)
    it, r2, a2 = la.cg(A, b, x, tol=1e-10, check_every=0, callback=print_iteration)
    assert isinstance(it, wp.array) and r2.numpy()[0] <= a2.numpy()[0]
    n = int(it.numpy()[0])
    assert 0 < n < N
    np.testing.assert_allclose(sys["spd"] @ x.numpy(), sys["b"], atol=1e-8)
    assert capfd.readouterr().out.split("\n")[:-1] == [f"iteration {i}" for i in range(n + 1)]


def test_python_callback_and_run_false_state():
    """A Python callback sees (iteration, residual, atol) every check_every iterations; run=False gives a
    solver state that solves again for new b and x, and refuses operands of another shape."""
    sys = _systems(np.float64)
    A, b = wp.array(sys["spd"]), wp.array(sys["b"])
    x = wp.zeros(N, dtype=wp.float64)
    seen = []
    state = la.cg(A, b, x, tol=1e-10, check_every=2, callback=lambda i, e, a: seen.append((i, e, a)), run=False)
    assert isinstance(state, la.CG) and not x.numpy().any()
    iters, err, atol = state()
    assert seen[0][0] == 0 and seen[-1] == (iters, err, atol)
    assert all(i % 2 == 0 for i, _, _ in seen[1:-1])
    b2 = wp.array(2.0 * sys["b"])
    x2 = wp.zeros(N, dtype=wp.float64)
    state(b=b2, x=x2)
    np.testing.assert_allclose(x2.numpy(), 2.0 * x.numpy(), rtol=1e-8)
    with pytest.raises(ValueError, match="shape"):
        state(b=wp.zeros(N + 1, dtype=wp.float64), x=wp.zeros(N + 1, dtype=wp.float64))


def test_restart_and_maxiter():
    """CG restarted every 5 iterations still converges; a solve stopped by maxiter reports maxiter
    iterations and a residual above the tolerance."""
    sys = _systems(np.float64)
    A, b = wp.array(sys["spd"]), wp.array(sys["b"])
    x = wp.zeros(N, dtype=wp.float64)
    iters, err, atol = la.cg(A, b, x, tol=1e-10, restart=5, maxiter=400)
    assert iters % 5 == 0 and err <= atol
    np.testing.assert_allclose(sys["spd"] @ x.numpy(), sys["b"], atol=1e-8)
    x.zero_()
    iters, err, atol = la.bicgstab(A, b, x, tol=1e-14, maxiter=3)
    assert iters == 3 and err > atol


def test_bad_input_is_refused_clearly():
    """Shape and dtype mismatches, non-square operators, unknown or unsupported preconditioners and
    host callbacks without host checks raise errors saying what is wrong."""
    sys = _systems(np.float32)
    A, b = wp.array(sys["spd"]), wp.array(sys["b"])
    x = wp.zeros(N, dtype=wp.float32)
    with pytest.raises(ValueError, match=r"A has shape \(24, 24\), but b has 23"):
        la.cg(A, wp.zeros(N - 1, dtype=wp.float32), wp.zeros(N - 1, dtype=wp.float32))
    with pytest.raises(ValueError, match="x .* and b .* must have the same"):
        la.cr(A, b, wp.zeros(N + 2, dtype=wp.float32))
    with pytest.raises(ValueError, match="square"):
        la.gmres(wp.zeros((N, N + 1), dtype=wp.float32), b, x)
    with pytest.raises(ValueError, match="square"):
        la.preconditioner(wp.zeros((N, N + 1), dtype=wp.float32))
    with pytest.raises(TypeError, match="float64"):
        la.bicgstab(A, wp.zeros(N, dtype=wp.float64), wp.zeros(N, dtype=wp.float64))
    with pytest.raises(TypeError, match="M .float64 on cpu. does not match A"):
        la.cg(A, b, x, M=wp.ones(N, dtype=wp.float64))
    with pytest.raises(ValueError, match="unsupported preconditioner type 'ilu'"):
        la.preconditioner(A, "ilu")
    with pytest.raises(ValueError, match="sparse BSR"):
        la.preconditioner(A, "block_jacobi_direct")
    with pytest.raises(NotImplementedError, match="sparse BSR"):
        la.FSAI(A)
    with pytest.raises(ValueError, match="dense matrix"):
        la.preconditioner(b, "diag")
    with pytest.raises(ValueError, match="cannot make a LinearOperator"):
        la.cg(sys["spd"], b, x)
    with pytest.raises(TypeError, match="callback must be a kernel"):
        la.cg(A, b, x, check_every=0, callback=print)
    with pytest.raises(NotImplementedError, match="batched"):
        la.cg(la.aslinearoperator(A, batch_offsets=wp.array([0, N], dtype=int)), b, x)
    with pytest.raises(ValueError, match="restart must be positive"):
        la.cg(A, b, x, restart=0)
    assert la.preconditioner(A, "id") is None
    assert not x.numpy().any()  # nothing ran
