"""Marching cubes: closed, outward-wound surfaces (also from noisy fields with ambiguous faces), the
right enclosed volume, gradients from vertex positions to the field, and clear errors."""

from collections import Counter

import numpy as np
import pytest

import loomwork as wp
from loomwork.geometry import IsoSurfaceMarchingCubes


def closed_and_oriented(tris: np.ndarray) -> bool:
    """Every directed edge appears once and its reverse once: a closed, consistently wound surface."""
    edges = Counter((int(a), int(b)) for t in tris for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])))
    return all(k == 1 and edges.get((b, a)) == 1 for (a, b), k in edges.items())


def volume(verts: np.ndarray, tris: np.ndarray) -> float:
    return float(np.einsum("ij,ij->i", verts[tris[:, 0]], np.cross(verts[tris[:, 1]], verts[tris[:, 2]])).sum() / 6)


def sphere_field(n: int, radius: float) -> np.ndarray:
    x = np.linspace(-1.0, 1.0, n)
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    return (np.sqrt(X**2 + Y**2 + Z**2) - radius).astype(np.float32)


def test_sphere_is_closed_outward_and_encloses_its_volume():
    mc = IsoSurfaceMarchingCubes(32, 32, 32, lower=(-1.0, -1.0, -1.0), upper=(1.0, 1.0, 1.0))
    mc.surface(wp.array(sphere_field(32, 0.7)), 0.0)
    verts, tris = mc.verts.numpy(), mc.indices.numpy().reshape(-1, 3)
    assert closed_and_oriented(tris)
    assert abs(volume(verts, tris) - 4 / 3 * np.pi * 0.7**3) < 0.02
    assert np.allclose(np.linalg.norm(verts, axis=1), 0.7, atol=2e-3)


@pytest.mark.parametrize("seed", [0, 1])
def test_noise_fields_give_closed_manifold_surfaces(seed):
    """Random values inside a positive shell: every ambiguous face and case occurs; the surface stays closed,
    encloses a positive volume, and each vertex lies on an edge whose ends straddle the threshold."""
    rng = np.random.default_rng(seed)
    f = rng.uniform(-1.0, 1.0, (12, 11, 10)).astype(np.float32)
    f[[0, -1], :, :] = f[:, [0, -1], :] = f[:, :, [0, -1]] = 1.0
    verts, idx = IsoSurfaceMarchingCubes.extract(wp.array(f), 0.0)
    tris = idx.numpy().reshape(-1, 3)
    assert len(tris) > 200 and closed_and_oriented(tris)
    assert volume(verts.numpy(), tris) > 0.0
    assert wp.MarchingCubes is IsoSurfaceMarchingCubes


def test_vertex_positions_are_differentiable():
    """d(sum of vertex x) / d(field) by the Tape agrees with finite differences of the extraction."""
    f = sphere_field(8, 0.6)
    field = wp.array(f, requires_grad=True)
    tape = wp.Tape()
    with tape:
        verts, _ = IsoSurfaceMarchingCubes.extract(field, 0.0)
    seed = wp.array(np.tile([1.0, 0.5, 0.25], (verts.shape[0], 1)).astype(np.float32), dtype=wp.vec3)
    tape.backward(grads={verts: seed})
    g = field.grad.numpy()
    w = np.array([1.0, 0.5, 0.25])
    for node in [(2, 4, 4), (4, 4, 1), (5, 3, 4)]:
        fd = []
        for s in (1e-3, -1e-3):
            h = f.copy()
            h[node] += s
            fd.append((IsoSurfaceMarchingCubes.extract(wp.array(h), 0.0)[0].numpy() @ w).sum())
        assert abs(g[node] - (fd[0] - fd[1]) / 2e-3) < 2e-2 * max(1.0, abs(g[node])), node


def test_bad_fields_are_clear_errors():
    with pytest.raises(ValueError, match="3-D"):
        IsoSurfaceMarchingCubes.extract(wp.zeros(8), 0.0)
    with pytest.raises(ValueError, match="at least 2 nodes"):
        IsoSurfaceMarchingCubes.extract(wp.zeros((1, 4, 4)), 0.0)
    with pytest.raises(TypeError, match="float32"):
        IsoSurfaceMarchingCubes.extract(wp.zeros((4, 4, 4), dtype=wp.float64), 0.0)
    with pytest.raises(ValueError, match="does not match"):
        IsoSurfaceMarchingCubes(4, 4, 4).surface(wp.zeros((5, 4, 4)), 0.0)
