"""Random numbers in kernels: reproducible per seed and stream, statistically sound, differentiable in lo/hi."""

import numpy as np
import pytest

import loomwork as wp

N = 1 << 18


@wp.kernel
def draw(seed: int, f: wp.array(dtype=float), g: wp.array(dtype=float), n: wp.array(dtype=float),
         i: wp.array(dtype=int), r: wp.array(dtype=int)):
    tid = wp.tid()
    state = wp.rand_init(seed, tid)
    f[tid] = wp.randf(state)
    g[tid] = wp.randf(state, -2.0, 3.0)
    n[tid] = wp.randn(state)
    i[tid] = wp.randi(state, 0, 10)
    r[tid] = wp.randi(state)


@wp.kernel
def noisy_scale(lo: wp.array(dtype=float), hi: wp.array(dtype=float), out: wp.array(dtype=float)):
    tid = wp.tid()
    state = wp.rand_init(7, tid)
    s = 0.0
    for _ in range(4):
        s += wp.randf(state, lo[0], hi[0])
    wp.atomic_add(out, 0, s)


def run(seed):
    outs = [wp.zeros(N, dtype=t) for t in (float, float, float, int, int)]
    wp.launch(draw, N, inputs=[seed, *outs])
    return [o.numpy().copy() for o in outs]


def test_streams_are_reproducible_and_seeded():
    """The same seed gives the same numbers; another seed other numbers; threads get distinct streams."""
    a, b, c = run(1), run(1), run(2)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert len(np.unique(a[4])) > 0.99 * N


