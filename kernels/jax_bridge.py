"""JAX interop: arrays shared both ways through DLPack, and kernels as JAX primitives through XLA's FFI.

`from_jax` / `to_jax` view memory without copying; `device_*_jax` and `dtype_*_jax` convert devices and
scalar types. `JaxKernel` (made by `jax_kernel`) runs a kernel inside `jax.jit`: at trace time it packs the
launch (runtime header, grid, static scalars, array shapes) into one byte block, an attribute of a call to
the FFI target `loomwork_launch`, whose C++ handler (native/jax_ffi.cpp, built with our host compiler
against `jax.ffi.include_dir()` and cached like every module) patches XLA's buffers into it and calls the
runtime's `lw_launch`: the kernel runs on our thread pool with no Python and no GIL per call. A scalar that
`jax.jit` traces is an operand too (a 0-d buffer whose value the handler copies in), so changing it does not
retrace. `jax.vmap` goes through our own batching rule (custom_vmap): the vectorized methods run one FFI
call that launches once per batch item, the sequential ones map over the batch in JAX. With
`enable_backward=True` a `jax.custom_vjp` launches the kernel's generated adjoint the same way.

On a machine with CUDA devices the target is also registered for XLA's CUDA platform: each call then carries
a second block packed for the GPU, and `jax.lax.platform_dependent` picks the one for the platform XLA
compiles for; the CUDA handler launches the kernel on the stream XLA hands over. Python FFI callbacks
(`jax_callable`, `register_ffi_callback`) run on both platforms; on CUDA their buffers are device memory and
the launches they make go to XLA's stream. jax is imported lazily, by the functions that need it.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import inspect
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import foreign
from . import types as T
from .annotations import annotations, arg_type
from .array import array, over_buffer, pack_desc
from .backend import ErrorRecord
from .device import Device, get_device, get_devices
from .errors import DeviceError, LaunchError
from .ir import ArrayType
from .jax_cpu import TARGET, handler_library
from .launch import _make_plan
from .module import Kernel
from .stream import ScopedStream, Stream, run_on

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized")
_SKIP, _ADDRESS = -1, 0  # slot kinds (native/jax_ffi.cpp); a kind > 0 is a scalar of that many bytes
_ZERO_FIRST = 1


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise ImportError("this needs JAX: pip install 'jax[cpu]'") from None
    return jax


# -- dtypes, devices, arrays -------------------------------------------------------------------------------

def dtype_from_jax(jax_dtype: Any) -> type:
    """The loomwork scalar type of a JAX dtype (jnp.float32, np.dtype("int32"), "bfloat16"...)."""
    try:
        dt = np.dtype(jax_dtype)
    except TypeError:
        raise TypeError(f"{jax_dtype!r} is not a JAX dtype") from None
    for st in T.scalar_types:
        if st is not T.bfloat16 and st.np_dtype == dt:
            return st
    if dt.name == "bfloat16":
        return T.bfloat16
    raise TypeError(f"JAX dtype {dt} has no loomwork scalar type")


def dtype_to_jax(wp_dtype: Any) -> Any:
    """The JAX scalar type (jnp.float32...) of a loomwork scalar type; vectors and matrices are trailing
    dimensions of their scalar type's arrays."""
    jnp = _jax().numpy
    st = T.normalize_dtype(wp_dtype)
    if not T.is_scalar(st):
        raise TypeError(f"{T.type_name(st)} has no JAX dtype (vectors and matrices are trailing dimensions of "
                        "their scalar type's JAX arrays)")
    return jnp.bfloat16 if st is T.bfloat16 else getattr(jnp, np.dtype(st.np_dtype).name)


def device_from_jax(jax_device: Any) -> Device:
    """The loomwork device of a JAX device."""
    platform = getattr(jax_device, "platform", None)
    if platform == "cpu":
        return get_device("cpu")
    if platform in ("gpu", "cuda"):
        return get_device(f"cuda:{jax_device.local_hardware_id}")
    raise DeviceError(f"JAX device {jax_device!r} has no loomwork device (loomwork runs on the CPU and CUDA)")


def device_to_jax(wp_device: Any = None) -> Any:
    """The JAX device of a loomwork device (default: the current one)."""
    dev = get_device(wp_device)
    for d in _jax().local_devices(backend=None):
        if d.platform in ("cpu", "gpu", "cuda") and device_from_jax(d) == dev:
            return d
    for d in _jax().local_devices(backend="cpu"):
        if device_from_jax(d) == dev:
            return d
    raise DeviceError(f"JAX has no device for {dev}")


def from_jax(jax_array: Any, dtype: Any = None) -> array:
    """A zero-copy array over a JAX array's memory (through DLPack). `dtype` may be a vector or matrix type
    made of the trailing dimensions; by default the array's scalar type. JAX arrays are immutable: write
    into the result only when nothing in JAX reads the array again."""
    jax = _jax()
    if not isinstance(jax_array, jax.Array):
        raise TypeError(f"wp.from_jax takes a jax.Array, got {type(jax_array).__name__}")
    buf = foreign.read_dlpack(jax_array, None)
    return over_buffer(buf, dtype if dtype is not None else buf.scalar, "wp.from_jax")


def to_jax(a: array) -> Any:
    """A JAX array viewing `a`'s memory (no copy; vectors and matrices become trailing dimensions)."""
    if not isinstance(a, array):
        raise TypeError(f"wp.to_jax takes a wp.array, got {type(a).__name__}")
    if T.is_struct_type(a.dtype):
        raise TypeError(f"wp.to_jax: JAX has no arrays of structs ({T.type_name(a.dtype)})")
    return _jax().dlpack.from_dlpack(a)


