"""The same kernels on the CPU and on a GPU give the same results: math functions, vectors, matrices,
quaternions and transforms, integer arithmetic, control flow, structs, atomics, random numbers, noise,
half and double precision, strided views and adjoints. Skips without a GPU."""

import numpy as np
import pytest

import loomwork as wp

pytestmark = pytest.mark.skipif(not wp.is_cuda_available(),
                                reason="no CUDA device on this machine (CUDA code is still compiled by NVRTC)")


def on_both(kernel, dim, make_args, rtol=2e-6, atol=2e-6):
    """Launch `kernel` on the CPU and the GPU with the same arguments (`make_args(device)`) and compare every
    array argument afterwards."""
    results = []
    for device in ("cpu", "cuda:0"):
        args = make_args(device)
        wp.launch(kernel, dim, inputs=args, device=device)
        results.append([a.numpy() for a in args if isinstance(a, wp.array)])
    for cpu, gpu in zip(*results, strict=True):
        if cpu.dtype.names:  # structs: field by field
            for name in cpu.dtype.names:
                np.testing.assert_allclose(gpu[name], cpu[name], rtol=rtol, atol=atol, err_msg=name)
        elif np.issubdtype(cpu.dtype, np.floating):
            np.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(gpu, cpu)


RNG = np.random.default_rng(7)
X = RNG.uniform(0.1, 2.0, 257).astype(np.float32)


@wp.kernel
def math_functions(x: wp.array(dtype=float), out: wp.array2d(dtype=float)):
    i = wp.tid()
    v = x[i]
    out[i, 0] = wp.sin(v) + wp.cos(v) * wp.tan(v * 0.5)
    out[i, 1] = wp.exp(v) - wp.log(v) + wp.log2(v) + wp.log10(v)
    out[i, 2] = wp.pow(v, 1.7) + wp.sqrt(v) + wp.cbrt(v)
    out[i, 3] = wp.atan2(v, 1.0 - v) + wp.asin(v * 0.4) + wp.acos(v * 0.4) + wp.atan(v)
    out[i, 4] = wp.sinh(v) + wp.cosh(v) + wp.tanh(v)
    out[i, 5] = wp.floor(v * 3.3) + wp.ceil(v * 3.3) + wp.round(v * 3.3) + wp.trunc(-v * 3.3) + wp.frac(v * 3.3)
    out[i, 6] = wp.clamp(v, 0.5, 1.5) + wp.min(v, 1.0) + wp.max(v, 1.0) + wp.abs(v - 1.0) + wp.sign(v - 1.0)
    out[i, 7] = wp.smoothstep(0.2, 1.8, v) + wp.lerp(1.0, 3.0, v) + wp.step(v - 1.0) + wp.degrees(wp.radians(v))
    out[i, 8] = wp.erf(v - 1.0) + wp.erfc(v) + wp.erfinv(wp.clamp(v - 1.0, -0.9, 0.9))


def test_math_functions():
    # the GPU's transcendental functions differ from the host's by an ulp or two
    on_both(math_functions, X.size, lambda d: [wp.array(X, device=d), wp.zeros((X.size, 9), dtype=float, device=d)],
            rtol=1e-5, atol=1e-5)


@wp.kernel
def linear_algebra(p: wp.array(dtype=wp.vec3), out_v: wp.array(dtype=wp.vec3), out_m: wp.array(dtype=wp.mat33),
                   out_q: wp.array(dtype=wp.quat), out_s: wp.array(dtype=float)):
    i = wp.tid()
    a = p[i]
    b = wp.vec3(a[1], a[2] + 1.0, a[0] - 0.5)
    m = wp.outer(a, b) + wp.identity(n=3, dtype=float) * 2.0
    q = wp.quat_from_axis_angle(wp.normalize(a), wp.length(b))
    t = wp.transform(a, q)
    out_v[i] = wp.cross(a, b) + wp.transform_point(t, b) + wp.quat_rotate_inv(q, a) + m @ a
    out_m[i] = wp.inverse(m) @ wp.transpose(m) + wp.diag(b)
    out_q[i] = wp.mul(q, wp.quat_inverse(wp.quat_from_matrix(wp.quat_to_matrix(q)))) + q
    out_s[i] = wp.determinant(m) + wp.dot(a, b) + wp.trace(m) + wp.norm_l1(a) + wp.length_sq(b)


def test_vectors_matrices_quaternions():
    pts = RNG.standard_normal((200, 3)).astype(np.float32)

    def args(d):
        return [wp.array(pts, dtype=wp.vec3, device=d), wp.zeros(200, dtype=wp.vec3, device=d),
                wp.zeros(200, dtype=wp.mat33, device=d), wp.zeros(200, dtype=wp.quat, device=d),
                wp.zeros(200, dtype=float, device=d)]

    on_both(linear_algebra, 200, args, rtol=2e-4, atol=2e-4)


