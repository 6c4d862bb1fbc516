"""Solvers: each advances a State by ``step(state_in, state_out, control, contacts, dt)``."""

from .featherstone import SolverFeatherstone
from .semi_implicit import SolverSemiImplicit
from .solver import SolverBase
from .vbd import SolverVBD
from .xpbd import SolverXPBD

__all__ = ["SolverBase", "SolverFeatherstone", "SolverSemiImplicit", "SolverVBD", "SolverXPBD"]