# -- kernels as JAX primitives -----------------------------------------------------------------------------

class _Param:
    """A kernel parameter as JAX sees it: arrays carry vector and matrix components as trailing dimensions."""

    def __init__(self, index: int, name: str, t: Any, in_out: bool) -> None:
        self.index, self.name, self.type, self.in_out = index, name, t, in_out
        self.is_array = isinstance(t, ArrayType)
        dtype = t.dtype if self.is_array else t
        self.ndim = t.ndim if self.is_array else 0
        self.jaxable = T.is_scalar(dtype) or T.is_composite(dtype)  # has a JAX form (else: static only)
        self.inner = tuple(dtype._shape_) if T.is_composite(dtype) else ()
        self.scalar = T.elem_scalar(dtype) if self.jaxable else None

    @property
    def jax_ndim(self) -> int:
        return self.ndim + len(self.inner)

    def jax_dtype(self) -> np.dtype:
        return np.dtype(dtype_to_jax(self.scalar))


class _Call:
    """One packed FFI call: the launch block, where each operand and result goes in it (offset, kind,
    flags), operands' and results' unbatched shapes and dtypes, and which operands results alias."""

    def __init__(self, blob: bytes, operand_slots: list, result_slots: list, operand_types: list, out_types: list,
                 aliases: dict[int, int], keep: Any, kernel: str = "", fault_offset: int = -1,
                 sites: str = "") -> None:
        self.blob, self.operand_slots, self.result_slots = blob, operand_slots, result_slots
        self.operand_types, self.out_types, self.aliases = operand_types, out_types, aliases
        self.keep = keep  # the loaded module whose entry the block points at
        self.kernel, self.fault_offset, self.sites = kernel, fault_offset, sites  # debug builds' fault reports
        self.cuda: _Call | None = None  # the same launch packed for CUDA devices (where loomwork has them)
        self.desc = b""  # (CUDA) the native launch settings, then each device's (context, kernel handle)


def _ffi(call: _Call, batch: tuple[int, ...], unbatched: tuple[bool, ...], operands: Sequence[Any]) -> list:
    """Run `call` once per item of `batch` (operands marked unbatched are shared by every item), with the launch
    packed for the platform XLA compiles for."""
    if call.cuda is None:
        return _ffi_call(call, batch, unbatched, operands)
    gpu = call.cuda
    return _jax().lax.platform_dependent(*operands, cpu=lambda *o: _ffi_call(call, batch, unbatched, o),
                                         cuda=lambda *o: _ffi_call(gpu, batch, unbatched, o))


def _ffi_call(call: _Call, batch: tuple[int, ...], unbatched: tuple[bool, ...], operands: Sequence[Any]) -> list:
    jax = _jax()
    slots = []
    for (off, kind, flags), (shape, dt), u in zip(call.operand_slots, call.operand_types, unbatched, strict=True):
        slots.append((off, kind, flags, 0 if u else math.prod(shape) * dt.itemsize))
    for (off, kind, flags), (shape, dt) in zip(call.result_slots, call.out_types, strict=True):
        slots.append((off, kind, flags, math.prod(shape) * dt.itemsize))
    out_types = [jax.ShapeDtypeStruct(batch + shape, dt) for shape, dt in call.out_types]
    run = jax.ffi.ffi_call(TARGET, out_types, input_output_aliases=call.aliases or None)
    extra = {"desc": np.frombuffer(call.desc, np.uint8)} if call.desc else {}
    return run(*operands, blob=np.frombuffer(call.blob, np.uint8), slots=np.array(slots, np.int64).ravel(),
               batch=np.int64(math.prod(batch)), fault_offset=np.int64(call.fault_offset), kernel=call.kernel,
               sites=call.sites, **extra)


def _batching(call: _Call, method: str, batch: tuple[int, ...] = (), unbatched: tuple[bool, ...] | None = None
              ) -> Callable[..., list]:
    """`call` as a function of its operands that `jax.vmap` batches with `method` (see the module docstring)."""
    jax = _jax()
    jnp = jax.numpy
    if unbatched is None:
        unbatched = (True,) * len(call.operand_slots)

    @jax.custom_batching.custom_vmap
    def run(*operands: Any) -> list:
        return _ffi(call, batch, unbatched, operands)

    @run.def_vmap
    def rule(axis_size: int, in_batched: Sequence[bool], *operands: Any) -> tuple[list, list]:
        n_out = len(call.out_types)
        if method in ("sequential", "sequential_unrolled"):
            def item(xs: Sequence[Any]) -> list:
                it = iter(xs)
                return run(*[next(it) if b else o for o, b in zip(operands, in_batched, strict=True)])
            xs = [o for o, b in zip(operands, in_batched, strict=True) if b]
            if method == "sequential":
                outs = jax.lax.map(item, xs)
            else:
                each = [item([x[k] for x in xs]) for k in range(axis_size)]
                outs = [jnp.stack([e[r] for e in each]) for r in range(n_out)]
            return list(outs), [True] * n_out
        new_batch = (axis_size, *batch)
        ops, flags = [], []
        for j, (o, b, u) in enumerate(zip(operands, in_batched, unbatched, strict=True)):
            if not b and u and method != "broadcast_all" and j not in call.aliases:
                ops.append(o)
                flags.append(True)
                continue
            item_shape = call.operand_types[j][0]
            if b and u:
                o = o.reshape((axis_size, *(1,) * len(batch), *item_shape))
            ops.append(jnp.broadcast_to(o, (*new_batch, *item_shape)))
            flags.append(False)
        return _batching(call, method, new_batch, tuple(flags))(*ops), [True] * n_out

    return run


