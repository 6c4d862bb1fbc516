"""Contacts: the output of a CollisionPipeline, read by the solvers."""

from __future__ import annotations

from typing import Any

import loomwork as wp


class Contacts:
    """Rigid (shape-shape) and soft (particle-shape) contact buffers of fixed capacity.

    Contact points are stored in the frames of the bodies they belong to, so a solver re-evaluates the
    gap from the current body poses (and gradients flow through them)."""

    def __init__(self, rigid_contact_max: int, soft_contact_max: int, *, requires_grad: bool = False,
                 device: Any = None) -> None:
        self.rigid_contact_max = int(rigid_contact_max)
        self.soft_contact_max = int(soft_contact_max)
        self.requires_grad = requires_grad
        with wp.ScopedDevice(device):
            n = max(self.rigid_contact_max, 1)
            self.rigid_contact_count = wp.zeros(1, dtype=wp.int32)
            """Number of rigid contacts found, shape (1,), dtype int32."""
            self.rigid_contact_shape0 = wp.full(n, -1, dtype=wp.int32)
            """First shape of each contact, shape (rigid_contact_max,)."""
            self.rigid_contact_shape1 = wp.full(n, -1, dtype=wp.int32)
            """Second shape of each contact, shape (rigid_contact_max,)."""
            self.rigid_contact_point0 = wp.zeros(n, dtype=wp.vec3, requires_grad=requires_grad)
            """Contact point on shape 0 in its body's frame [m], dtype vec3."""
            self.rigid_contact_point1 = wp.zeros(n, dtype=wp.vec3, requires_grad=requires_grad)
            """Contact point on shape 1 in its body's frame [m], dtype vec3."""
            self.rigid_contact_normal = wp.zeros(n, dtype=wp.vec3, requires_grad=requires_grad)
            """Contact normal in world frame, from shape 0 toward shape 1, dtype vec3."""
            self.rigid_contact_margin0 = wp.zeros(n, dtype=wp.float32)
            """Radius [m] the surface of shape 0 lies around point0 (spheres and capsules), dtype float32."""
            self.rigid_contact_margin1 = wp.zeros(n, dtype=wp.float32)
            """Radius [m] the surface of shape 1 lies around point1, dtype float32."""
            self.rigid_contact_feature = wp.zeros(n, dtype=wp.int32)
            """Which feature of the pair made each contact (a probe of shape 1, or a manifold point), int32."""
            self.rigid_contact_feature_param = wp.zeros(n, dtype=wp.float32)
            """Where along a probe edge of shape 1 the contact lies (0..1; -1 for points), float32."""
            self.rigid_contact_force = wp.zeros(n, dtype=wp.vec3)
            """Contact force on shape 1 [N] written by solvers that report it, dtype vec3."""
            m = max(self.soft_contact_max, 1)
            self.soft_contact_count = wp.zeros(1, dtype=wp.int32)
            """Number of particle-shape contacts found, shape (1,), dtype int32."""
            self.soft_contact_particle = wp.full(m, -1, dtype=wp.int32)
            """Particle of each soft contact, shape (soft_contact_max,)."""
            self.soft_contact_shape = wp.full(m, -1, dtype=wp.int32)
            """Shape of each soft contact, shape (soft_contact_max,)."""
            self.soft_contact_body_pos = wp.zeros(m, dtype=wp.vec3, requires_grad=requires_grad)
            """Closest point on the shape in its body's frame (world frame for static shapes) [m]."""
            self.soft_contact_body_vel = wp.zeros(m, dtype=wp.vec3, requires_grad=requires_grad)
            """Velocity of the shape's surface at the contact in world frame [m/s] (moving static shapes)."""
            self.soft_contact_normal = wp.zeros(m, dtype=wp.vec3, requires_grad=requires_grad)
            """Contact normal in world frame, pointing from the shape toward the particle."""

    @property
    def device(self) -> Any:
        """Device of the buffers."""
        return self.rigid_contact_count.device

    def clear(self) -> None:
        """Forget all contacts (counts to zero)."""
        self.rigid_contact_count.zero_()
        self.soft_contact_count.zero_()