@wp.kernel
def integers(a: wp.array(dtype=int), b: wp.array(dtype=wp.int64), out: wp.array2d(dtype=wp.int64)):
    i = wp.tid()
    x = a[i]
    y = b[i]
    out[i, 0] = wp.int64(x // 7 + x % 7 + (x << 3) + (x >> 2) + (x & 0xFF) + (x | 3) + (x ^ 0x55))
    out[i, 1] = y // wp.int64(13) + y % wp.int64(13) + wp.int64(wp.min(x, 100)) + wp.int64(wp.abs(x))
    out[i, 2] = wp.int64(wp.uint32(x) * wp.uint32(2654435761) >> wp.uint32(7))
    k = 0
    while k * k < wp.abs(x) % 1000:
        k += 1
    acc = 0
    for j in range(0, 50, 3):
        if j % 2 == 0:
            continue
        if j > 40:
            break
        acc += j * x
    out[i, 3] = wp.int64(k * 1000 + acc)


def test_integer_arithmetic_and_control_flow():
    a = RNG.integers(-100000, 100000, 300).astype(np.int32)
    b = RNG.integers(-(2**40), 2**40, 300).astype(np.int64)
    on_both(integers, 300, lambda d: [wp.array(a, device=d), wp.array(b, device=d),
                                      wp.zeros((300, 4), dtype=wp.int64, device=d)])


@wp.struct
class Body:
    pos: wp.vec3
    vel: wp.vec3
    mass: float
    id: int


@wp.func
def kinetic(b: Body) -> float:
    return 0.5 * b.mass * wp.dot(b.vel, b.vel)


@wp.kernel
def struct_step(bodies: wp.array(dtype=Body), dt: float, energy: wp.array(dtype=float)):
    i = wp.tid()
    b = bodies[i]
    b.vel = b.vel + wp.vec3(0.0, -9.8, 0.0) * dt
    b.pos = b.pos + b.vel * dt
    b.id = b.id * 2 + 1
    bodies[i] = b
    energy[i] = kinetic(b)


def test_structs_and_functions():
    def args(d):
        items = [Body(pos=wp.vec3(float(i), 0.0, 0.0), vel=wp.vec3(1.0, float(i) * 0.1, 0.0), mass=1.0 + i, id=i)
                 for i in range(40)]
        return [wp.array(items, dtype=Body, device=d), 0.01, wp.zeros(40, dtype=float, device=d)]

    on_both(struct_step, 40, args)


@wp.kernel
def atomics(x: wp.array(dtype=float), total: wp.array(dtype=float), lo: wp.array(dtype=float),
            hi: wp.array(dtype=float), counts: wp.array(dtype=int)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])
    wp.atomic_min(lo, 0, x[i])
    wp.atomic_max(hi, 0, x[i])
    wp.atomic_add(counts, i % 8, 1)


def test_atomics():
    n = 100000
    vals = RNG.standard_normal(n).astype(np.float32)

    def args(d):
        return [wp.array(vals, device=d), wp.zeros(1, dtype=float, device=d), wp.full(1, 1e9, dtype=float, device=d),
                wp.full(1, -1e9, dtype=float, device=d), wp.zeros(8, dtype=int, device=d)]

    on_both(atomics, n, args, rtol=1e-3, atol=1e-3)  # float sums in another order


@wp.kernel
def random_numbers(seed: int, out: wp.array2d(dtype=float), ints: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    out[i, 0] = wp.randf(state)
    out[i, 1] = wp.randf(state, -2.0, 2.0)
    out[i, 2] = wp.randn(state)
    out[i, 3] = wp.noise(wp.uint32(seed), wp.vec3(float(i) * 0.37, 0.5, 1.25))
    out[i, 4] = wp.pnoise(wp.uint32(seed), wp.vec2(float(i) * 0.11, 2.5), 4, 4)
    ints[i] = wp.randu(state)


def test_random_numbers_and_noise_match_the_cpu():
    on_both(random_numbers, 500, lambda d: [42, wp.zeros((500, 5), dtype=float, device=d),
                                             wp.zeros(500, dtype=wp.uint32, device=d)], rtol=1e-5, atol=1e-5)


@wp.kernel
def precisions(h: wp.array(dtype=wp.float16), d: wp.array(dtype=wp.float64), oh: wp.array(dtype=wp.float16),
               od: wp.array(dtype=wp.float64)):
    i = wp.tid()
    oh[i] = h[i] * wp.float16(2.0) + wp.float16(0.5)
    od[i] = wp.sqrt(d[i]) * wp.float64(1.0e10) + wp.exp(d[i] * wp.float64(1.0e-3))


def test_half_and_double_precision():
    hv = RNG.uniform(-4, 4, 128).astype(np.float16)
    dv = RNG.uniform(0, 1e6, 128)
    on_both(precisions, 128, lambda dev: [wp.array(hv, device=dev), wp.array(dv, device=dev),
                                          wp.zeros(128, dtype=wp.float16, device=dev),
                                          wp.zeros(128, dtype=wp.float64, device=dev)], rtol=1e-12, atol=0)


@wp.kernel
def strided(a: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 10.0 + float(i - j)


def test_strided_and_transposed_views():
    base = RNG.standard_normal((30, 40)).astype(np.float32)

    def args(d):
        full = wp.array(base, device=d)
        return [full[::2, 1::3].transpose(), wp.zeros((13, 15), dtype=float, device=d)]

    on_both(strided, (13, 15), args)


@wp.kernel
def energy(p: wp.array(dtype=wp.vec3), k: float, e: wp.array(dtype=float)):
    i = wp.tid()
    a = p[i]
    b = p[(i + 1) % p.shape[0]]
    d = wp.length(a - b) - 1.0
    r = wp.sin(a[0]) * wp.exp(-a[1] * a[1])
    if d > 0.0:
        wp.atomic_add(e, 0, k * d * d + r)
    else:
        wp.atomic_add(e, 0, 0.5 * k * d * d - r)


def test_adjoints_match_the_cpu():
    pts = RNG.standard_normal((64, 3)).astype(np.float32)
    grads = []
    for d in ("cpu", "cuda:0"):
        p = wp.array(pts, dtype=wp.vec3, device=d, requires_grad=True)
        e = wp.zeros(1, dtype=float, device=d, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(energy, 64, inputs=[p, 3.0, e], device=d)
        tape.backward(e)
        grads.append((e.numpy()[0], p.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-4)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-4, atol=1e-5)