def _as_dims(dims: Any, what: str) -> tuple[int, ...]:
    if isinstance(dims, int | np.integer) and not isinstance(dims, bool):
        return (int(dims),)
    try:
        out = tuple(int(d) for d in dims)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of ints, got {dims!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"{what} must not be negative, got {dims!r}")
    return out


class _Signature:
    """Inputs then outputs of a kernel or an annotated function, as the JAX bridge calls them."""

    def _setup(self, names: Sequence[str], types: Sequence[Any], num_outputs: int, in_out_argnames: Any,
               what: str) -> None:
        in_out = list(in_out_argnames or ())
        if len(set(in_out)) != len(in_out):
            raise ValueError(f"{what}: in_out_argnames has duplicates: {in_out}")
        unknown = [n for n in in_out if n not in names]
        if unknown:
            raise ValueError(f"{what} has no parameter(s) {unknown} (in_out_argnames); its parameters are "
                             f"{list(names)}")
        if not isinstance(num_outputs, int) or num_outputs < 1:
            raise ValueError(f"{what} needs at least one output (num_outputs={num_outputs!r}): inputs come first, "
                             "then the output arrays")
        if num_outputs > len(names):
            raise ValueError(f"{what} has {len(names)} parameter(s), fewer than num_outputs={num_outputs}")
        if len(in_out) > num_outputs:
            raise ValueError(f"{what}: num_outputs={num_outputs} must count the {len(in_out)} in-out argument(s)")
        self.num_inputs = len(names) - num_outputs + len(in_out)
        self.params = [_Param(i, n, t, n in in_out) for i, (n, t) in enumerate(zip(names, types, strict=True))]
        for p in self.params:
            if p.in_out and p.index >= self.num_inputs:
                raise ValueError(f"{what}: in-out argument '{p.name}' comes after the output-only arguments; put "
                                 "in-out arguments before them")
            if p.is_array and not p.jaxable:
                raise TypeError(f"{what}: argument '{p.name}' is {p.type}, which JAX cannot hold (JAX arrays are of "
                                "scalars, with vectors and matrices as trailing dimensions)")
            if (p.in_out or p.index >= self.num_inputs) and not p.is_array:
                raise TypeError(f"{what}: output '{p.name}' must be an array of scalars, vectors or matrices, got "
                                f"{T.type_name(p.type)} (inputs come before outputs: is num_outputs={num_outputs} "
                                "right?)")
        self.inputs = self.params[:self.num_inputs]
        self.outputs = [p for p in self.params if p.in_out] + self.params[self.num_inputs:]

    def _operands(self, what: str, args: Sequence[Any]) -> tuple[list, list, dict]:
        """The JAX operands among `args` (arrays, scalars given as JAX values), their parameters, and the
        static values by parameter position."""
        jax = _jax()
        if len(args) != self.num_inputs:
            sig = ", ".join(p.name for p in self.inputs)
            raise TypeError(f"{what} takes {self.num_inputs} input(s) ({sig}), got {len(args)}")
        operands, op_params, static = [], [], {}
        for p, v in zip(self.inputs, args, strict=True):
            if p.is_array:
                operands.append(_input_array(what, p, v))
                op_params.append(p)
            elif p.jaxable and isinstance(v, jax.Array):
                operands.append(_traced_scalar(what, p, v))
                op_params.append(p)
            else:
                static[p.index] = v
        return operands, op_params, static

    def _shapes(self, what: str, args: Sequence[Any], dims: tuple[int, ...] | None, output_dims: Any
                ) -> dict[int, tuple]:
        """Each output's JAX shape, by parameter position (`dims`: the default for output-only arrays)."""
        if output_dims is not None and not isinstance(output_dims, dict):
            output_dims = _as_dims(output_dims, f"{what}: output_dims")
        if isinstance(output_dims, dict):
            names = {p.name for p in self.outputs}
            unknown = [n for n in output_dims if n not in names]
            if unknown:
                raise ValueError(f"{what}: output_dims names {unknown}, which are not outputs (outputs: "
                                 f"{sorted(names)})")
        shapes = {}
        for p in self.outputs:
            given = output_dims.get(p.name) if isinstance(output_dims, dict) else output_dims
            if p.in_out:
                shape = tuple(args[p.index].shape)
                if given is not None and _jax_shape(what, p, _as_dims(given, f"{what}: output_dims")) != shape:
                    raise ValueError(f"{what}: in-out argument '{p.name}' has shape {shape}, but output_dims gives "
                                     f"{given}")
            elif isinstance(output_dims, dict) and given is None:
                raise ValueError(f"{what}: output_dims has no entry for output '{p.name}'")
            elif given is None and dims is None:
                raise ValueError(f"{what}: no output_dims for output '{p.name}' and no input array to take them from")
            else:
                shape = _jax_shape(what, p, _as_dims(given, f"{what}: output_dims") if given is not None else dims)
            shapes[p.index] = shape
        return shapes

    def _first_array_dims(self, args: Sequence[Any]) -> tuple[int, ...] | None:
        first = next((p for p in self.inputs if p.is_array), None)
        return None if first is None else tuple(args[first.index].shape[:first.ndim])