def test_distributions():
    """Means and variances of uniform, ranged uniform, normal and integer draws match their laws."""
    f, g, n, i, _ = run(3)
    assert f.min() >= 0.0 and f.max() < 1.0
    assert abs(f.mean() - 0.5) < 0.005 and abs(f.var() - 1 / 12) < 0.002
    assert g.min() >= -2.0 and g.max() < 3.0 and abs(g.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.01 and abs(n.var() - 1.0) < 0.01
    assert abs(np.mean(n**4) - 3.0) < 0.1  # the normal's kurtosis
    counts = np.bincount(i, minlength=10)
    assert i.min() == 0 and i.max() == 9 and counts.min() > 0.95 * N / 10
    assert abs(np.corrcoef(f[:-1], f[1:])[0, 1]) < 0.01  # neighbouring streams are uncorrelated


def test_gradients_flow_to_the_range_bounds():
    """d/dlo and d/dhi of a sum of randf(state, lo, hi) draws are the sums of (1 - u) and u."""
    lo = wp.array([1.0], dtype=float, requires_grad=True)
    hi = wp.array([3.0], dtype=float, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(noisy_scale, 1000, inputs=[lo, hi, out])
    tape.backward(loss=out)
    u_sum = (out.numpy()[0] - 4000 * 1.0) / 2.0  # out = sum(lo + 2u)
    assert lo.grad.numpy()[0] == pytest.approx(4000 - u_sum, rel=1e-4)
    assert hi.grad.numpy()[0] == pytest.approx(u_sum, rel=1e-4)


def test_state_must_be_a_uint32():
    """wp.randf on something other than a uint32 state is a clear TypeError naming the argument."""

    def bad(a: wp.array(dtype=float)):
        a[0] = wp.randf(1.5)

    k = wp.kernel(bad, module="unique")
    with pytest.raises(TypeError, match=r"argument 1 of randf\(\) is an in-out uint32, but 1.5 is a float32"):
        wp.launch(k, 1, inputs=[np.zeros(1, np.float32)])


@wp.kernel
def draws_from_stored_states(states: wp.array(dtype=wp.uint32), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.randf(states[i]) + float(wp.poisson(states[i], 4.0)) * 0.0
    s = states[i]
    out[i] -= wp.randf(s)


@wp.kernel
def draws_from_expressions(seed: int, out: wp.array(dtype=float)):
    i = wp.tid()
    s = wp.rand_init(seed, i)
    out[i] = wp.randf(wp.rand_init(seed, i)) - wp.randf(s) + wp.randf(s, 0.0, 1.0) * 0.0


def test_a_state_given_as_an_expression_advances_a_copy():
    """The in-out state may be any uint32 value: the draw advances a temporary."""
    out = wp.zeros(8)
    wp.launch(draws_from_expressions, 8, inputs=[7, out])
    np.testing.assert_array_equal(out.numpy(), 0.0)


def test_states_read_from_arrays_advance_a_copy():
    """A state read from an array (like Warp, e.g. wp.poisson(states[tid], lam)) draws from a copy: the
    array is unchanged and the draw equals one from a local holding the same state."""
    states = wp.array(np.arange(100, 200, dtype=np.uint32))
    out = wp.zeros(100)
    wp.launch(draws_from_stored_states, 100, inputs=[states, out])
    np.testing.assert_array_equal(states.numpy(), np.arange(100, 200))
    np.testing.assert_array_equal(out.numpy(), 0.0)


@wp.kernel
def samplers(seed: int, sphere: wp.array(dtype=wp.vec3), ball: wp.array(dtype=wp.vec3), disk: wp.array(dtype=wp.vec2),
             ring: wp.array(dtype=wp.vec2), hemi: wp.array(dtype=wp.vec3), tri: wp.array(dtype=wp.vec2),
             cube: wp.array(dtype=wp.vec3), counts: wp.array(dtype=wp.uint32), big: wp.array(dtype=wp.uint32),
             bits: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    sphere[i] = wp.sample_unit_sphere_surface(state)
    ball[i] = wp.sample_unit_sphere(state)
    disk[i] = wp.sample_unit_disk(state)
    ring[i] = wp.sample_unit_ring(state)
    hemi[i] = wp.sample_unit_hemisphere_surface(state)
    tri[i] = wp.sample_triangle(state)
    cube[i] = wp.sample_unit_cube(state)
    counts[i] = wp.poisson(state, 3.5)
    big[i] = wp.poisson(state, 100.0)
    bits[i] = wp.randu(state)


def test_samplers_and_poisson():
    """Geometric samplers land where they should with the right radial laws; Poisson means and variances."""
    n = 1 << 17
    outs = [wp.zeros(n, dtype=t) for t in (wp.vec3, wp.vec3, wp.vec2, wp.vec2, wp.vec3, wp.vec2, wp.vec3,
                                          wp.uint32, wp.uint32, wp.uint32)]
    wp.launch(samplers, n, inputs=[5, *outs])
    sphere, ball, disk, ring, hemi, tri, cube, counts, big, bits = (o.numpy() for o in outs)
    np.testing.assert_allclose(np.linalg.norm(sphere, axis=1), 1.0, atol=1e-5)
    assert np.abs(sphere.mean(0)).max() < 0.01
    r = np.linalg.norm(ball, axis=1)
    assert r.max() <= 1.0 and abs(np.mean(r**3) - 0.5) < 0.01  # r^3 is uniform in a ball
    rd = np.linalg.norm(disk, axis=1)
    assert rd.max() <= 1.0 and abs(np.mean(rd**2) - 0.5) < 0.01  # r^2 is uniform in a disk
    np.testing.assert_allclose(np.linalg.norm(ring, axis=1), 1.0, atol=1e-5)
    assert hemi[:, 2].min() >= 0.0 and abs(hemi[:, 2].mean() - 0.5) < 0.01
    assert tri.min() >= 0.0 and (tri.sum(1) <= 1.0 + 1e-6).all() and abs(tri[:, 0].mean() - 1 / 3) < 0.01
    assert np.abs(cube).max() <= 0.5 and abs(cube.var() - 1 / 12) < 0.002
    assert abs(counts.mean() - 3.5) < 0.03 and abs(counts.var() - 3.5) < 0.1
    assert abs(big.mean() - 100.0) < 0.2 and abs(big.var() - 100.0) < 3.0
    assert len(np.unique(bits)) > 0.99 * n


@wp.kernel
def warp_stream(out: wp.array2d(dtype=float)):
    i = wp.tid()
    s = wp.rand_init(42, i)
    out[i, 0] = wp.randn(s)
    out[i, 1] = wp.randf(s)


def test_randn_and_randf_follow_warps_streams():
    """Seeded streams give Warp 1.19's numbers (recorded from Warp: rand_init(42, i), then randn, then randf), so
    programs ported from Warp reproduce their random draws."""
    out = wp.zeros((3, 2), dtype=float)
    wp.launch(warp_stream, 3, inputs=[out])
    np.testing.assert_allclose(out.numpy(), [[0.21022405, 0.72961855], [0.50227046, 0.86200964],
                                             [1.1879874, 0.28770834]], rtol=1e-6)
