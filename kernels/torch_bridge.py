"""PyTorch interop: tensors and arrays share memory and gradients both ways, and kernels become torch ops.

`from_torch` views a tensor as an array (no copy), `to_torch` an array as a tensor; devices, dtypes and
streams convert with the `*_from_torch` / `*_to_torch` functions. Tensors also go straight to `wp.launch`
(read here from their attributes, registered with `foreign`). torch is imported lazily: only a caller
that already has tensors reaches it.

Gradients. `from_torch(t, requires_grad=True)` shares `t.grad` with the array's `.grad` (creating it
when missing) in ordinary code, where a `wp.Tape` fills it for torch's optimizers. Under torch's autograd
(inside a `torch.autograd.Function`'s forward, or `torch.no_grad()`), the array gets a gradient buffer of
its own instead: torch adds what `backward` returns into `t.grad` itself, so a buffer shared with
`t.grad` would be counted twice. Buffers the caller owns (a `t.grad`, a `grad=` argument) are never
zeroed or consumed by a Tape; buffers loomwork made are zeroed by each `Tape.backward`.

`custom_op(kernel, ...)` wraps a kernel as a `torch.library.custom_op` with a fake (shape) function and
an autograd formula that launches the kernel's adjoint, so models using it run under
`torch.compile(fullgraph=True)`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import foreign
from . import types as T
from .array import DESC_PACK, RETAIN_GRAD_BIT, ArrayDescRef, array, over_buffer, pack_desc, wrap_span
from .device import Device, get_device
from .errors import DeviceError
from .interop import reinterpretable
from .ir import ArrayType
from .launch import launch
from .module import Kernel
from .stream import Stream, get_stream


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError("this needs PyTorch: pip install torch (or loomwork[torch])") from None
    return torch


_scalars: dict[Any, type] = {}  # torch dtype -> scalar type, filled on first use
_strided: list = []  # torch.strided, then


def _dtype_table() -> dict:
    if not _scalars:
        torch = _torch()
        _strided.append(torch.strided)
        _scalars.update({torch.bool: T.bool_, torch.int8: T.int8, torch.uint8: T.uint8, torch.int16: T.int16,
                         torch.int32: T.int32, torch.int64: T.int64, torch.float16: T.float16,
                         torch.bfloat16: T.bfloat16, torch.float32: T.float32, torch.float64: T.float64})
        for name, st in (("uint16", T.uint16), ("uint32", T.uint32), ("uint64", T.uint64)):
            if hasattr(torch, name):
                _scalars[getattr(torch, name)] = st
    return _scalars


def dtype_from_torch(torch_dtype: Any) -> type:
    """The loomwork scalar type of a torch dtype."""
    st = _dtype_table().get(torch_dtype)
    if st is None:
        raise TypeError(f"torch dtype {torch_dtype} has no loomwork scalar type")
    return st


def dtype_to_torch(wp_dtype: Any) -> Any:
    """The torch dtype of a loomwork scalar type. Unsigned 16- to 64-bit integers map to the signed type of
    their size, as Warp maps them (torch does little with its own unsigned types); the bits are the same."""
    st = T.normalize_dtype(wp_dtype)
    st = _SIGNED.get(st, st)
    for td, s in _dtype_table().items():
        if s is st:
            return td
    raise TypeError(f"{T.type_name(st)} has no torch dtype (vectors and matrices are trailing dimensions of "
                    "their scalar type's tensors)")


_SIGNED = {T.uint16: T.int16, T.uint32: T.int32, T.uint64: T.int64}
_TORCH_KINDS = {"cpu": "cpu", "cuda": "cuda"}  # torch device type -> loomwork device kind
_devices: dict[Any, Device] = {}
_new_tuple = tuple.__new__


def device_from_torch(torch_device: Any) -> Device:
    """The loomwork device of a torch device (or its name, e.g. "cuda:0")."""
    found = _devices.get(torch_device)
    if found is None:
        d = _torch().device(torch_device)
        kind = _TORCH_KINDS.get(d.type)
        if kind is None:
            raise DeviceError(f"torch device {d} has no loomwork device (loomwork runs on the CPU and CUDA)")
        found = _devices[torch_device] = get_device(kind if d.index is None else f"{kind}:{d.index}")
    return found


def device_to_torch(wp_device: Any = None) -> str:
    """The torch device name of a loomwork device ("cpu", "cuda:0")."""
    return str(get_device(wp_device))


def stream_from_torch(stream_or_device: Any = None) -> Any:
    """The loomwork stream of a torch CUDA stream (or of the current stream of a torch CUDA device): the same
    driver stream, so work on either is ordered with the other's."""
    torch = _torch()
    if isinstance(stream_or_device, torch.cuda.Stream):
        stream = stream_or_device
    elif not torch.cuda.is_available():
        raise DeviceError("stream_from_torch: torch has no CUDA device here (streams are CUDA streams)")
    else:
        stream = torch.cuda.current_stream(stream_or_device if stream_or_device is not None else None)
    dev = device_from_torch(stream.device)
    if dev.backend.host_accessible:
        raise DeviceError(f"{dev} has no streams: torch streams are CUDA streams")
    return Stream(dev, cuda_stream=stream.cuda_stream)


