"""`loomwork.autograd`: gradient-checking tools under Warp's module name."""

from loomwork.autodiff.gradcheck import (  # noqa: F401
    gradcheck,
    gradcheck_tape,
    jacobian,
    jacobian_fd,
)