class JaxKernel(_Signature):
    """A kernel callable from JAX (see `jax_kernel`): call it with the kernel's inputs, get its outputs."""

    def __init__(self, kernel: Kernel, num_outputs: int = 1, vmap_method: str = "broadcast_all",
                 launch_dims: Any = None, output_dims: Any = None, in_out_argnames: Sequence[str] = (),
                 enable_backward: bool = False) -> None:
        if not isinstance(kernel, Kernel):
            raise TypeError(f"jax_kernel takes a @wp.kernel, got {type(kernel).__name__}")
        if kernel.is_generic:
            raise TypeError(f"jax_kernel: kernel '{kernel.key}' is generic; pass a concrete overload "
                            "(wp.overload(kernel, [...]))")
        self.kernel, self.key = kernel, kernel.key
        what = f"jax_kernel: kernel '{self.key}'"
        names, types = kernel.signature()
        self._setup(names, types, num_outputs, in_out_argnames, what)
        if enable_backward and in_out_argnames:
            raise ValueError(f"{what}: in_out_argnames {list(in_out_argnames)} cannot be used with "
                             "enable_backward=True (an in-place update has no gradient); return a new output instead")
        self.vmap_method = _check_vmap(vmap_method, what)
        self.launch_dims, self.output_dims = launch_dims, output_dims
        self.enable_backward = enable_backward
        self._fault_records: list[Any] = []  # device fault records of debug builds' GPU calls
        self.__name__ = f"jax_kernel({self.key})"

    def __repr__(self) -> str:
        return f"<{self.__name__}>"

    def _loaded(self, dev: Device) -> tuple[Any, Any, Any]:
        lm = self.kernel.module.load(dev)
        lk = lm.kernels.get(self.key) or lm.kernel(self.key)
        return lm, lk, lk.plan or _make_plan(lk, dev)

    def __call__(self, *args: Any, output_dims: Any = None, launch_dims: Any = None,
                 vmap_method: str | None = None) -> list:
        """The kernel's outputs (in-out arguments first, then output-only ones) as a list of JAX arrays."""
        what = f"kernel '{self.key}'"
        operands, op_params, static = self._operands(what, args)
        method = _check_vmap(vmap_method if vmap_method is not None else self.vmap_method, what)
        launch_dims = launch_dims if launch_dims is not None else self.launch_dims
        output_dims = output_dims if output_dims is not None else self.output_dims
        lk = self._loaded(get_device("cpu"))[1]
        if launch_dims is None:
            dims = self._first_array_dims(args)
            if dims is None:
                raise ValueError(f"{what} has no input array to take the launch dimensions from; pass launch_dims")
        else:
            dims = _as_dims(launch_dims, f"{what}: launch_dims")
        if not 1 <= len(dims) <= 4:
            raise ValueError(f"{what}: launch dimensions must be 1 to 4 ints, got {dims}")
        if lk.tid_count > 1 and len(dims) != lk.tid_count:
            raise ValueError(f"{what} unpacks wp.tid() into {lk.tid_count} indices, but its launch dimensions are "
                             f"{dims}")
        shapes = self._shapes(what, args, dims, output_dims)
        shapes.update((p.index, tuple(o.shape)) for p, o in zip(op_params, operands, strict=True))
        primal = _batching(self._call(dims, static, op_params, shapes, adjoint=False), method)
        if not self.enable_backward:
            return primal(*operands)
        return self._differentiable(dims, static, op_params, shapes, method, primal)(*operands)

    def _call(self, dims: tuple, static: dict, op_params: list, shapes: dict, adjoint: bool) -> _Call:
        """The launch packed for XLA's CPU, with the same launch packed for CUDA attached where loomwork has CUDA
        devices (the kernel is loaded on each; the handler picks the one XLA's stream belongs to)."""
        call = self._pack(get_device("cpu"), dims, static, op_params, shapes, adjoint)
        gpus = _jax_gpus()
        if gpus:
            call.cuda = self._pack(gpus[0], dims, static, op_params, shapes, adjoint)
            descs = []
            for d in gpus:
                lm = self.kernel.module.load(d)
                descs.append((lm.adjoint(self.key) if adjoint else lm.kernels[self.key]).launch.desc)
            # the first device's launch settings, then each device's (context, kernel handle)
            call.cuda.desc = descs[0] + b"".join(struct.pack("<QQ", d.backend.ctx, struct.unpack_from("<Q", desc, 8)[0])
                                                 for d, desc in zip(gpus, descs, strict=True))
        return call

    def _pack(self, dev: Device, dims: tuple, static: dict, op_params: list, shapes: dict, adjoint: bool) -> _Call:
        """The packed forward launch on `dev` (operands: inputs; results: outputs), or the adjoint's (operands:
        inputs, outputs, output cotangents; results: input gradients, then the cotangents, which it may change)."""
        lm, lk, plan = self._loaded(dev)
        launcher = lm.adjoint(self.key) if adjoint else lk
        values = []
        for p in self.params:
            if p.index in static:
                try:
                    values.append(plan.converters[p.index](static[p.index]))
                except LaunchError as e:
                    raise TypeError(str(e)) from None
            elif p.is_array:
                shape = shapes[p.index]
                itemsize = p.scalar.size
                strides = foreign.contiguous_strides(shape, itemsize)[:p.ndim]
                values.append(pack_desc(0, 0, shape[:p.ndim], strides))
            else:
                values.append(bytes(T.type_size(p.type)) if T.is_composite(p.type) else
                              False if p.scalar is T.bool_ else 0.0 if p.scalar.is_float else 0)
        size = math.prod(dims)
        # debug builds: the header ends with the fault record's address, which the CPU handler fills in and the
        # CUDA one reads back (a record in device memory this call owns)
        fault = 0
        if lm.debug and not dev.backend.host_accessible:  # alive as long as this jax_kernel (compiled calls use it)
            fault, record = dev.backend.allocate(ctypes.sizeof(ErrorRecord), zero=True)
            self._fault_records.append(record)
            dev.backend.synchronize()  # allocated and zeroed before XLA's stream reads it
        blob = plan.struct.pack(*launcher.header(size, dims, fault), *values)
        debug = dict(kernel=self.kernel.label + (" (in its adjoint)" if adjoint else ""), fault_offset=-1, sites="")
        if lm.debug:
            debug["fault_offset"] = plan.offsets[0] - 8
            debug["sites"] = "\n".join(f"`{text}` (in '{owner}' at {filename}:{line})"
                                       for owner, text, filename, line in lm.sites)
        off = plan.offsets
        op_slots, op_types = [], []
        for p in op_params:
            op_types.append((shapes[p.index], p.jax_dtype()))
            op_slots.append((off[p.index], _ADDRESS if p.is_array else p.jax_dtype().itemsize * math.prod(p.inner),
                             0))
        res_slots, out_types, aliases = [], [], {}
        if not adjoint:
            for p in self.outputs:
                if p.in_out:
                    j = op_params.index(p)
                    aliases[j] = len(res_slots)
                    op_slots[j] = (0, _SKIP, 0)
                flags = _ZERO_FIRST if p.index in lk.accumulates and not p.in_out else 0
                res_slots.append((off[p.index], _ADDRESS, flags))
                out_types.append((shapes[p.index], p.jax_dtype()))
            return _Call(blob, op_slots, res_slots, op_types, out_types, aliases, lm, **debug)
        for p in self.outputs:  # the forward outputs: their values, as the adjoint's replay reads them
            op_slots.append((off[p.index], _ADDRESS, 0))
            op_types.append((shapes[p.index], p.jax_dtype()))
        for r, p in enumerate(self.outputs):  # their cotangents, as the arrays' gradients
            aliases[len(op_slots)] = r
            op_slots.append((0, _SKIP, 0))
            op_types.append((shapes[p.index], p.jax_dtype()))
        grads = [p for p in op_params if p.is_array and p.scalar.is_float]
        for p in grads:
            res_slots.append((off[p.index] + 8, _ADDRESS, _ZERO_FIRST))
            out_types.append((shapes[p.index], p.jax_dtype()))
        res_slots[len(grads):len(grads)] = [(off[p.index] + 8, _ADDRESS, 0) for p in self.outputs]
        out_types[len(grads):len(grads)] = [(shapes[p.index], p.jax_dtype()) for p in self.outputs]
        aliases = {j: r + len(grads) for j, r in aliases.items()}
        return _Call(blob, op_slots, res_slots, op_types, out_types, aliases, lm, **debug)

    def _differentiable(self, dims: tuple, static: dict, op_params: list, shapes: dict, method: str,
                        primal: Callable[..., list]) -> Callable[..., list]:
        """`primal` with a custom VJP that launches the kernel's adjoint."""
        jax = _jax()
        jnp = jax.numpy
        from jax.custom_derivatives import SymbolicZero

        if self._loaded(get_device("cpu"))[0].adjoint(self.key) is None:
            raise ValueError(f"kernel '{self.key}' was built without its backward pass (enable_backward=False on "
                             "the kernel or its module), which jax_kernel(enable_backward=True) launches")
        backward = _batching(self._call(dims, static, op_params, shapes, adjoint=True), method)
        with_grad = [j for j, p in enumerate(op_params) if p.is_array and p.scalar.is_float]

        @jax.custom_vjp
        def run(*operands: Any) -> list:
            return primal(*operands)

        def fwd(*primals: Any) -> tuple[list, tuple]:
            for p, x in zip(op_params, primals, strict=True):
                if x.perturbed and not p.is_array:
                    raise TypeError(f"jax_kernel: kernel '{self.key}' gives no gradient with respect to scalar "
                                    f"argument '{p.name}'; pass it as a static value or through jax.lax.stop_gradient")
            operands = [x.value for x in primals]
            outs = primal(*operands)
            return outs, (operands, outs)

        def bwd(res: tuple, cts: Sequence[Any]) -> tuple:
            operands, outs = res
            cts = [jnp.zeros_like(o) if isinstance(ct, SymbolicZero) or ct.dtype != o.dtype else ct
                   for ct, o in zip(cts, outs, strict=True)]
            grads = iter(backward(*operands, *outs, *cts)[:len(with_grad)])
            return tuple(next(grads) if j in with_grad else _zero_cotangent(o) for j, o in enumerate(operands))

        run.defvjp(fwd, bwd, symbolic_zeros=True)
        return run