def stream_to_torch(stream_or_device: Any = None) -> Any:
    """The torch CUDA stream of a loomwork stream (or of a device's current stream), wrapping the same driver
    stream."""
    torch = _torch()
    stream = stream_or_device if isinstance(stream_or_device, Stream) else get_stream(
        stream_or_device if stream_or_device is not None else "cuda")
    if stream.cuda_stream is None:
        raise DeviceError(f"{stream.device} has no CUDA streams to hand to torch")
    return torch.cuda.ExternalStream(stream.cuda_stream, device=device_to_torch(stream.device))


# -- tensors as buffers ----------------------------------------------------------------------------------

def read_tensor(t: Any, device: Device | None = None) -> foreign.Buffer:
    """A tensor's memory, from its attributes (faster than a protocol). Tensors with a lazy negation or a
    layout other than strided (which have no data pointer) have no such memory, and are refused. The shape
    stays a torch.Size (a tuple)."""
    st = _scalars.get(t.dtype)
    if st is None or t.is_neg():
        st = _unusual(t)
    try:
        ptr = t.data_ptr()
    except RuntimeError:
        _unusual(t)
        raise
    d, s = t.device, t.stride()
    return _new_tuple(foreign.Buffer, (ptr, t.shape, _byte_strides[st.size].get(s) or _to_bytes(s, st.size), st,
                                       _devices.get(d) or device_from_torch(d), False, t, "torch.Tensor", False,
                                       t.requires_grad, False))


_byte_strides: dict[int, dict[tuple, tuple]] = {1: {}, 2: {}, 4: {}, 8: {}}  # element size -> strides -> bytes


def _to_bytes(strides: tuple[int, ...], size: int) -> tuple[int, ...]:
    found = _byte_strides[size]
    if len(found) > 4096:
        found.clear()
    b = found[strides] = tuple(x * size for x in strides)
    return b


def _unusual(t: Any) -> type:
    """The scalar type of a tensor `read_tensor` did not take at once: the first one it meets (the table is
    filled then), or one it refuses."""
    st = _dtype_table().get(t.dtype)
    if st is None:
        raise TypeError(f"a torch.Tensor of {t.dtype} has no loomwork scalar type")
    if t.is_neg() or t.layout is not _strided[0]:
        raise TypeError(f"a torch.Tensor with layout {t.layout}{' and a lazy negation' if t.is_neg() else ''} has "
                        "no strided memory to share; call .resolve_neg() / .to_dense() first")
    return st


def _reader_for(cls: type) -> Any:
    torch = sys.modules.get("torch")
    return read_tensor if torch is not None and issubclass(cls, torch.Tensor) else None


foreign.register_reader("torch", _reader_for)


