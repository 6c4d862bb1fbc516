"""SolverFeatherstone: reduced-coordinate articulated rigid-body dynamics."""

from .solver_featherstone import SolverFeatherstone

__all__ = ["SolverFeatherstone"]
