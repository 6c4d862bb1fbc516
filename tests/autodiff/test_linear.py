"""`loomwork.optim.linear`: CG, CR, BiCGSTAB and GMRES on dense, diagonal and user operators, against SciPy;
the preconditioners of BSR matrices (Jacobi, block Jacobi, FSAI) against NumPy re-derivations."""

import numpy as np
import pytest

import loomwork as wp
import loomwork.optim.linear as la
import loomwork.sparse as sp

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
    with pytest.raises(ValueError, match="block_jacobi_direct.* needs A to be a loomwork.sparse BsrMatrix, got array"):
        la.preconditioner(A, "block_jacobi_direct")
    with pytest.raises(ValueError, match="FSAI: A must be a square loomwork.sparse BsrMatrix"):
        la.FSAI(A)
    with pytest.raises(ValueError, match="dense matrix"):
        la.preconditioner(b, "diag")
    with pytest.raises(ValueError, match="cannot make a LinearOperator"):
        la.cg(sys["spd"], b, x)
    with pytest.raises(TypeError, match="callback must be a kernel"):
        la.cg(A, b, x, check_every=0, callback=print)
    for offsets, err in (([0, N + 1], "non-decreasing scalar dof indices in .0, 24."), ([5, 2], "non-decreasing"),
                         ([0], "at least 2 entries")):
        with pytest.raises(TypeError if err == "at least 2 entries" else ValueError, match=err):
            la.cg(la.aslinearoperator(A, batch_offsets=wp.array(offsets, dtype=int)), b, x)
    with pytest.raises(ValueError, match="max_batch_length is 4, but a subproblem .* has 24 dofs"):
        la.cg(la.aslinearoperator(A, batch_offsets=wp.array([0, N], dtype=int), max_batch_length=4), b, x)
    with pytest.raises(ValueError, match="restart must be positive"):
        la.cg(A, b, x, restart=0)
    assert la.preconditioner(A, "id") is None
    assert not x.numpy().any()  # nothing ran




# ---- batched systems: independent subproblems in one solve ----