def from_torch(t: Any, dtype: Any = None, requires_grad: bool | None = None, grad: Any = None,
               return_ctype: bool = False, retain_grad: bool = False) -> array | ArrayDescRef:
    """An array viewing tensor `t`'s memory (no copy). `dtype` may be a vector or matrix type made of `t`'s
    trailing dimensions (a float tensor of shape (n, 2) as `wp.vec2`); by default `t`'s scalar type.
    `requires_grad` (default: `t.requires_grad`) gives the array a gradient: `grad` (an array or tensor), else
    `t.grad` shared (see the module docstring for when it is a buffer of its own). `return_ctype=True`
    gives the bare kernel-argument descriptor, cheaper to make than an array. `retain_grad` sets the array's
    `retain_grad` (an array with a gradient only); a gradient shared with torch is never consumed anyway."""
    if grad is None and not (t.requires_grad if requires_grad is None else requires_grad):
        try:
            key = (t.dtype, dtype, t.shape, t.stride(), t.device)
        except (RuntimeError, AttributeError):  # no strides (sparse): the general path below names why
            key = None
        layout = _layouts.get(key) if key is not None else None
        if layout is None and key is not None:
            layout = _layout(t, dtype, key)
        if layout is not None and not t.is_neg():
            pack, shape, strides, dt, n, dev, span = layout
            if return_ctype:
                return _new_tuple(ArrayDescRef, (pack(t.data_ptr(), 0, *shape, *strides, n), dt, n, dev, (t,)))
            return array._wrap(t.data_ptr(), dt, shape, strides, dev, t, False, span)
    buf = _as_asked(read_tensor(t), dtype)
    ptr, shape, strides, dt, dev, _, _, _, _, rg, _ = buf
    if dtype is not None or not 0 < len(shape) <= foreign.MAX_DIMS:  # else: torch keeps its own data aligned
        dt = dt if dtype is None else _dtypes.get(dtype) or _normalize(dtype)
        shape, strides = foreign.fit(buf, dt, "wp.from_torch")
    if requires_grad is not None:
        rg = requires_grad
    if grad is None and not rg:
        if return_ctype:
            n = len(shape)
            return _new_tuple(ArrayDescRef, (DESC_PACK[n](ptr, 0, *shape, *strides, n), dt, n, dev, (t,)))
        return array._wrap(ptr, dt, tuple(shape), strides, dev, t, False)
    g, external = _gradient(t, dt, strides, grad)
    if return_ctype:
        gp = (g.ptr or 0) | (RETAIN_GRAD_BIT if external and g.ptr else 0)  # the caller's buffer: never consumed
        return _new_tuple(ArrayDescRef, (pack_desc(ptr, gp, shape, strides), dt, len(shape), dev, (t, g)))
    a = array._wrap(ptr, dt, tuple(shape), strides, dev, t, False)
    a._grad, a._grad_external = g, external
    a.requires_grad = True
    if retain_grad:
        a.retain_grad = True
    return a


_dtypes: dict[Any, type] = {}  # a dtype as given -> as kernels know it


def _as_asked(buf: foreign.Buffer, dtype: Any) -> foreign.Buffer:
    """`buf` read as `dtype`'s scalar type where Warp allows that without a copy: integers as the other
    signedness of their size, bools as 8-bit integers."""
    if dtype is None:
        return buf
    want = T.elem_scalar(_dtypes.get(dtype) or _normalize(dtype))
    if want is not buf.scalar and reinterpretable(buf.scalar, want):
        return foreign.Buffer((*buf[:3], want, *buf[4:]))
    return buf
# (torch dtype, dtype asked, shape, strides, device) -> what an array or descriptor of that layout needs
# besides the pointer
_layouts: dict[tuple, tuple] = {}


def _layout(t: Any, dtype: Any, key: tuple) -> tuple | None:
    """How `from_torch(t, dtype)` views tensors laid out as `t` without a gradient (checked once per layout):
    the descriptor packer, shape, byte strides, dtype, rank, device and `wrap_span`; None when `t` has no
    strided memory (the general path raises)."""
    try:
        buf = _as_asked(read_tensor(t), dtype)
    except (TypeError, RuntimeError):
        return None
    shape, strides, dt = buf[1], buf[2], buf[3]
    if dtype is not None or not 0 < len(shape) <= foreign.MAX_DIMS:
        dt = dt if dtype is None else _dtypes.get(dtype) or _normalize(dtype)
        shape, strides = foreign.fit(buf, dt, "wp.from_torch")
    if len(_layouts) > 4096:
        _layouts.clear()
    shape, strides = tuple(shape), tuple(strides)
    layout = _layouts[key] = (DESC_PACK[len(shape)], shape, strides, dt, len(shape), buf[4],
                              wrap_span(dt, shape, strides))
    return layout