@functools.cache
def _jax_gpus() -> list[Device]:
    """loomwork's CUDA devices when JAX runs on CUDA too (otherwise none: calls are packed for the CPU only)."""
    try:
        if not _jax().devices("cuda"):
            return []
    except RuntimeError:  # this JAX has no CUDA backend
        return []
    return [d for d in get_devices() if d.backend.cuda_array_interface]


def _zero_cotangent(x: Any) -> Any:
    jax = _jax()
    if jax.numpy.issubdtype(x.dtype, jax.numpy.inexact):
        return jax.numpy.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)


def _check_vmap(method: Any, what: str) -> str:
    if method not in VMAP_METHODS:
        raise ValueError(f"{what}: vmap_method must be one of {', '.join(map(repr, VMAP_METHODS))}, got {method!r}")
    return method


def _x64_hint(dt: np.dtype) -> str:
    jax = _jax()
    return (" (64-bit types need jax.config.update('jax_enable_x64', True))"
            if dt.itemsize == 8 and dt.kind in "fiu" and not jax.config.jax_enable_x64 else "")


def _input_array(what: str, p: _Param, v: Any) -> Any:
    """Input array `v` of parameter `p`, checked (dtype, dimensions, component dimensions)."""
    jax = _jax()
    if isinstance(v, np.ndarray):
        v = jax.numpy.asarray(v)
    if not isinstance(v, jax.Array):
        raise TypeError(f"{what} argument '{p.name}' expects a JAX array ({p.type}), got {type(v).__name__}")
    expect = p.jax_dtype()
    if v.dtype != expect:
        raise TypeError(f"{what} argument '{p.name}' expects a JAX array of {expect} ({p.type}), got one of "
                        f"{v.dtype}{_x64_hint(expect)}")
    form = f"{p.ndim} for the array" + (f" + {len(p.inner)} for its {T.type_name(p.type.dtype)} components"
                                        if p.inner else "")
    if v.ndim != p.jax_ndim or tuple(v.shape[p.ndim:]) != p.inner:
        raise TypeError(f"{what} argument '{p.name}' expects a JAX array of {p.jax_ndim} dimension(s) ({form}"
                        f"{', ending in ' + str(p.inner) if p.inner else ''}), got shape {tuple(v.shape)}")
    return v


