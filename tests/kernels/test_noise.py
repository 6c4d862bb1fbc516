"""Noise: smooth, seeded, periodic where asked, divergence-free curl noise, and a gradient that matches FD."""

import numpy as np

import loomwork as wp
from loomwork.autograd import jacobian, jacobian_fd


@wp.kernel
def sample(seed: int, xs: wp.array(dtype=wp.vec3), n1: wp.array(dtype=float), n2: wp.array(dtype=float),
           n3: wp.array(dtype=float), p2: wp.array(dtype=float), p2s: wp.array(dtype=float)):
    i = wp.tid()
    x = xs[i]
    s = wp.uint32(seed)
    n1[i] = wp.noise(s, x[0])
    n2[i] = wp.noise(s, wp.vec2(x[0], x[1]))
    n3[i] = wp.noise(s, x)
    p2[i] = wp.pnoise(s, wp.vec2(x[0], x[1]), 4, 5)
    p2s[i] = wp.pnoise(s, wp.vec2(x[0] + 4.0, x[1] + 5.0), 4, 5)


@wp.kernel
def curl_divergence(xs: wp.array(dtype=wp.vec2), h: float, div: wp.array(dtype=float)):
    i = wp.tid()
    x = xs[i]
    s = wp.uint32(3)
    dx = wp.curlnoise(s, x + wp.vec2(h, 0.0)) - wp.curlnoise(s, x - wp.vec2(h, 0.0))
    dy = wp.curlnoise(s, x + wp.vec2(0.0, h)) - wp.curlnoise(s, x - wp.vec2(0.0, h))
    div[i] = (dx[0] + dy[1]) / (2.0 * h)