def _normalize(dtype: Any) -> type:
    dt = _dtypes[dtype] = T.normalize_dtype(dtype)
    return dt


def _gradient(t: Any, dtype: Any, strides: tuple, grad: Any) -> tuple[array, bool]:
    """The gradient array `from_torch` attaches (see its docstring), and whether the caller owns it; its
    strides must be the data's, since kernels index both with one set."""
    torch = _torch()
    external = True
    if grad is not None:
        g = grad if isinstance(grad, array) else over_buffer(read_tensor(grad), dtype, "wp.from_torch: grad")
    elif torch.is_grad_enabled():
        if t.grad is None:
            t.grad = _zeros_as(t)
        g = over_buffer(read_tensor(t.grad), dtype, "wp.from_torch: the tensor's .grad")
    else:  # under torch's autograd: a buffer of our own (torch accumulates what backward returns)
        g = over_buffer(read_tensor(_zeros_as(t)), dtype, "wp.from_torch")
        external = False
    if g.strides != strides or g.dtype != dtype:
        raise ValueError(f"wp.from_torch: the gradient must have the tensor's dtype and strides ({T.type_name(dtype)}, "
                         f"{strides} bytes), got {T.type_name(g.dtype)} with {g.strides}")
    return g, external


def _zeros_as(t: Any) -> Any:
    """Zeros laid out as tensor `t` (zeros_like would make a strided view's gradient dense, and kernels
    index a gradient with its array's strides)."""
    torch = _torch()
    if t.is_contiguous():
        return torch.zeros_like(t)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).zero_()


def to_torch(a: array, requires_grad: bool | None = None) -> Any:
    """A tensor viewing array `a`'s memory (no copy; vectors and matrices become trailing dimensions), through
    DLPack. With `requires_grad` (default: `a.requires_grad`) the tensor requires grad, and its `.grad` views
    `a.grad` when the array has one."""
    torch = _torch()
    if not isinstance(a, array):
        raise TypeError(f"wp.to_torch takes a wp.array, got {type(a).__name__}")
    if T.is_struct_type(a.dtype):
        raise TypeError(f"wp.to_torch: torch has no tensors of structs ({T.type_name(a.dtype)})")
    t = torch.from_dlpack(a)
    rg = a.requires_grad if requires_grad is None else requires_grad
    if rg:
        t.requires_grad_(True)
        if a.grad is not None:
            t.grad = torch.from_dlpack(a.grad)
    return t


# -- kernels as torch ops ----------------------------------------------------------------------------------

