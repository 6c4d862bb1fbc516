"""Particles and springs of a ModelBuilder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import loomwork as wp

from ..enums import ParticleFlags


def _vec3(v: Any, what: str) -> tuple[float, float, float]:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.shape != (3,):
        raise ValueError(f"{what}: expected 3 values, got {a.shape[0]}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: non-finite value {tuple(a)}")
    return float(a[0]), float(a[1]), float(a[2])


def _rotate(q: Any, v: tuple[float, float, float]) -> tuple[float, float, float]:
    return tuple(wp.quat_rotate(q, wp.vec3(*v)))


class ParticleBuilder:
    """Particles (point masses with a radius) and springs between them."""

    _lists = {"particle_q": None, "particle_qd": None, "particle_mass": None, "particle_radius": None,
              "particle_flags": None, "particle_world": "world",
              "spring_indices": "particle", "spring_rest_length": None, "spring_stiffness": None,
              "spring_damping": None, "spring_control": None}

    def _init_domain(self) -> None:
        for name in ParticleBuilder._lists:
            setattr(self, name, [])
        self.default_particle_radius = 0.1
        self.default_spring_ke = 100.0
        self.default_spring_kd = 0.0
        self.particle_max_velocity = 1.0e5

    @property
    def particle_count(self) -> int:
        """Number of particles added so far."""
        return len(self.particle_q)

    @property
    def spring_count(self) -> int:
        """Number of springs added so far."""
        return len(self.spring_indices)

    def add_particle(self, pos: Any, vel: Any, mass: float, radius: float | None = None,
                     flags: int = ParticleFlags.ACTIVE, **_: Any) -> int:
        """Add a particle at ``pos`` [m] moving at ``vel`` [m/s]; ``mass`` [kg] 0 pins it in place.
        Returns its index."""
        if not np.isfinite(mass) or mass < 0.0:
            raise ValueError(f"add_particle: mass must be finite and >= 0 (0 pins the particle), got {mass}")
        r = self.default_particle_radius if radius is None else float(radius)
        if not np.isfinite(r) or r < 0.0:
            raise ValueError(f"add_particle: radius must be finite and >= 0, got {r}")
        self.particle_q.append(_vec3(pos, "add_particle: pos"))
        self.particle_qd.append(_vec3(vel, "add_particle: vel"))
        self.particle_mass.append(float(mass))
        self.particle_radius.append(r)
        self.particle_flags.append(int(flags))
        self.particle_world.append(self.current_world)
        return len(self.particle_q) - 1

    def add_particles(self, pos: Sequence[Any], vel: Sequence[Any], mass: Sequence[float],
                      radius: Sequence[float] | None = None, flags: Sequence[int] | None = None, **_: Any) -> None:
        """Add many particles at once (lists of equal length)."""
        n = len(pos)
        if len(vel) != n or len(mass) != n or (radius is not None and len(radius) != n):
            raise ValueError("add_particles: pos, vel, mass (and radius) must have the same length")
        for i in range(n):
            self.add_particle(pos[i], vel[i], mass[i], None if radius is None else radius[i],
                              ParticleFlags.ACTIVE if flags is None else flags[i])

    def add_particle_grid(self, *, pos: Any, rot: Any, vel: Any, dim_x: int, dim_y: int, dim_z: int,
                          cell_x: float, cell_y: float, cell_z: float, mass: float, jitter: float,
                          radius_mean: float | None = None, radius_std: float = 0.0,
                          flags: Sequence[int] | int | None = None, seed: int = 42, **_: Any) -> None:
        """Add a ``dim_x * dim_y * dim_z`` block of particles with spacing ``cell_*`` [m], rotated by ``rot``
        about ``pos``, each displaced by up to ``jitter`` [m] (seeded, so scenes are reproducible)."""
        rng = np.random.default_rng(seed)
        r0 = self.default_particle_radius if radius_mean is None else radius_mean
        origin = np.asarray(_vec3(pos, "add_particle_grid: pos"))
        k = 0
        for z in range(dim_z):
            for y in range(dim_y):
                for x in range(dim_x):
                    local = (x * cell_x, y * cell_y, z * cell_z) + rng.random(3) * jitter
                    p = origin + np.asarray(_rotate(rot, tuple(local)))
                    r = r0 + (rng.standard_normal() * radius_std if radius_std > 0.0 else 0.0)
                    f = flags if isinstance(flags, int) else (ParticleFlags.ACTIVE if flags is None else flags[k])
                    self.add_particle(p, vel, mass, max(r, 0.0), f)
                    k += 1

    def add_spring(self, i: int, j: int, ke: float, kd: float, control: float, **_: Any) -> int:
        """Add a spring of stiffness ``ke`` [N/m] and damping ``kd`` [N s/m] between particles ``i`` and
        ``j``, at rest at their current distance. Returns its index."""
        n = len(self.particle_q)
        for name, idx in (("i", i), ("j", j)):
            if not 0 <= idx < n:
                raise IndexError(f"add_spring: particle {name}={idx} out of range [0, {n})")
        if i == j:
            raise ValueError(f"add_spring: both ends are particle {i}")
        rest = float(np.linalg.norm(np.subtract(self.particle_q[i], self.particle_q[j])))
        self.spring_indices.append((i, j))
        self.spring_rest_length.append(rest)
        self.spring_stiffness.append(float(ke))
        self.spring_damping.append(float(kd))
        self.spring_control.append(float(control))
        return len(self.spring_indices) - 1

    def _transform_appended(self, starts: dict[str, int], xform: Any) -> None:
        q = wp.transform_get_rotation(xform)
        for k in range(starts["particle"], len(self.particle_q)):
            self.particle_q[k] = tuple(wp.transform_point(xform, wp.vec3(*self.particle_q[k])))
            self.particle_qd[k] = _rotate(q, self.particle_qd[k])

    def _finalize_domain(self, model: Any, requires_grad: bool) -> None:
        n = len(self.particle_q)
        model.particle_count = n
        mass = np.asarray(self.particle_mass, dtype=np.float32).reshape(n)
        flags = np.asarray(self.particle_flags, dtype=np.int32).reshape(n)
        inv = np.where(mass > 0.0, 1.0 / np.where(mass > 0.0, mass, 1.0), 0.0).astype(np.float32)
        model.particle_q = wp.array(np.asarray(self.particle_q, dtype=np.float32).reshape(n, 3), dtype=wp.vec3,
                                    requires_grad=requires_grad)
        model.particle_qd = wp.array(np.asarray(self.particle_qd, dtype=np.float32).reshape(n, 3), dtype=wp.vec3,
                                     requires_grad=requires_grad)
        model.particle_mass = wp.array(mass, dtype=wp.float32, requires_grad=requires_grad)
        model.particle_inv_mass = wp.array(inv, dtype=wp.float32, requires_grad=requires_grad)
        radius = np.asarray(self.particle_radius, dtype=np.float32).reshape(n)
        model.particle_radius = wp.array(radius, dtype=wp.float32, requires_grad=requires_grad)
        model.particle_max_radius = float(radius.max()) if n else 0.0
        model.particle_flags = wp.array(flags, dtype=wp.int32)
        model.particle_world = wp.array(np.asarray(self.particle_world, dtype=np.int32).reshape(n), dtype=wp.int32)
        model.particle_max_velocity = float(self.particle_max_velocity)
        # About two cells per particle: a build touches every cell, and queries test distances anyway.
        dim = int(min(128, max(8, round((2 * n) ** (1.0 / 3.0)))))
        model.particle_grid = wp.HashGrid(dim, dim, dim) if n > 1 and model.particle_max_radius > 0.0 else None
        m = len(self.spring_indices)
        model.spring_count = m
        model.spring_indices = wp.array(np.asarray(self.spring_indices, dtype=np.int32).reshape(m * 2),
                                        dtype=wp.int32)
        model.spring_rest_length = wp.array(np.asarray(self.spring_rest_length, dtype=np.float32).reshape(m),
                                            dtype=wp.float32, requires_grad=requires_grad)
        model.spring_stiffness = wp.array(np.asarray(self.spring_stiffness, dtype=np.float32).reshape(m),
                                          dtype=wp.float32, requires_grad=requires_grad)
        model.spring_damping = wp.array(np.asarray(self.spring_damping, dtype=np.float32).reshape(m),
                                        dtype=wp.float32, requires_grad=requires_grad)
        model.spring_control = wp.array(np.asarray(self.spring_control, dtype=np.float32).reshape(m),
                                        dtype=wp.float32, requires_grad=requires_grad)
