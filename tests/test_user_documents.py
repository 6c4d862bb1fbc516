"""The NumPy-only snippets of the user's documents (shared/seeds), run unchanged with `import loomwork as wp`."""

import numpy as np

import loomwork as wp

n = 1024


@wp.kernel
def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def kernel_1(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def kernel_2(y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + 1.0


@wp.kernel
def matmul_kernel(
    a: wp.array2d[float],  # NxK input
    b: wp.array2d[float],  # KxM input
    c: wp.array2d[float],  # NxM output
):
    i, j = wp.tid()
    N = a.shape[0]
    K = a.shape[1]
    M = b.shape[1]
    if i < N and j < M:
        s = wp.float32(0)
        for k in range(K):
            s += a[i, k] * b[k, j]
        c[i, j] = s


@wp.kernel
def rowsum_kernel(matrix: wp.array2d[float], sums: wp.array1d[float]):
    i, j = wp.tid()
    wp.atomic_add(sums, i, matrix[i, j])


@wp.kernel
def lookup_kernel(table: wp.array[float], indices: wp.array[int], output: wp.array[float]):
    i = wp.tid()
    output[i] = table[indices[i]]


@wp.kernel
def diagonal_kernel(output: wp.array[wp.mat33]):
    tid = wp.tid()
    output[tid] = wp.mat33(1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0)


@wp.kernel
def sincos_kernel(angle: wp.array[float], sin_out: wp.array[float], cos_out: wp.array[float]):
    tid = wp.tid()
    sin_out[tid] = wp.sin(angle[tid])
    cos_out[tid] = wp.cos(angle[tid])


@wp.kernel
def scale_sum_square(a: wp.array[float], b: wp.array[float], s: float, out: wp.array[float]):
    tid = wp.tid()
    out[tid] = (a[tid] * s + b[tid]) ** 2.0


def test_interop_saxpy_with_numpy():
    """Interoperability: NumPy arrays passed to a CPU launch are updated in place."""
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    wp.launch(saxpy, dim=n, inputs=[x, y, 1.0], device="cpu")
    np.testing.assert_array_equal(y, x + 1.0)


def test_array_interface_and_dtype_conversions():
    """np.array(w) reads a CPU array; dtype_to_numpy gives matching NumPy arrays."""
    w = wp.array([1.0, 2.0, 3.0], dtype=float, device="cpu")
    a = np.array(w)
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    warp_type = wp.float32
    numpy_type = wp.dtype_to_numpy(warp_type)
    a = wp.zeros(n, dtype=warp_type)
    b = np.zeros(n, dtype=numpy_type)
    assert a.numpy().dtype == b.dtype


def test_faq_synchronize_pattern_on_cpu():
    """The FAQ's launch-then-numpy pattern, and copies followed by wp.synchronize()."""
    array_x = wp.array(np.arange(n, dtype=np.float32))
    array_y = wp.zeros(n, dtype=float)
    array_z = wp.zeros(n, dtype=float)
    wp.launch(kernel_1, n, [array_x, array_y], device="cpu")
    wp.launch(kernel_2, n, [array_y, array_z], device="cpu")
    z = array_z.numpy()
    np.testing.assert_array_equal(z, 2 * np.arange(n) + 1)
    cpu_array_1 = wp.empty(n, dtype=float)
    wp.copy(cpu_array_1, array_z)
    wp.synchronize()
    np.testing.assert_array_equal(cpu_array_1.numpy(), z)


def test_faq_fill_forms():
    """wp.full, arr.fill_ and arr[:4].fill from the FAQ."""
    arr = wp.full(8, 1.23, dtype=float)
    arr.fill_(1.23)
    arr[:4].fill(0.5)
    np.testing.assert_allclose(arr.numpy(), [0.5] * 4 + [1.23] * 4, rtol=1e-6)


def test_jax_document_kernels_run_with_numpy_data():
    """The JAX page's kernels (matmul, rowsum, lookup, diagonal, sincos, scale_sum_square) on NumPy data."""
    a = np.full((3, 2), 2, dtype=np.float32)
    b = np.full((2, 4), 3, dtype=np.float32)
    c = wp.zeros((3, 4), dtype=float)
    wp.launch(matmul_kernel, dim=(3, 4), inputs=[a, b, c])
    np.testing.assert_array_equal(c.numpy(), a @ b)

    matrices = np.arange(12, dtype=np.float32).reshape(3, 4)
    sums = wp.zeros(3, dtype=float)
    wp.launch(rowsum_kernel, dim=matrices.shape, inputs=[matrices, sums])
    np.testing.assert_array_equal(sums.numpy(), matrices.sum(1))

    table = np.arange(100, dtype=np.float32)
    idx = np.random.default_rng(42).integers(0, 100, 50).astype(np.int32)
    out = wp.zeros(50, dtype=float)
    wp.launch(lookup_kernel, dim=50, inputs=[table, idx, out])
    np.testing.assert_array_equal(out.numpy(), table[idx])

    diag = wp.zeros(4, dtype=wp.mat33)
    wp.launch(diagonal_kernel, dim=4, inputs=[diag])
    np.testing.assert_array_equal(diag.numpy(), np.tile(np.diag([1.0, 2.0, 3.0]), (4, 1, 1)))

    ang = np.linspace(0, 2 * np.pi, 32).astype(np.float32)
    s, co = wp.zeros(32, dtype=float), wp.zeros(32, dtype=float)
    wp.launch(sincos_kernel, dim=32, inputs=[ang, s, co])
    np.testing.assert_allclose(s.numpy(), np.sin(ang), atol=1e-6)
    np.testing.assert_allclose(co.numpy(), np.cos(ang), atol=1e-6)

    av = np.arange(16, dtype=np.float32)
    bv = np.ones(16, dtype=np.float32)
    o = wp.zeros(16, dtype=float)
    wp.launch(scale_sum_square, dim=16, inputs=[av, bv, 2.0, o])
    np.testing.assert_allclose(o.numpy(), (av * 2 + bv) ** 2)


def test_rosenbrock_forward_with_vector_factory():
    """The Rosenbrock example's forward pass: wp.types.vector(length=2, dtype=wp.float32) and a @wp.func."""
    pvec2 = wp.types.vector(length=2, dtype=wp.float32)

    @wp.func
    def rosenbrock(x: float, y: float):
        return (1.0 - x) ** 2.0 + 100.0 * (y - x**2.0) ** 2.0

    def eval_rosenbrock(xs: wp.array(dtype=pvec2), z: wp.array(dtype=float)):
        i = wp.tid()
        x = xs[i]
        z[i] = rosenbrock(x[0], x[1])

    k = wp.kernel(eval_rosenbrock, module="test_user_documents_rosenbrock")
    rng = np.random.default_rng(42)
    xy = rng.normal(size=(1500, 2)).astype(np.float32)
    z = wp.zeros(1500)
    wp.launch(k, dim=1500, inputs=[wp.array(xy, dtype=pvec2)], outputs=[z])
    x, y = xy[:, 0].astype(np.float64), xy[:, 1].astype(np.float64)
    np.testing.assert_allclose(z.numpy(), (1 - x) ** 2 + 100 * (y - x**2) ** 2, rtol=2e-5)