def _traced_scalar(what: str, p: _Param, v: Any) -> Any:
    """A scalar (or vector / matrix) argument given as a JAX value, e.g. traced by jax.jit: a 0-d operand."""
    jnp = _jax().numpy
    if tuple(v.shape) != p.inner:
        raise TypeError(f"{what} argument '{p.name}' expects a {T.type_name(p.type)}, got a JAX array of shape "
                        f"{tuple(v.shape)}")
    expect = p.jax_dtype()
    if v.dtype != expect:
        same_kind = (jnp.issubdtype(v.dtype, jnp.floating) == p.scalar.is_float
                     and (v.dtype == jnp.bool_) == (p.scalar is T.bool_))
        if not same_kind or _x64_hint(expect):
            raise TypeError(f"{what} argument '{p.name}' expects {T.type_name(p.type)}, got a JAX value of "
                            f"{v.dtype}{_x64_hint(expect)}")
        v = v.astype(expect)
    return v


def _jax_shape(what: str, p: _Param, given: tuple[int, ...]) -> tuple[int, ...]:
    """An output's JAX shape from dimensions given in either form: the array's own or JAX's (with the
    trailing component dimensions)."""
    if len(given) == p.ndim:
        return given + p.inner
    if p.inner and len(given) == p.jax_ndim and given[p.ndim:] == p.inner:
        return given
    jax_form = f" or JAX's ({p.jax_ndim} ending in {p.inner})" if p.inner else ""
    raise ValueError(f"{what}: output '{p.name}' is {p.type}; dimensions {given} fit neither its own form "
                     f"({p.ndim} dimension(s)){jax_form}")


def jax_kernel(kernel: Kernel, num_outputs: int = 1, vmap_method: str = "broadcast_all", launch_dims: Any = None,
               output_dims: Any = None, in_out_argnames: Sequence[str] = (), enable_backward: bool = False
               ) -> JaxKernel:
    """A callable that runs `kernel` as a JAX primitive (under jax.jit, vmap, grad, shard_map), on XLA's CPU.

    The kernel's parameters are its inputs followed by `num_outputs` output arrays; arguments named in
    `in_out_argnames` are among the inputs and are returned updated, before the output-only arrays (all
    outputs come back as a list). The launch grid is `launch_dims`, by default the shape of the first input
    array; each output's shape is `output_dims` (an int, a tuple, or a dict by output name, in the array's own
    form or JAX's), by default the grid. Vector and matrix components are trailing JAX dimensions. Scalars may
    be Python values or JAX values (traced by jax.jit: no retrace when they change). `vmap_method` (also per
    call) chooses how jax.vmap batches calls. `enable_backward=True` gives a custom VJP from the kernel's
    adjoint: gradients for every floating-point input array."""
    handler_library()
    return JaxKernel(kernel, num_outputs, vmap_method, launch_dims, output_dims, in_out_argnames, enable_backward)


# -- Python functions as FFI targets -----------------------------------------------------------------------

class GraphMode(enum.IntEnum):
    """Who may capture a `jax_callable` into a CUDA graph: JAX (default), loomwork itself, or nobody. On the
    CPU there are no CUDA graphs, and every mode calls the function each time."""

    NONE = 0
    JAX = 1
    WARP = 2


class _Span(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _FfiBuffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("data", ctypes.c_void_p), ("rank", ctypes.c_int64), ("dims", ctypes.POINTER(ctypes.c_int64))]


class _FfiList(ctypes.Structure):  # XLA_FFI_Args and XLA_FFI_Rets
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("items", ctypes.POINTER(ctypes.c_void_p))]


class _FfiAttrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("names", ctypes.POINTER(ctypes.POINTER(_Span))),
                ("attrs", ctypes.POINTER(ctypes.c_void_p))]


class _FfiCallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("api", ctypes.c_void_p),
                ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int), ("args", _FfiList), ("rets", _FfiList),
                ("attrs", _FfiAttrs), ("future", ctypes.c_void_p)]


class _FfiScalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", ctypes.c_void_p)]


class _FfiArray(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("size", ctypes.c_size_t), ("data", ctypes.c_void_p)]


_XLA_DTYPES = {1: "bool", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "uint8", 7: "uint16", 8: "uint32",
               9: "uint64", 10: "float16", 11: "float32", 12: "float64", 16: "bfloat16"}