def custom_op(kernel: Kernel, name: str, *, num_outputs: int = 1,
              dim: Callable[..., Sequence[int]] | None = None,
              output_shapes: Callable[..., Sequence[Sequence[int]]] | None = None) -> Callable[..., Any]:
    """Wrap `kernel` as a torch operator `name` ("namespace::op") that autograd differentiates (through the
    kernel's adjoint) and `torch.compile(fullgraph=True)` keeps whole.

    The kernel's parameters are its inputs (tensors for arrays, Python numbers for scalars) followed by its
    `num_outputs` output arrays, which the op allocates (zeroed) and returns. The launch grid is `dim(*inputs)`,
    by default the leading dimensions of the first input array that are not a vector's or matrix's; each
    output's shape is `output_shapes(*inputs)[i]`, by default the grid's. Inputs are made contiguous."""
    torch = _torch()
    names, types = kernel.signature()
    n_in = len(names) - num_outputs
    if num_outputs < 1 or n_in < 1 or not all(isinstance(t, ArrayType) for t in types[n_in:]):
        raise TypeError(f"custom_op: kernel '{kernel.key}' must take inputs followed by {num_outputs} output "
                        "array(s)")
    in_types, out_types = types[:n_in], types[n_in:]
    first = next((i for i, t in enumerate(in_types) if isinstance(t, ArrayType)), None)
    if first is None and dim is None:
        raise TypeError(f"custom_op: kernel '{kernel.key}' has no input array to take the launch grid from; pass dim=")

    def grid(inputs: Sequence[Any]) -> tuple[int, ...]:
        if dim is not None:
            d = dim(*inputs)
            return (int(d),) if isinstance(d, int) else tuple(int(x) for x in d)
        return tuple(inputs[first].shape[:in_types[first].ndim])

    def out_shapes(inputs: Sequence[Any]) -> list[tuple[int, ...]]:
        shapes = output_shapes(*inputs) if output_shapes is not None else [grid(inputs)] * num_outputs
        return [tuple(int(x) for x in s) + _inner(t) for s, t in zip(shapes, out_types, strict=True)]

    def new_outputs(inputs: Sequence[Any], like: Any) -> list[Any]:
        return [like.new_zeros(s, dtype=dtype_to_torch(T.elem_scalar(t.dtype)))
                for s, t in zip(out_shapes(inputs), out_types, strict=True)]

    def tensor_of(i: int) -> bool:
        return isinstance(in_types[i], ArrayType)

    def anchor(inputs: Sequence[Any]) -> Any:
        return inputs[first] if first is not None else torch.empty(0)

    def forward(*inputs: Any) -> Any:
        inputs = [x.contiguous() if tensor_of(i) else x for i, x in enumerate(inputs)]
        outs = new_outputs(inputs, anchor(inputs))
        launch(kernel, grid(inputs), inputs=inputs, outputs=outs, device=device_from_torch(anchor(inputs).device))
        return outs[0] if num_outputs == 1 else tuple(outs)

    def forward_fake(*inputs: Any) -> Any:
        outs = new_outputs(inputs, anchor(inputs))
        return outs[0] if num_outputs == 1 else tuple(outs)

    tensor_inputs = [i for i in range(n_in) if tensor_of(i)]

    def adjoint(*args: Any) -> Any:
        inputs = [x.contiguous() if tensor_of(i) else x for i, x in enumerate(args[:n_in])]
        outs = list(args[n_in:n_in + num_outputs])
        grads_out = [g.contiguous().clone() for g in args[n_in + num_outputs:]]  # never written by us
        grads_in = [torch.zeros_like(inputs[i]) if tensor_of(i) else None for i in range(n_in)]
        launch(kernel, grid(inputs), inputs=inputs, outputs=outs, adj_inputs=grads_in, adj_outputs=grads_out,
               adjoint=True, device=device_from_torch(anchor(inputs).device))
        return [grads_in[i] for i in tensor_inputs]

    def adjoint_fake(*args: Any) -> Any:
        return [torch.empty_like(args[i]) for i in tensor_inputs]

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_torch_annotation(t))
              for n, t in zip(names[:n_in], in_types, strict=True)]
    out_anno = torch.Tensor if num_outputs == 1 else tuple[(torch.Tensor,) * num_outputs]
    forward.__signature__ = inspect.Signature(params, return_annotation=out_anno)
    op = torch.library.custom_op(name, mutates_args=())(forward)
    op.register_fake(forward_fake)
    out_params = [inspect.Parameter(f"lw_out{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor)
                  for i in range(2 * num_outputs)]
    adjoint.__signature__ = inspect.Signature(params + out_params, return_annotation=list[torch.Tensor])
    adjoint_op = torch.library.custom_op(f"{name}_adjoint", mutates_args=())(adjoint)
    adjoint_op.register_fake(adjoint_fake)

    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.inputs = inputs
        ctx.outputs = (output,) if num_outputs == 1 else tuple(output)

    def backward(ctx: Any, *grad_outputs: Any) -> tuple:
        grads = iter(adjoint_op(*ctx.inputs, *ctx.outputs, *grad_outputs))
        return tuple(next(grads) if tensor_of(i) else None for i in range(n_in))

    op.register_autograd(backward, setup_context=setup_context)
    return op


def _inner(t: ArrayType) -> tuple[int, ...]:
    return t.dtype._shape_ if T.is_composite(t.dtype) else ()


def _torch_annotation(t: Any) -> Any:
    if isinstance(t, ArrayType):
        return _torch().Tensor
    if T.is_scalar(t):
        return bool if t is T.bool_ else float if t.is_float else int
    raise TypeError(f"custom_op: a {T.type_name(t)} parameter has no torch operator type; pass arrays and scalars")
