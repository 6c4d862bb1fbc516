"""`loomwork.optim`: gradient-descent optimizers (`Adam`, `SGD`) and, in `loomwork.optim.linear`,
iterative linear solvers, under Warp's module names (`import warp.optim`)."""

from loomwork.autodiff.optim import SGD, Adam

from . import linear

__all__ = ["SGD", "Adam", "linear"]
