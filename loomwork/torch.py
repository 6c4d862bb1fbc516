"""`loomwork.torch`: the PyTorch bridge under one name (Warp's `warp.torch`), and kernels as torch operators.

`custom_op(kernel, "namespace::name")` makes a kernel a `torch.library.custom_op` that autograd
differentiates through the kernel's adjoint and `torch.compile(fullgraph=True)` keeps whole. torch is
imported only when one of these functions is called.
"""

from loomwork.kernels.torch_bridge import (
    custom_op,
    device_from_torch,
    device_to_torch,
    dtype_from_torch,
    dtype_to_torch,
    from_torch,
    stream_from_torch,
    stream_to_torch,
    to_torch,
)

__all__ = ["custom_op", "device_from_torch", "device_to_torch", "dtype_from_torch", "dtype_to_torch", "from_torch",
           "stream_from_torch", "stream_to_torch", "to_torch"]