_ATTR_ARRAY, _ATTR_SCALAR, _ATTR_STRING = 1, 3, 4
_FFI_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_callbacks: dict[str, Any] = {}  # target name -> its ctypes function, alive as long as XLA may call it


def _xla_dtype(code: int) -> np.dtype:
    name = _XLA_DTYPES.get(code)
    if name is None:
        raise TypeError(f"an FFI buffer of XLA type {code} has no loomwork scalar type")
    return np.dtype(dtype_to_jax(dtype_from_jax(name)))


class FfiBuffer:
    """An operand or result of an FFI call, with `shape`, `dtype`, `ptr` and `device`: host memory exported through
    `__array_interface__` on the CPU, device memory through `__cuda_array_interface__` (with XLA's stream) on
    CUDA, so kernels take it as an array argument (`wp.launch(..., inputs=[buf])`)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype, device: Device | None = None,
                 stream: int | None = None) -> None:
        self.ptr, self.shape, self.dtype = ptr, shape, dtype
        self.device, self.stream = device or get_device("cpu"), stream

    def _interface(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr or 0, False), "version": 3}

    @property
    def __array_interface__(self) -> dict:
        if self.stream is not None:
            raise AttributeError("__array_interface__: this FFI buffer is CUDA device memory")
        return self._interface()

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.stream is None:
            raise AttributeError("__cuda_array_interface__: this FFI buffer is host memory")
        return {**self._interface(), "stream": self.stream}

    def numpy(self) -> np.ndarray:
        """The buffer as a NumPy array: a view on the CPU, a copy of device memory on CUDA."""
        if self.stream is None:
            return np.asarray(self)
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:  # on XLA's stream, after the work that produced the buffer
            run_on(Stream(self.device, cuda_stream=self.stream), self.device.backend.download,
                   (out.ctypes.data, self.ptr, out.nbytes))
        return out

    def __repr__(self) -> str:
        return f"FfiBuffer(shape={self.shape}, dtype={self.dtype})"


class FfiContext:
    """What an FFI callback learns about where it runs: `stream` is the CUDA stream (None on the CPU) and
    `device` the loomwork device."""

    def __init__(self, stream: int | None, device: Device | None = None) -> None:
        self.stream, self.device = stream, device or get_device("cpu")


def _stream_device(stream: int) -> Device:
    """The CUDA device XLA's stream belongs to."""
    for d in get_devices():
        if d.backend.cuda_array_interface and d.backend.owns_stream(stream):
            return d
    raise DeviceError("an XLA FFI call runs on a CUDA stream of no device loomwork knows")


def _buffers(items: _FfiList, ctx: FfiContext) -> list[FfiBuffer]:
    out = []
    for i in range(items.size):
        b = _FfiBuffer.from_address(items.items[i])
        out.append(FfiBuffer(b.data or 0, tuple(b.dims[k] for k in range(b.rank)), _xla_dtype(b.dtype), ctx.device,
                             ctx.stream))
    return out


def _attrs(attrs: _FfiAttrs) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for i in range(attrs.size):
        span = attrs.names[i].contents
        name = ctypes.string_at(span.ptr, span.len).decode()
        kind, where = attrs.types[i], attrs.attrs[i]
        if kind == _ATTR_SCALAR:
            s = _FfiScalar.from_address(where)
            dt = _xla_dtype(s.dtype)
            found[name] = np.frombuffer(ctypes.string_at(s.value, dt.itemsize), dt)[0].item()
        elif kind == _ATTR_ARRAY:
            a = _FfiArray.from_address(where)
            dt = _xla_dtype(a.dtype)
            found[name] = np.frombuffer(ctypes.string_at(a.data, dt.itemsize * a.size), dt).copy()
        elif kind == _ATTR_STRING:
            s = _Span.from_address(where)
            found[name] = ctypes.string_at(s.ptr, s.len).decode()
        else:
            raise TypeError(f"FFI attribute '{name}' is a dictionary, which callbacks do not take")
    return found


def register_ffi_callback(name: str, func: Callable[..., None], graph_compatible: bool = True) -> None:
    """Register `func(inputs, outputs, attrs, ctx)` as XLA FFI target `name` (CPU, and CUDA where loomwork has
    CUDA devices), for `jax.ffi.ffi_call(name, ...)`: inputs and outputs are `FfiBuffer`s (kernels take them as
    arrays), attrs the call's keyword attributes, ctx an `FfiContext` (on CUDA: XLA's stream and the device;
    launches should go to that stream, e.g. inside `wp.ScopedStream(wp.Stream(ctx.device,
    cuda_stream=ctx.stream))`). An exception in `func` fails the call with its message. `graph_compatible`
    concerns XLA's CUDA graphs: the callback runs Python, so XLA never records it into one."""
    jax = _jax()
    lib = handler_library()
    if not callable(func):
        raise TypeError(f"register_ffi_callback('{name}'): func must be callable, got {type(func).__name__}")

    def handler_for(on_gpu: bool) -> Any:
        def handler(frame_ptr: int) -> int | None:
            try:
                if lib.lw_jax_answer_metadata(frame_ptr):
                    return None
                frame = _FfiCallFrame.from_address(frame_ptr)
                stream = lib.lw_jax_stream(frame_ptr) if on_gpu else None
                ctx = FfiContext(stream, _stream_device(stream) if on_gpu else None)
                func(_buffers(frame.args, ctx), _buffers(frame.rets, ctx), _attrs(frame.attrs), ctx)
                return None
            except Exception as e:  # noqa: BLE001 - reported to XLA, which raises it in the caller
                return lib.lw_jax_error(frame_ptr, f"{name}: {type(e).__name__}: {e}".encode())
        return _FFI_HANDLER(handler)

    fn = _callbacks[name] = handler_for(False)
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn), platform="cpu")
    if any(d.backend.cuda_array_interface for d in get_devices()):
        gpu = _callbacks[name + "/cuda"] = handler_for(True)
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(gpu), platform="CUDA")