@wp.kernel
def noise3(xs: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.noise(wp.uint32(11), xs[i]) * 2.0


def run(seed, xs):
    outs = [wp.zeros(len(xs), dtype=float) for _ in range(5)]
    wp.launch(sample, len(xs), inputs=[seed, wp.array(xs, dtype=wp.vec3), *outs])
    return [o.numpy() for o in outs]


def test_noise_values():
    """Bounded, zero at lattice points, continuous, seed-dependent, and periodic for pnoise."""
    rng = np.random.default_rng(0)
    xs = rng.uniform(-10, 10, (4096, 3)).astype(np.float32)
    n1, n2, n3, p2, p2s = run(1, xs)
    for n in (n1, n2, n3):
        assert np.abs(n).max() <= 1.0 and n.std() > 0.05
    np.testing.assert_allclose(p2, p2s, atol=1e-5)  # periodic also below 0 (Warp's is not)
    lattice = np.floor(xs)
    assert np.abs(run(1, lattice)[2]).max() < 1e-6  # gradient noise vanishes on the lattice
    near = run(1, xs + 1e-4)[2]
    assert np.abs(near - n3).max() < 1e-2  # continuous
    assert not np.allclose(run(2, xs)[2], n3)


def test_curl_noise_is_divergence_free():
    """The divergence of 2-D curl noise, by central differences, is ~0 (compared with its size)."""
    xs = np.random.default_rng(1).uniform(-3, 3, (512, 2)).astype(np.float32)
    div = wp.zeros(512, dtype=float)
    wp.launch(curl_divergence, 512, inputs=[wp.array(xs, dtype=wp.vec2), 1e-2, div])
    assert np.abs(div.numpy()).mean() < 0.05


def test_noise_gradient_matches_finite_differences():
    """The adjoint of noise(seed, vec3) is its analytic gradient."""
    xs = wp.array(np.random.default_rng(2).uniform(-3, 3, (16, 3)).astype(np.float32), dtype=wp.vec3)
    out = wp.zeros(16, dtype=float)
    a = jacobian(noise3, 16, [xs], [out])[("xs", "out")]
    f = jacobian_fd(noise3, 16, [xs], [out], eps=1e-3)[("xs", "out")]
    np.testing.assert_allclose(a, f, atol=2e-2)


@wp.kernel
def noise4(xs: wp.array(dtype=wp.vec4), out: wp.array2d(dtype=float)):
    i = wp.tid()
    x = xs[i]
    out[i, 0] = wp.noise(wp.uint32(5), x)
    out[i, 1] = wp.pnoise(wp.uint32(5), x, 2, 3, 4, 5)
    out[i, 2] = wp.pnoise(wp.uint32(5), x + wp.vec4(2.0, 3.0, 4.0, 5.0), 2, 3, 4, 5)
    out[i, 3] = wp.noise(wp.uint32(5), x + wp.vec4(0.0, 0.0, 0.0, 1.0e-3))


def test_four_dimensional_noise():
    """4-D noise (e.g. 3-D space and time): bounded, zero on the lattice, continuous, periodic where asked."""
    rng = np.random.default_rng(7)
    xs = rng.uniform(-4, 4, (512, 4)).astype(np.float32)
    xs[:8] = np.round(xs[:8])
    out = wp.zeros((512, 4), dtype=float)
    wp.launch(noise4, 512, inputs=[wp.array(xs, dtype=wp.vec4), out])
    v = out.numpy()
    assert np.all(np.abs(v[:, 0]) <= 1.0) and v[:, 0].std() > 0.05
    assert np.allclose(v[:8, 0], 0.0, atol=1e-6)
    assert np.allclose(v[:, 1], v[:, 2], atol=1e-5)
    assert np.abs(v[:, 3] - v[:, 0]).max() < 0.02


# Warp 1.19's values (its CPU build, `wp.rand_init(7, i)` as the state) at these positions: noise 1-D to 4-D,
# pnoise(vec3, 3, 4, 5), curlnoise(vec2 and vec3, 2 octaves, 2.0, 0.5) and curlnoise(vec4).
WARP_X = np.array([[0.7708425  , 2.1312945  , 7.21147    , 5.2394586  ],
           [0.8471578  , 3.8981426  , 4.3114614  , 1.4376502  ],
           [6.611194   , 1.0230482  , 3.5210538  , 4.6506615  ],
           [3.875652   , 5.281187   , 6.64054    , 8.606405   ],
           [2.5578105  , 5.836925   , 6.265944   , 2.6344867  ],
           [0.013410752, 8.761143   , 2.685611   , 2.825874   ]], dtype=np.float32)
WARP_VALUES = np.array([[ 1.3578464e-01, -5.3677808e-02, -2.4029815e-01, -9.1340542e-02, -2.3898651e-01,  6.8778872e-01,
             2.6286101e-01, -1.4093706e-01, -8.4273553e-01,  2.2373621e+00,  4.6743155e-03,  3.7711239e-01,
             4.1799155e-01],
           [ 1.5708888e-01,  9.3241423e-02, -2.2407717e-01,  2.6451051e-01, -1.4211476e-01,  1.0445683e+00,
             7.8226256e-01, -7.3238426e-01,  5.8543694e-01,  9.7043550e-01,  4.2210886e-01, -5.6470908e-02,
             1.0808277e+00],
           [ 2.8018951e-02,  7.8587122e-02, -3.2452798e-01, -1.2414187e-02,  2.6752967e-01,  6.7508912e-01,
            -9.7411299e-01, -1.2666440e-01,  1.1333771e+00,  1.6839292e+00, -1.2865633e-02, -1.2975100e-01,
             5.7477432e-01],
           [ 2.3138374e-02, -1.7750107e-01, -1.2862670e-01,  1.5337728e-01, -1.7172158e-01,  5.8752584e-01,
            -1.7257378e-01, -1.0127485e-02,  5.1247340e-01,  1.0407176e+00, -1.8406802e-01,  5.9373069e-01,
            -1.9859311e-01],
           [-1.5840431e-01, -7.4135736e-02, -2.2283429e-01, -1.6424951e-01,  2.7955604e-01, -8.9348590e-01,
             8.6287361e-01, -9.5898628e-01,  1.5842106e+00,  2.3517340e-01,  1.0099747e+00,  8.8081503e-01,
             4.9307466e-02],
           [ 1.5847745e-03, -1.3813072e-01,  3.8471818e-02,  3.0245036e-02,  9.3837082e-02, -2.2616035e-01,
            -7.3335475e-01, -3.0935442e-01,  6.2539697e-01, -7.3005605e-01,  6.8914539e-01, -7.0176423e-02,
            -2.1686544e-01]], dtype=np.float32)


@wp.kernel
def warp_fields(xs: wp.array(dtype=wp.vec4), out: wp.array2d(dtype=float)):
    i = wp.tid()
    x = xs[i]
    s = wp.rand_init(7, i)
    out[i, 0] = wp.noise(s, x[0])
    out[i, 1] = wp.noise(s, wp.vec2(x[0], x[1]))
    out[i, 2] = wp.noise(s, wp.vec3(x[0], x[1], x[2]))
    out[i, 3] = wp.noise(s, x)
    out[i, 4] = wp.pnoise(s, wp.vec3(x[0], x[1], x[2]), 3, 4, 5)
    c2 = wp.curlnoise(s, wp.vec2(x[0], x[1]), wp.uint32(2), 2.0, 0.5)
    c3 = wp.curlnoise(s, wp.vec3(x[0], x[1], x[2]), wp.uint32(2), 2.0, 0.5)
    c4 = wp.curlnoise(s, x)
    out[i, 5] = c2[0]
    out[i, 6] = c2[1]
    for k in range(3):
        out[i, 7 + k] = c3[k]
        out[i, 10 + k] = c4[k]


def test_fields_are_warps():
    """noise, pnoise and curlnoise are Warp's fields for the same state: equal to float rounding (Warp's CPU
    build fuses multiply-adds, so the last bits differ)."""
    out = wp.zeros((6, 13), dtype=float)
    wp.launch(warp_fields, 6, inputs=[wp.array(WARP_X, dtype=wp.vec4), out])
    np.testing.assert_allclose(out.numpy(), WARP_VALUES, rtol=1e-5, atol=2e-6)


@wp.kernel
def periodic_and_curl(xs: wp.array(dtype=wp.vec4), out: wp.array2d(dtype=float)):
    i = wp.tid()
    x = xs[i]
    s = wp.uint32(9)
    out[i, 0] = wp.pnoise(s, wp.vec3(x[0], x[1], x[2]), 3, 4, 5)
    c2 = wp.curlnoise(s, wp.vec2(x[0], x[1]), wp.uint32(3), 2.0, 0.5)
    c3 = wp.curlnoise(s, wp.vec3(x[0], x[1], x[2]), wp.uint32(2), 1.7, 0.6)
    c4 = wp.curlnoise(s, x)
    out[i, 1] = c2[0]
    out[i, 2] = c2[1]
    for k in range(3):
        out[i, 3 + k] = c3[k]
        out[i, 6 + k] = c4[k]


def test_pnoise_and_curlnoise_gradients_match_finite_differences():
    """pnoise's adjoint is its gradient and curlnoise's the transposed Jacobian from the potentials' Hessians
    (2-D, 3-D with octaves, and the time-varying vec4 form), as finite differences give them."""
    xs = wp.array(np.random.default_rng(4).uniform(0.1, 2.9, (8, 4)).astype(np.float32), dtype=wp.vec4)
    out = wp.zeros((8, 9), dtype=float)
    a = jacobian(periodic_and_curl, 8, [xs], [out])[("xs", "out")]
    f = jacobian_fd(periodic_and_curl, 8, [xs], [out], eps=1e-3)[("xs", "out")]
    np.testing.assert_allclose(a, f, atol=3e-2 * np.abs(f).max())
