"""`loomwork.optim.linear`: iterative linear solvers (`cg`, `cr`, `bicgstab`, `gmres`), linear operators and
preconditioners, under Warp's module name (`warp.optim.linear`)."""

from loomwork.autodiff.linear import (
    CG,
    CR,
    FSAI,
    GMRES,
    BiCGSTAB,
    LinearOperator,
    LinearSolverState,
    aslinearoperator,
    bicgstab,
    cg,
    cr,
    gmres,
    preconditioner,
)

__all__ = ["CG", "CR", "FSAI", "GMRES", "BiCGSTAB", "LinearOperator", "LinearSolverState", "aslinearoperator",
           "bicgstab", "cg", "cr", "gmres", "preconditioner"]