class JaxCallable(_Signature):
    """An annotated Python function that launches kernels, callable from JAX (see `jax_callable`)."""

    def __init__(self, func: Callable[..., None], num_outputs: int = 1, graph_mode: GraphMode = GraphMode.JAX,
                 vmap_method: str = "broadcast_all", output_dims: Any = None,
                 in_out_argnames: Sequence[str] = ()) -> None:
        if not callable(func):
            raise TypeError(f"jax_callable takes a function, got {type(func).__name__}")
        self.func, self.key = func, getattr(func, "__qualname__", repr(func))
        what = f"jax_callable: function '{self.key}'"
        hints = annotations(func)
        names, types = [], []
        for n in inspect.signature(func).parameters:
            if n not in hints:
                raise TypeError(f"{what}: parameter '{n}' needs a type annotation, as a kernel's would")
            try:
                types.append(arg_type(hints[n]))
            except TypeError as e:
                raise TypeError(f"{what}: parameter '{n}': {e}") from None
            names.append(n)
        self._setup(names, types, num_outputs, in_out_argnames, what)
        self.graph_mode = GraphMode(graph_mode)
        self.vmap_method = _check_vmap(vmap_method, what)
        self.output_dims = output_dims
        self.name = f"loomwork_callable_{id(self):x}"
        self._calls: list[tuple[dict, list]] = []  # per traced call: static values, operand parameters
        register_ffi_callback(self.name, self._run)

    def __call__(self, *args: Any, output_dims: Any = None, vmap_method: str | None = None) -> list:
        """The function's outputs (in-out arguments first, then output-only ones) as a list of JAX arrays."""
        jax = _jax()
        what = f"function '{self.key}'"
        operands, op_params, static = self._operands(what, args)
        method = _check_vmap(vmap_method if vmap_method is not None else self.vmap_method, what)
        shapes = self._shapes(what, args, self._first_array_dims(args),
                              output_dims if output_dims is not None else self.output_dims)
        out_types = [jax.ShapeDtypeStruct(shapes[p.index], p.jax_dtype()) for p in self.outputs]
        aliases = {op_params.index(p): r for r, p in enumerate(self.outputs) if p.in_out}
        self._calls.append((static, op_params))
        run = jax.ffi.ffi_call(self.name, out_types, vmap_method=method, input_output_aliases=aliases or None)
        return run(*operands, call=np.int64(len(self._calls) - 1))

    def _run(self, inputs: list, outputs: list, attrs: dict, ctx: FfiContext) -> None:
        """One FFI call: the function once per batch item (vmap's vectorized methods add leading dimensions)."""
        static, op_params = self._calls[attrs["call"]]
        bound = [*zip(op_params, inputs, strict=True), *zip(self.outputs, outputs, strict=True)]
        p0, b0 = bound[-1]
        batch = b0.shape[:len(b0.shape) - p0.jax_ndim]
        dev = ctx.device
        stream = Stream(dev, cuda_stream=ctx.stream) if ctx.stream is not None else None
        with ScopedStream(stream):
            for item in np.ndindex(*batch):
                self._run_item(item, bound, static, dev)

    def _run_item(self, item: tuple, bound: list, static: dict, dev: Device) -> None:
        """The function on one batch item's slices of the buffers."""
        args: list[Any] = [static.get(p.index) for p in self.params]
        for p, buf in bound:
            lead = len(buf.shape) - (p.jax_ndim if p.is_array else len(p.inner))
            item_shape, dt = buf.shape[lead:], buf.dtype
            strides = foreign.contiguous_strides(buf.shape, dt.itemsize)
            ptr = buf.ptr + sum(i * s for i, s, n in zip(item[len(item) - lead:], strides[:lead], buf.shape[:lead],
                                                          strict=True) if n != 1)
            if p.is_array:
                args[p.index] = array._wrap(ptr, p.type.dtype, item_shape[:p.ndim],
                                            strides[lead:lead + p.ndim], dev, buf, False)
            elif not (p.in_out or p.index in static):
                value = np.empty(math.prod(item_shape), dt)
                dev.backend.download(value.ctypes.data, ptr, value.nbytes)
                args[p.index] = p.type(*value.tolist()) if p.inner else value[0].item()
        self.func(*args)


def jax_callable(func: Callable[..., None], num_outputs: int = 1, graph_mode: GraphMode = GraphMode.JAX,
                 vmap_method: str = "broadcast_all", output_dims: Any = None,
                 in_out_argnames: Sequence[str] = ()) -> JaxCallable:
    """A callable that runs Python function `func` (annotated like a kernel: inputs, then `num_outputs` output
    arrays it fills, e.g. with `wp.launch`) as a JAX primitive, through a Python FFI callback (on XLA's CPU, and
    on CUDA devices, where its launches go to XLA's stream).
    Outputs' shapes come from `output_dims` (int, tuple, or dict by name; also per call), by default the first
    input array's. `vmap_method` is JAX's (the vectorized ones run `func` once per batch item)."""
    return JaxCallable(func, num_outputs, graph_mode, vmap_method, output_dims, in_out_argnames)
