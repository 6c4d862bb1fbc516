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
    np.testing.assert_allclose(p2, p2s, atol=1e-5)
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
