"""Solvers: each advances a State by ``step(state_in, state_out, control, contacts, dt)``."""

from .featherstone import SolverFeatherstone
from .solver import SolverBase

__all__ = ["SolverBase", "SolverFeatherstone"]
