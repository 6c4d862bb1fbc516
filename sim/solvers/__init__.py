"""Solvers: each advances a State by ``step(state_in, state_out, control, contacts, dt)``."""

from .semi_implicit import SolverSemiImplicit
from .solver import SolverBase
from .xpbd import SolverXPBD

__all__ = ["SolverBase", "SolverSemiImplicit", "SolverXPBD"]
