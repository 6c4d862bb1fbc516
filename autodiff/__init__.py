"""loomwork.autodiff: reverse-mode differentiation (adjoint code generation, the Tape, gradient checks).

Importing it registers the adjoint generator with the kernel layer, which builds every kernel's
adjoint alongside its forward code (unless `enable_backward=False`).
"""

from loomwork.kernels.extensions import registry

from .adjoint import function_gradients, module_adjoint_source

registry.adjoint_source = module_adjoint_source
registry.gradient_source = function_gradients