def _block_system(sizes: list[int], kind: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block-diagonal matrix of `kind` blocks of `sizes` (each scaled differently), b and the offsets."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    A = np.zeros((offsets[-1], offsets[-1]))
    for i, n in enumerate(sizes):
        q = rng.standard_normal((n, n))
        block = q @ q.T / n + np.diag(rng.uniform(0.5, 4.0, n))
        if kind == "nonsym":
            block += 0.3 * rng.standard_normal((n, n))
        A[offsets[i]:offsets[i + 1], offsets[i]:offsets[i + 1]] = block * 10.0 ** (2 * i)
    return A, rng.standard_normal(offsets[-1]) * 10.0 ** np.repeat(np.arange(len(sizes)), sizes), offsets


@pytest.mark.parametrize("check_every", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_batched_subproblems_each_converge_to_their_own_tolerance(name, dtype, check_every):
    """With `batch_offsets`, each subproblem (scaled 1 to 1e6 apart) is solved to its own relative
    tolerance, as SciPy solves it alone; the reported residual and tolerance are the largest, and with
    check_every=0 the device arrays hold one entry per subproblem."""
    solver, kind = SOLVERS[name]
    sizes = [8, 15, 10, 12]
    A_np, b_np, offsets = _block_system(sizes, kind, seed=len(name))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    A = la.aslinearoperator(wp.array(A_np.astype(dtype)), batch_offsets=wp.array(offsets, dtype=int),
                            max_batch_length=15)
    assert A.batch_count == 4 and A.max_batch_length == 15
    b, x = wp.array(b_np.astype(dtype)), wp.zeros(len(b_np), dtype=wp.dtype_from_numpy(dtype))
    result = solver(A, b, x, tol=tol, maxiter=400, check_every=check_every)
    atols, residuals = [], []
    for i in range(len(sizes)):
        rows = slice(offsets[i], offsets[i + 1])
        Ai, bi = A_np[rows, rows], b_np[rows]
        residuals.append(np.linalg.norm(Ai @ x.numpy()[rows] - bi))
        atols.append(tol * np.linalg.norm(bi))
        np.testing.assert_allclose(x.numpy()[rows], np.linalg.solve(Ai, bi), rtol=300 * tol,
                                   atol=300 * tol * np.abs(np.linalg.solve(Ai, bi)).max())
    assert max(r / a for r, a in zip(residuals, atols, strict=True)) < 30.0
    if check_every:
        iterations, err, atol = result
        assert 0 < iterations < 400 and err <= atol
        np.testing.assert_allclose(atol, max(atols), rtol=1e-3)
    else:
        iterations, rr, atol_sq = (r.numpy() for r in result)
        assert rr.shape == atol_sq.shape == (4,) and (rr <= atol_sq).all() and 0 < iterations[0] < 400
        np.testing.assert_allclose(atol_sq, np.square(atols), rtol=2e-3)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_batched_dofs_outside_every_subproblem_are_left_alone(name):
    """Scalar dofs past the last offset (and before the first) keep their values, even where A couples
    them to the subproblems and under GMRES's right preconditioning; vector dtypes batch by scalar dof."""
    solver = SOLVERS[name][0]
    kwargs = {"restart": 2} if name == "gmres" else {}
    diag = wp.array([9.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    b = wp.array([1.0, 2.0, 6.0, 12.0, 100.0, 200.0])
    x = wp.array([-1.0, 0.0, 0.0, 0.0, 7.0, 8.0])
    A = la.aslinearoperator(diag, batch_offsets=wp.array([1, 3, 4], dtype=int))
    iterations, err, atol = solver(A, b, x, tol=1e-10, maxiter=20, check_every=1, **kwargs)
    assert iterations >= 1 and err <= atol
    np.testing.assert_allclose(x.numpy(), [-1.0, 1.0, 2.0, 3.0, 7.0, 8.0], rtol=1e-9)

    coupled = la.aslinearoperator(wp.array([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [5.0, 0.0, 1.0]]),
                                  batch_offsets=wp.array([0, 2], dtype=int))
    x = wp.array([0.0, 0.0, 7.0])
    solver(coupled, wp.array([2.0, 6.0, 7.0]), x, tol=1e-12, M=wp.array([1.0, 1.0, 1.0]), **kwargs)
    np.testing.assert_allclose(x.numpy(), [1.0, 2.0, 7.0], rtol=1e-12)

    vec = la.aslinearoperator(wp.array([(2.0, 3.0), (4.0, 5.0), (6.0, 7.0)], dtype=wp.vec2d),
                              batch_offsets=wp.array([0, 1, 4], dtype=int))
    x = wp.array([(0.0, 0.0), (0.0, 0.0), (7.0, 8.0)], dtype=wp.vec2d)
    solver(vec, wp.array([(2.0, 6.0), (12.0, 20.0), (100.0, 200.0)], dtype=wp.vec2d), x, tol=1e-10, maxiter=20,
           **kwargs)
    np.testing.assert_allclose(x.numpy(), [(1.0, 2.0), (3.0, 4.0), (7.0, 8.0)], rtol=1e-9)


def test_batched_solver_state_keeps_its_layout():
    """A solver made with run=False reruns with a new b, but refuses an A with other batch offsets; an
    empty subproblem is allowed; maxiter defaults to the dofs per subproblem."""
    A_np, b_np, offsets = _block_system([6, 0, 6], "spd", seed=3)
    layout = wp.array(offsets, dtype=int)
    A = la.aslinearoperator(wp.array(A_np), batch_offsets=layout)
    x = wp.zeros(12, dtype=wp.float64)
    assert la.cg(A, wp.array(b_np), x, tol=1e-12)[0] == 4  # 12 dofs / 3 subproblems
    state = la.cg(A, wp.array(b_np), x, tol=1e-12, maxiter=50, run=False)
    state()
    state(b=wp.array(2.0 * b_np), x=x)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(A_np, 2.0 * b_np), rtol=1e-8)
    with pytest.raises(ValueError, match="batch_offsets array .the same array."):
        state(A=la.aslinearoperator(wp.array(A_np), batch_offsets=wp.array(offsets, dtype=int)))


# ---- preconditioners of loomwork.sparse BSR matrices ----

def _poisson(m: int, seed: int | None = None) -> np.ndarray:
    """The 5-point Laplacian on an m x m grid (with random edge weights in [0.5, 1.5] given a seed: no
    two candidates of FSAI's growth then tie)."""
    t = 2.0 * np.eye(m) - np.eye(m, k=1) - np.eye(m, k=-1)
    d = np.kron(np.eye(m), t) + np.kron(t, np.eye(m))
    if seed is not None:
        w = np.triu(np.random.default_rng(seed).uniform(0.5, 1.5, d.shape), 1)
        off = np.where(d < 0, -(w + w.T), 0.0)
        d = off - np.diag(off.sum(axis=1)) + 0.01 * np.eye(d.shape[0])
    return d


def _elasticity(m: int, seed: int = 0) -> np.ndarray:
    """An SPD matrix of 3x3 blocks on an m x m grid, coupling each node's three components (no ties)."""
    q = np.random.default_rng(seed).standard_normal((3, 3))
    return np.kron(_poisson(m, seed), 0.3 * q @ q.T + np.eye(3)) + 0.1 * np.eye(3 * m * m)


def _bsr(dense: np.ndarray, b: int, dtype=wp.float64) -> sp.BsrMatrix:
    nb = dense.shape[0] // b
    blocks = dense.reshape(nb, b, nb, b).transpose(0, 2, 1, 3)
    rows, cols = np.nonzero(np.abs(blocks).sum(axis=(2, 3)))
    values = blocks[rows, cols]
    vtype = dtype if b == 1 else wp.types.matrix((b, b), dtype=dtype)
    return sp.bsr_from_triplets(nb, nb, wp.array(rows.astype(np.int32)), wp.array(cols.astype(np.int32)),
                                wp.array(values.reshape(-1) if b == 1 else values, dtype=vtype))


def _apply(M: la.LinearOperator, x: np.ndarray, dtype=wp.float64) -> np.ndarray:
    z = wp.zeros(x.shape[0], dtype=dtype)
    M.matvec(wp.array(x, dtype=dtype), z, z, 1.0, 0.0)
    return z.numpy()


@pytest.mark.parametrize("ptype", ["diag", "diag_abs"])
def test_bsr_jacobi_inverts_the_diagonal_coefficients(ptype):
    """"diag" of a BSR matrix (scalar or 3x3 blocks) scales by 1 / diagonal (1 / |diagonal| for
    "diag_abs"), 1 where the diagonal is 0, on scalar or vec3 vectors; z = alpha M x + beta y."""
    rng = np.random.default_rng(3)
    d = _elasticity(3) + rng.standard_normal((27, 27)) * (np.abs(_elasticity(3)) > 0)
    d[4, 4], d[10, 10], d[11, 11] = 0.0, -2.0, 0.0
    diag = np.diag(d)
    inv = 1.0 / np.where(diag == 0, 1.0, np.abs(diag) if ptype == "diag_abs" else diag)
    x = rng.standard_normal(27)
    for b in (1, 3):
        M = la.preconditioner(_bsr(d, b), ptype)
        np.testing.assert_allclose(_apply(M, x), inv * x, rtol=1e-14)
        xv, y = wp.array(x.reshape(9, 3), dtype=wp.vec3d), wp.array(x.reshape(9, 3), dtype=wp.vec3d)
        M.matvec(xv, y, y, 2.0, -1.0)
        np.testing.assert_allclose(y.numpy().ravel(), 2.0 * inv * x - x, rtol=1e-13)


def _odd_blocks() -> np.ndarray:
    """Five 3x3 diagonal blocks: SPD, non-symmetric invertible, zero, singular, SPD scaled by 1e-4."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((3, 3))
    return np.stack([q @ q.T + np.eye(3), q + 4.0 * np.eye(3), np.zeros((3, 3)), np.outer([1, 2, 3], [1, 2, 3]),
                     1e-4 * (q @ q.T + np.eye(3))])


BLOCK_JACOBI = ["block_jacobi_direct", "block_jacobi_sequential", "block_jacobi_tile"]


@pytest.mark.parametrize("dtype", [wp.float32, wp.float64])
@pytest.mark.parametrize("ptype", BLOCK_JACOBI)
def test_block_jacobi_inverts_the_diagonal_blocks(ptype, dtype):
    """Each block-Jacobi variant applies NumPy's inverse of every diagonal block (off-diagonal blocks are
    ignored; a missing block reads as zero); a zero or singular block gives the identity, and so does a
    non-symmetric one for the factorizations that need symmetric positive definite blocks (not "direct")."""
    blocks = _odd_blocks()
    n = 3 * len(blocks)
    dense = np.zeros((n, n))
    for i, blk in enumerate(blocks):
        dense[3 * i:3 * i + 3, 3 * i:3 * i + 3] = blk
    dense[0:3, 6:9] = 5.0  # an off-diagonal block
    M = la.preconditioner(_bsr(dense, 3, dtype), ptype)
    assert M.shape == (n, n)
    expect = [np.linalg.inv(blocks[0]), np.linalg.inv(blocks[1]) if ptype == "block_jacobi_direct" else np.eye(3),
              np.eye(3), np.eye(3), np.linalg.inv(blocks[4])]
    x = np.random.default_rng(0).standard_normal(n)
    got = _apply(M, x, dtype)
    tol = 1e-4 if dtype == wp.float32 else 1e-10
    for i, inv in enumerate(expect):
        np.testing.assert_allclose(got[3 * i:3 * i + 3], inv @ x[3 * i:3 * i + 3], rtol=tol,
                                   atol=tol * np.abs(inv @ x[3 * i:3 * i + 3]).max())


def test_block_jacobi_variants_agree_and_fall_back_to_jacobi_for_csr():
    """On SPD blocks the three spellings give one preconditioner, usable as cg's M on vec3 systems; on a CSR
    matrix each is "diag"."""
    d = _elasticity(4)
    A = _bsr(d, 3)
    x = np.random.default_rng(1).standard_normal(d.shape[0])
    ref = np.zeros_like(x)
    for i in range(0, d.shape[0], 3):
        ref[i:i + 3] = np.linalg.solve(d[i:i + 3, i:i + 3], x[i:i + 3])
    for ptype in BLOCK_JACOBI:
        np.testing.assert_allclose(_apply(la.preconditioner(A, ptype), x), ref, rtol=1e-12)
        np.testing.assert_allclose(_apply(la.preconditioner(_bsr(d, 1), ptype), x), x / np.diag(d), rtol=1e-14)
    b = wp.array(x.reshape(-1, 3), dtype=wp.vec3d)
    u = wp.zeros_like(b)
    iters, err, atol = la.cg(A, b, u, tol=1e-10, M=la.preconditioner(A, "block_jacobi_sequential"), maxiter=500)
    assert err <= atol
    np.testing.assert_allclose(d @ u.numpy().ravel(), x, atol=1e-8)


def _fsai_reference(A: np.ndarray, width: int, tolerance: float, floor: float, step: int = 1) -> np.ndarray:
    """G grown row by row with the documented rule, in NumPy: on Ah = D A D (unit diagonal), add to S the
    `step` columns c < i, neighbours of S, with the largest |Ah[c, S] z| > 0 (ties to the lower column),
    where Ah[S, S] z = e_0; stop at `width` entries, a pivot <= floor, no candidate, or an energy gain
    1 - z0_old / z0_new <= tolerance. G[i, S] = D z / sqrt(z_0)."""
    n = A.shape[0]
    scale = 1.0 / np.sqrt(np.diag(A))
    Ah = A * np.outer(scale, scale)
    G = np.zeros_like(A)
    for i in range(n):
        S, z = [i], np.ones(1)
        while len(S) < width:
            frontier = sorted({c for r in S for c in np.nonzero(A[r])[0] if c < i and c not in S})
            scores = [(-abs(Ah[c, S] @ z), c) for c in frontier if abs(Ah[c, S] @ z) > 0]
            if not scores:
                break
            old, stopped = z[0], False
            for _, c in sorted(scores)[:step]:
                if len(S) == width:
                    break
                sub = Ah[np.ix_(S + [c], S + [c])]
                L = np.linalg.cholesky(Ah[np.ix_(S, S)])
                w = np.linalg.solve(L, sub[-1, :-1])
                if 1.0 - w @ w <= floor:
                    stopped = True
                    break
                S.append(c)
            z = np.linalg.solve(Ah[np.ix_(S, S)], np.eye(len(S))[0])
            if stopped or (tolerance > 0 and 1.0 - old / z[0] <= tolerance):
                break
        G[i, S] = scale[S] * z / np.sqrt(z[0])
    return G


def _dense_of(G: sp.BsrMatrix) -> np.ndarray:
    off, cols, vals = G.offsets.numpy(), G.columns.numpy(), G.values.numpy()
    d = np.zeros(G.shape)
    for r in range(G.nrow):
        d[r, cols[off[r]:off[r + 1]]] = vals[off[r]:off[r + 1]]
    return d


FSAI_SETTINGS = [{}, {"max_row_size": 16, "kap_tolerance": 0.0}, {"max_row_size": 12, "max_step_size": 3}]


@pytest.mark.parametrize("kw", FSAI_SETTINGS)
@pytest.mark.parametrize("problem", ["poisson", "elasticity"])
def test_fsai_factor_matches_numpy_rederivation(problem, kw):
    """FSAI's G (from scalar or 3x3 blocks) is the NumPy re-derivation of the same pattern rule: lower
    triangular, sorted columns with the diagonal last, G^T G closer to A^-1 than Jacobi (a smaller
    condition number of G A G^T)."""
    d = _poisson(7, seed=1) if problem == "poisson" else _elasticity(4)
    b = 1 if problem == "poisson" else 3
    F = la.FSAI(_bsr(d, b), **kw)
    ref = _fsai_reference(d, kw.get("max_row_size", 8), kw.get("kap_tolerance", 1e-3), 1e-12,
                          kw.get("max_step_size", 1))
    G = _dense_of(F.G)
    np.testing.assert_array_equal(G != 0, ref != 0)
    np.testing.assert_allclose(G, ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(_dense_of(F.GT), G.T)
    assert F.truncated_rows == 0 and not np.triu(G, 1).any()
    off, cols = F.G.offsets.numpy(), F.G.columns.numpy()
    assert all(cols[off[r + 1] - 1] == r and (np.diff(cols[off[r]:off[r + 1]]) > 0).all() for r in range(F.G.nrow))
    jacobi = np.diag(1.0 / np.sqrt(np.diag(d)))
    assert np.linalg.cond(G @ d @ G.T) < 0.5 * np.linalg.cond(jacobi @ d @ jacobi)
    x = np.random.default_rng(2).standard_normal(d.shape[0])
    np.testing.assert_allclose(_apply(F, x), G.T @ (G @ x), rtol=1e-12)


@pytest.mark.parametrize("problem", ["poisson", "elasticity"])
def test_fsai_takes_cg_fewer_iterations(problem):
    """CG on a 2-D Poisson matrix and a 3x3-block elasticity-like matrix: FSAI takes fewer iterations than
    no, Jacobi or block-Jacobi preconditioning, and every solver converges with M=FSAI (also FSAI by
    preconditioner(A, "fsai"))."""
    d = _poisson(16) if problem == "poisson" else _elasticity(10)
    A = _bsr(d, 1 if problem == "poisson" else 3)
    rhs = np.random.default_rng(4).standard_normal(d.shape[0])
    b = wp.array(rhs)

    def iterations(M, solver=la.cg) -> int:
        x = wp.zeros_like(b)
        iters, err, atol = solver(A, b, x, tol=1e-8, M=M, maxiter=2000, check_every=1)
        assert err <= atol
        np.testing.assert_allclose(d @ x.numpy(), rhs, atol=1e-6 * np.abs(rhs).max())
        return iters

    fsai = la.preconditioner(A, "fsai")
    assert isinstance(fsai, la.FSAI)
    plain = iterations(None)
    others = [plain, iterations(la.preconditioner(A, "diag")), iterations(la.preconditioner(A, "block_jacobi_direct"))]
    assert iterations(fsai) < 0.7 * min(others)
    assert iterations(la.FSAI(A, max_row_size=24)) < iterations(fsai)
    for solver in (la.cr, la.bicgstab, la.gmres):
        assert iterations(fsai, solver) < plain


def test_fsai_update_refits_on_the_same_supports():
    """update() refits G for new values of A on the same supports (A scaled by 4: G halves); a changed sparsity,
    an update without reuse_pattern or a non-SPD refit raise ValueError and keep the previous factor;
    regularize_refit reports the rows it fixed instead; defer_pattern starts from the identity and chooses
    the supports at the first update; factor_dtype=float32 stores a float64 factor in float32."""
    d = _elasticity(4)
    A = _bsr(d, 3)
    F = la.FSAI(A, reuse_pattern=True)
    G0 = _dense_of(F.G)
    A.values.assign(wp.array(A.values.numpy() * 4.0, dtype=A.dtype))
    assert F.update() is F and F.source is A
    np.testing.assert_allclose(_dense_of(F.G), G0 / 2.0, rtol=1e-12)
    np.testing.assert_allclose(_dense_of(F.GT), G0.T / 2.0, rtol=1e-12)
    assert not F.update_status.numpy().any()
    with pytest.raises(ValueError, match="reuse_pattern=True"):
        la.FSAI(A).update()
    other = _bsr(d + np.eye(d.shape[0], k=9) + np.eye(d.shape[0], k=-9), 3)
    with pytest.raises(ValueError, match="sparsity differs"):  # more blocks: Warp names the sparsity
        F.update(other)
    with pytest.raises(ValueError, match="original's shape, dtype, device"):
        F.update(_bsr(d[:9, :9], 3))
    indefinite = _bsr(d - 3.0 * np.eye(d.shape[0]), 3)
    with pytest.raises(ValueError, match="diagonals .* SPD local systems"):
        F.update(indefinite)
    np.testing.assert_allclose(_dense_of(F.G), G0 / 2.0, rtol=1e-12)  # kept
    R = la.FSAI(_bsr(d, 3), reuse_pattern=True, regularize_refit=True, validate_topology=False)
    R.update(indefinite)
    status = R.update_status.numpy()
    assert status[0] == 0 and status[1] > 0 and np.isfinite(_dense_of(R.G)).all()

    D = la.FSAI(_bsr(d, 3), reuse_pattern=True, defer_pattern=True)
    assert D.truncated_rows is None and D.pattern_ready.numpy()[0] == 0
    np.testing.assert_array_equal(_dense_of(D.G), np.eye(d.shape[0]))
    D.update()
    assert D.pattern_ready.numpy()[0] == 1 and not D.pattern_status.numpy().any()
    np.testing.assert_allclose(_dense_of(D.G), G0, rtol=1e-12)

    S = la.FSAI(_bsr(d, 3), factor_dtype=wp.float32)
    assert S.G.values.dtype == wp.float32
    np.testing.assert_allclose(_dense_of(S.G), G0, rtol=1e-6)


def test_sparse_preconditioners_refuse_bad_input():
    """Non-BSR, non-square, rectangular-block, integer or unsupported-precision matrices and bad FSAI options
    raise errors naming the argument."""
    d = _elasticity(2)
    A = _bsr(d, 3)
    rect = sp.bsr_from_triplets(2, 3, wp.array([0, 1], dtype=int), wp.array([0, 1], dtype=int),
                                wp.array(np.ones((2, 3, 3)), dtype=wp.mat33d))
    for ptype in BLOCK_JACOBI:
        with pytest.raises(ValueError, match="as many block rows as block columns"):
            la.preconditioner(rect, ptype)
    with pytest.raises(ValueError, match="as many block rows"):
        la.preconditioner(rect, "diag")
    mat32 = wp.types.matrix((3, 2), dtype=wp.float64)
    with pytest.raises(ValueError, match="square matrix blocks, A's are 3x2"):
        la.preconditioner(sp.bsr_zeros(2, 3, mat32), "block_jacobi_direct")
    with pytest.raises(ValueError, match="block_jacobi_tile.*float32 or float64"):
        la.preconditioner(sp.bsr_zeros(2, 2, wp.types.matrix((2, 2), dtype=wp.float16)), "block_jacobi_tile")
    with pytest.raises(ValueError, match="FSAI: A must be square"):
        la.FSAI(rect)
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        la.FSAI(sp.bsr_zeros(2, 2, wp.types.matrix((2, 2), dtype=wp.bfloat16)))
    for kw, msg in (({"max_row_size": 0}, "max_row_size must be an integer in"),
                    ({"max_step_size": 65}, "max_step_size"), ({"kap_tolerance": 1.0}, "kap_tolerance"),
                    ({"pivot_floor": 0.0}, "pivot_floor"), ({"factor_dtype": wp.float16}, "factor_dtype"),
                    ({"defer_pattern": True}, "defer_pattern requires reuse_pattern")):
        with pytest.raises(ValueError, match=msg):
            la.FSAI(A, **kw)
    with pytest.raises(ValueError, match="finite positive diagonals .1 rows"):
        la.FSAI(_bsr(d - np.diag(np.eye(d.shape[0])[0] * d[0, 0]), 3))
    with pytest.raises(ValueError, match="FSAI matvec: x must be"):
        la.FSAI(A).matvec(wp.zeros(5, dtype=wp.float64), wp.zeros(12), wp.zeros(12), 1.0, 0.0)
    with pytest.raises(ValueError, match="unsupported preconditioner type 'ilu'"):
        la.preconditioner(A, "ilu")
