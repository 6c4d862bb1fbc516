"""`loomwork.jax_experimental`: kernels and kernel-launching Python functions as JAX primitives (Warp's
`warp.jax_experimental`), run through XLA's FFI on the CPU. jax is imported when one of these is called."""

from loomwork.kernels.jax_bridge import (
    FfiBuffer,
    FfiContext,
    GraphMode,
    JaxCallable,
    JaxKernel,
    jax_callable,
    jax_kernel,
    register_ffi_callback,
)

__all__ = ["FfiBuffer", "FfiContext", "GraphMode", "JaxCallable", "JaxKernel", "jax_callable", "jax_kernel",
           "register_ffi_callback"]
