"""`wp.launch`: check and pack a kernel's arguments, then run its grid.

Arguments are packed into one byte string: the device backend's launch header (ending in the native
`launch_t`) followed by the kernel's argument struct. The packing plan (a `struct.Struct` and one
converter per parameter) is built once per loaded kernel, and the backend's header and launch functions
are bound when the module loads, so a launch costs one `pack` and one call into the backend.

Array parameters also take other frameworks' arrays (NumPy, PyTorch, JAX, CuPy...: whatever
`foreign.describe` reads), viewed in place and checked like ours (dtype, shape, strides, device). What
the kernel writes (the effects analysis says) must be writable memory the caller will see: read-only
buffers and the temporary copies some `__array__` methods return are refused there; a temporary the
kernel only reads is kept alive until the launch is done.
"""

from __future__ import annotations

import ctypes
import platform
import struct
from typing import Any

import numpy as np

from . import config, foreign
from . import types as T
from .array import DESC, MAX_DIMS, RETAIN_GRAD_BIT, ArrayDesc, ArrayDescRef, array, indexedarray, pack_desc, snapshot
from .backend import ErrorRecord
from .device import Device, get_device, get_devices
from .errors import DeviceError, KernelRuntimeError, LaunchError, LaunchValueError
from .extensions import registry
from .ir import ArrayType
from .logger import log_info
from .module import Kernel, LoadedKernel, LoadedModule
from .stream import TIMING_KERNEL, Stream, capturing_graph, run_on, submit
from .stream import runtime as streams
from .structs import field_ctype, is_struct

_SCALAR_CODES = {
    T.bool_: "?", T.int8: "b", T.uint8: "B", T.int16: "h", T.uint16: "H", T.int32: "i", T.uint32: "I",
    T.int64: "q", T.uint64: "Q", T.float16: "e", T.float32: "f", T.float64: "d", T.bfloat16: "H",
}
_NULL_ARRAY = bytes(ctypes.sizeof(ArrayDesc))


class _Pinned(TypeError):
    """Raised by a converter whose argument is a temporary copy the kernel reads: the packing starts
    over on the path that keeps `owner` alive until the launch is done."""

    def __init__(self, desc: bytes, owner: Any) -> None:
        super().__init__("a temporary array argument")
        self.desc, self.owner = desc, owner


class LaunchPlan:
    """How to turn a kernel's Python arguments into the packed block a launch of `lk` on `device` takes."""

    def __init__(self, lk: LoadedKernel, device: Device) -> None:
        k = lk.kernel
        names, types = k.signature()
        fields = [(n, field_ctype(t)) for n, t in zip(names, types, strict=True)] or [("unused", ctypes.c_char)]
        layout = type("Args", (ctypes.Structure,), {"_fields_": fields})
        fmt, pos = ["<" + device.backend.launch_format], 0
        for (n, _), t in zip(fields, types or [None], strict=True):
            off = getattr(layout, n).offset
            fmt.append("x" * (off - pos))
            size = ctypes.sizeof(field_ctype(t)) if t is not None else 1
            fmt.append(f"{size}s" if t is None or not T.is_scalar(t) else _SCALAR_CODES[t])
            pos = off + size
        fmt.append("x" * (ctypes.sizeof(layout) - pos))
        self.struct = struct.Struct("".join(fmt))
        self.offsets = [struct.calcsize(fmt[0]) + getattr(layout, n).offset for n, _ in fields]  # in the block
        self.names, self.types = names, types
        self.converters = [_converter(k, n, t, device, _Use(i in lk.writes, i in lk.reads or i in lk.writes,
                                                             i in lk.null_tested))
                           for i, (n, t) in enumerate(zip(names, types, strict=True))]
        self.pack = self._fast_packer()

    def _fast_packer(self) -> Any:
        """pack(header, params) for the common case: scalars go to `struct` as they are, arrays and
        vectors through their converters. Anything `struct` rejects falls back to `pack_checked`."""
        if not self.names:
            return lambda header, params: self.struct.pack(*header, b"\0")
        names = [f"p{i}" for i in range(len(self.names))]
        values = [n if T.is_scalar(t) and t is not T.bfloat16 else f"c{i}({n})"  # bfloat16 goes in as its bits
                  for i, (n, t) in enumerate(zip(names, self.types, strict=True))]
        src = (f"def pack(header, params):\n"
               f"    {', '.join(names)}, = params\n"
               f"    return _pack(*header, {', '.join(values)})\n")
        env = {"_pack": self.struct.pack, **{f"c{i}": c for i, c in enumerate(self.converters)}}
        exec(src, env)  # noqa: S102 - generated from the kernel's own signature
        return env["pack"]

    def convert(self, params: list) -> tuple[list, list]:
        """The values `struct.pack` takes for `params`, and the temporaries they point into."""
        values, pins = [], []
        for c, v in zip(self.converters, params, strict=True):
            try:
                values.append(c(v))
            except _Pinned as p:
                values.append(p.desc)
                pins.append(p.owner)
        return values or [b"\0"], pins

    def pack_checked(self, kernel: Kernel, header: tuple, params: list) -> tuple[bytes, list]:
        """The packed block (with errors naming the argument that does not fit), and the temporaries it
        points into, which must outlive the launch."""
        values, pins = self.convert(params)
        try:
            return self.struct.pack(*header, *values), pins
        except (struct.error, OverflowError) as e:
            raise _pack_error(kernel, self, values, e) from None


class _Use:
    """What a kernel does with an array parameter: writes it, touches it at all, compares it with null."""

    __slots__ = ("written", "touched", "null_tested")

    def __init__(self, written: bool, touched: bool, null_tested: bool) -> None:
        self.written, self.touched, self.null_tested = written, touched, null_tested


def _converter(k: Kernel, name: str, t: Any, device: Device, use: _Use) -> Any:
    """A function from a Python argument to the value `struct.pack` takes for parameter `name` of a
    launch on `device`."""
    if isinstance(t, ArrayType) and t.indexed:
        def conv_indexed(v: Any) -> bytes:
            if not isinstance(v, indexedarray) or v.data is None:
                raise LaunchError(f"kernel {k.label} argument '{name}' expects {t}, got {type(v).__name__}")
            if v.dtype != t.dtype or v.ndim != t.ndim:
                raise LaunchError(f"kernel {k.label} argument '{name}' expects {t}, got an indexedarray of "
                                  f"{T.type_name(v.dtype)} with {v.ndim} dimension(s)")
            return v._desc_bytes()
        return conv_indexed
    if isinstance(t, ArrayType):
        dtype, ndim = t.dtype, t.ndim
        what = f"kernel {k.label} argument '{name}'"

        def conv_array(v: Any) -> bytes:
            cls = v.__class__
            if cls is array:  # the common case, in as few steps as possible
                d = v._desc
                if d is not None and v.dtype is dtype and v.ndim == ndim and v.device is device:
                    return d
            elif cls is ArrayDescRef:  # from_torch(..., return_ctype=True): as few steps too
                if v[1] is not dtype or v[2] != ndim or (v[3] is not device and v[3] != device):
                    raise LaunchError(f"{what} expects {t} on {device}, got a descriptor of {T.type_name(v.dtype)} "
                                      f"with {v.ndim} dimension(s) on {v.device}")
                return v[0]
            if isinstance(v, array):
                if v.dtype != t.dtype or v.ndim != t.ndim:
                    _bad_array(k, name, t, v)
                if v.device != device:
                    raise DeviceError(f"{what}: array is on {v.device}, launch is on {device}")
                if v.readonly and use.written:
                    raise LaunchError(f"{what} is read-only (it views memory exported read-only), but the kernel "
                                      "writes it")
                return v._desc_bytes()
            if isinstance(v, ArrayDesc):  # made by hand: taken as it is
                return bytes(v)
            if v is None:
                if use.touched and not use.null_tested:
                    raise LaunchError(f"{what} is None, but the kernel {'writes' if use.written else 'reads'} it; "
                                      "pass an array (None is for arrays a kernel never touches, or tests with "
                                      "wp.unot)")
                return _NULL_ARRAY
            return _foreign_array(what, t, v, device, use.written)
        return conv_array
    if is_struct(t):
        def conv_struct(v: Any) -> bytes:
            if not isinstance(v, t) and hasattr(v, "_as_struct"):  # an object a struct type stands for (BsrMatrix)
                s = v._as_struct(t)
                v = v if s is None else s
            if not isinstance(v, t):
                got = "None" if v is None else f"a {type(v).__name__}"
                raise LaunchError(f"kernel {k.label} argument '{name}' expects {t.__name__} but got {got}")
            for path, a in v.arrays():
                if a.device != device:
                    raise DeviceError(f"kernel {k.label} argument '{name}': field '{path}' is an array on "
                                      f"{a.device}, launch is on {device}")
            return bytes(v._pack())
        return conv_struct
    if T.is_composite(t):
        def conv_composite(v: Any) -> bytes:
            if type(v) is t:
                return bytes(v)
            _refuse_single_value(k, name, t, v)
            if v is None:
                raise LaunchValueError(f"kernel {k.label} argument '{name}' expects {T.type_name(t)}, got None: "
                                       f"Failed to convert argument for param {name} to {T.type_name(t)}")
            try:
                return bytes(t(v) if not isinstance(v, T._CompositeMixin) else t(v.numpy_value()))
            except (TypeError, ValueError) as e:
                raise LaunchError(f"kernel {k.label} argument '{name}' expects {T.type_name(t)}, got "
                                  f"{type(v).__name__}: {e}") from None
        return conv_composite

    def conv_scalar(v: Any) -> Any:
        if isinstance(v, T.ScalarType):
            v = v.value
        if isinstance(v, np.generic | np.ndarray):
            v = v.item() if np.size(v) == 1 else v
        if t is T.bfloat16 and isinstance(v, int | float) and not isinstance(v, bool):
            return T._to_ctype_value(t, v)  # its bits
        if t.is_float and isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
        if t.is_int and isinstance(v, int) and not isinstance(v, bool):
            return v
        if t is T.bool_ and isinstance(v, bool | int):
            return bool(v)
        if t is T.uint64 and isinstance(v, registry.handle_types):  # a Mesh, HashGrid...: its id
            return v.id
        raise LaunchError(f"kernel {k.label} argument '{name}' expects {T.type_name(t)}, got "
                          f"{type(v).__name__} ({v!r})")
    return conv_scalar


def _bad_array(k: Kernel, name: str, t: ArrayType, v: Any) -> None:
    raise LaunchError(f"kernel {k.label} argument '{name}' expects {t}, got an array of dtype "
                      f"{T.type_name(v.dtype)} with {v.ndim} dimension(s)")


def _foreign_array(what: str, t: ArrayType, v: Any, device: Device, written: bool) -> bytes:
    """Another framework's array, viewed without copying (see the module docstring)."""
    read = foreign.known_reader(v.__class__)
    if read is None:
        if isinstance(v, T.ScalarType | int | float | str) or not foreign.is_foreign_array(v):
            raise LaunchError(f"{what} expects {t}, got {type(v).__name__}")
        read = foreign.reader(v.__class__)
    try:
        buf = read(v, device)
    except DeviceError as e:
        raise DeviceError(f"{what}: {e}") from None
    except (TypeError, ValueError, BufferError) as e:
        raise LaunchError(f"{what}: {e}") from None
    if buf[4] is not device and buf[4] != device:
        where = "in host memory" if buf.device.backend.host_accessible else f"on {buf.device}"
        raise DeviceError(f"{what}: a {type(v).__name__} {where} was passed to a launch on {device}; pass data on "
                          f"{device}")
    try:
        shape, strides = foreign.fit(buf, t.dtype, what, t)
    except TypeError as e:
        raise LaunchError(str(e)) from None
    except ValueError as e:
        raise LaunchValueError(str(e)) from None
    if len(shape) != t.ndim:
        raise LaunchError(f"{what} expects {t}, got a {buf.source} of shape {tuple(buf.shape)} "
                          f"({len(shape)} dimension(s) of {T.type_name(t.dtype)})")
    if written and buf.readonly:
        raise LaunchError(f"{what} is a read-only {buf.source} (e.g. writeable=False, np.frombuffer of bytes), but "
                          "the kernel writes it; pass a writable copy")
    if written and buf.copied:
        raise LaunchError(f"{what}: the {buf.source} returned a temporary copy, so what the kernel writes would be "
                          "lost; pass an array that shares its memory (a NumPy array, a wp.array, a tensor)")
    desc = pack_desc(buf.ptr if 0 not in shape else 0, 0, shape, strides)  # empty arrays read as null, as ours
    if buf.copied:
        raise _Pinned(desc, buf.owner)
    return desc


def _fingerprint(v: Any) -> Any:
    """What of a value decides the type a generic parameter takes (an int's width, an array's element type)."""
    if isinstance(v, array):
        return (type(v), v.dtype, v.ndim)
    if isinstance(v, int) and not isinstance(v, bool):
        return (int, -(2**31) <= v < 2**31)
    return type(v) if isinstance(v, float | bool) else None


def _instantiate(kernel: Kernel, params: list) -> Kernel:
    """The overload of a generic kernel that these arguments call for (built once per type combination; a
    launch with wp.arrays and Python numbers finds it again by their fingerprints)."""
    names, types = kernel.signature()
    if len(params) != len(names):
        raise LaunchError(f"kernel {kernel.label} takes {len(names)} argument(s), got {len(params)}")
    prints = tuple(_fingerprint(v) for v, t in zip(params, types, strict=True) if T.is_generic(t))
    cache = kernel._launch_overloads
    if None not in prints:
        hit = cache.get(prints)
        if hit is not None:
            return hit
    inst = _instantiate_slow(kernel, names, types, params)
    if None not in prints:
        cache[prints] = inst
    return inst


def _instantiate_slow(kernel: Kernel, names: tuple, types: tuple, params: list) -> Kernel:
    concrete = []
    for n, t, v in zip(names, types, params, strict=True):
        if not T.is_generic(t):
            concrete.append(t)
            continue
        if isinstance(t, ArrayType):
            if isinstance(v, array | ArrayDescRef):
                dt = v.dtype
            elif foreign.is_foreign_array(v) and not isinstance(v, T.ScalarType | int | float | str):
                try:
                    dt = foreign.describe(v).scalar
                except (TypeError, ValueError, BufferError) as e:
                    raise LaunchError(f"kernel {kernel.label} argument '{n}': {e}") from None
            else:
                raise LaunchError(f"kernel {kernel.label} argument '{n}' expects an array, got {type(v).__name__}")
            concrete.append(ArrayType(dt, t.ndim))
        else:  # an `Any` parameter: the value's own type (an array, a struct, a scalar or vector value)
            vt = (ArrayType(v.dtype, v.ndim, isinstance(v, indexedarray)) if isinstance(v, array | indexedarray)
                  else type(v) if is_struct(type(v)) else T.python_value_type(v))
            if vt is None:
                raise LaunchError(f"kernel {kernel.label} argument '{n}': cannot infer a type from "
                                  f"{type(v).__name__}; use wp.overload(kernel, [...])")
            concrete.append(vt)
    try:
        return kernel.overload(concrete)
    except TypeError as e:
        raise LaunchError(str(e)) from None


def _dims(dim: Any) -> tuple[int, ...]:
    if isinstance(dim, int) and not isinstance(dim, bool):
        dims = (dim,)
    else:
        try:
            dims = tuple(int(d) for d in dim)
        except TypeError:
            raise LaunchValueError(f"launch dim must be an int or a tuple of 1 to 4 ints, got {dim!r}") from None
    if not 1 <= len(dims) <= MAX_DIMS or any(d < 0 for d in dims):
        raise LaunchValueError(f"launch dim must be 1 to 4 non-negative ints, got {dim!r}")
    if any(d >= 2**31 for d in dims):
        raise LaunchValueError(f"each launch dimension must be below 2^31, got {dims}")
    return dims


class Launch:
    """A recorded launch (`wp.launch(..., record_cmd=True)`, or Warp's `wp.Launch(kernel, device)`): its
    parameters and grid can be changed, and `launch()` runs it again, as Warp's `Launch` does. Made
    directly, every parameter starts at its type's zero (an array or a generic parameter at None, to be
    set before launching) and the grid is empty until `set_dim`."""

    def __init__(self, kernel: Kernel, device: Any = None, params: list | None = None,
                 adj_params: list | None = None, dim: Any = 0, max_blocks: int = 0, block_dim: int | None = None,
                 adjoint: bool = False) -> None:
        if not isinstance(kernel, Kernel):
            raise LaunchError(f"wp.Launch expects a @wp.kernel, got {type(kernel).__name__}")
        self.kernel, self.dim = kernel, dim
        self.params = list(params) if params is not None else [_zero_value(t) for t in kernel.arg_types]
        self.adj_params = list(adj_params) if adj_params is not None else (
            [_zero_value(t) for t in kernel.arg_types] if adjoint else [])
        self.device, self.adjoint, self.max_blocks, self.block_dim = get_device(device), adjoint, max_blocks, block_dim

    def _index(self, name: str) -> int:
        names = list(self.kernel.arg_names)
        if name not in names:
            raise LaunchError(f"kernel {self.kernel.label} has no parameter '{name}' (it has {', '.join(names)})")
        return names.index(name)

    def set_dim(self, dim: Any) -> None:
        """The grid of the next `launch()`."""
        _dims(dim)
        self.dim = dim

    def set_param_at_index(self, index: int, value: Any, adjoint: bool = False) -> None:
        """Parameter `index` (or its adjoint) of the next `launch()`."""
        target = self.adj_params if adjoint else self.params
        if not 0 <= index < len(self.params):
            raise IndexError(f"kernel {self.kernel.label} has {len(self.params)} parameters, not {index + 1}")
        _refuse_single_value(self.kernel, self.kernel.arg_names[index], self.kernel.arg_types[index], value)
        while len(target) < len(self.params):
            target.append(None)
        target[index] = value

    def set_param_by_name(self, name: str, value: Any, adjoint: bool = False) -> None:
        self.set_param_at_index(self._index(name), value, adjoint)

    def set_params(self, values: Any) -> None:
        """All parameters, in order."""
        for i, v in enumerate(values):
            self.set_param_at_index(i, v)

    def launch(self, stream: Any = None) -> None:
        """Run the recorded launch with its current parameters and grid."""
        adj = self.adj_params if self.adjoint else ()
        launch(self.kernel, self.dim, inputs=self.params, adj_inputs=adj, device=None if stream else self.device,
               stream=stream, adjoint=self.adjoint, max_blocks=self.max_blocks, block_dim=self.block_dim)


def _refuse_single_value(k: Kernel, name: str, t: Any, v: Any) -> None:
    """A Python or loomwork number for a vector, matrix, quaternion or transform parameter `t` is refused, not
    spread over the components, as Warp refuses it (NumPy scalars and booleans it still spreads, deprecated)."""
    if T.is_composite(t) and isinstance(v, int | float | T.ScalarType) and not isinstance(v, bool | T.bool_):
        raise LaunchError(f"kernel {k.label} argument '{name}' expects {T.type_name(t)} but got a single value "
                          f"({v!r}); pass a {T.type_name(t)}")


def _zero_value(t: Any) -> Any:
    """A parameter's starting value in a Launch made directly: zero of a scalar, vector, matrix or struct."""
    if T.is_scalar(t):
        return t(0)
    if T.is_composite(t):
        return t.from_buffer_copy(bytes(ctypes.sizeof(t)))  # zeros, also for quaternions and transforms
    if T.is_struct_type(t):
        return t()
    return None


def launch(kernel: Kernel, dim: Any, inputs: Any = (), outputs: Any = (), adj_inputs: Any = (),
           adj_outputs: Any = (), device: Any = None, stream: Any = None, adjoint: bool = False,
           record_tape: bool = True, record_cmd: bool = False, max_blocks: int = 0,
           block_dim: int | None = None, *, zero_grads: int = 0) -> Launch | None:
    """Run `kernel` once for every index of the grid `dim` (an int, or a tuple of up to 4 ints).

    `inputs` then `outputs` give the kernel's parameters in order: arrays (ours, NumPy or any
    object with `__array_interface__`), scalars, vectors and matrices. On a GPU, `block_dim` threads make a
    block (256, the default, lets small grids use smaller blocks) and `max_blocks` > 0 caps the blocks, the
    threads then looping over the grid. On the CPU each thread runs on its own, unless
    `wp.config.enable_cpu_blocks` is on and `block_dim` > 1 is given: then a kernel with tiles runs each block's
    threads together, as lanes (native/lanes.h), and its tile operations are the block's (`max_blocks` is
    ignored on the CPU). With `stream`, the launch goes to
    that stream and its device; while the stream is being captured, the packed launch is recorded into
    the graph instead of run (kernels/capture.py). `record_cmd=True` returns a `Launch` to run later
    instead of running now. `zero_grads` (adjoint launches; how `Tape.backward` fuses zeroing into the
    first write): bit k set asks each thread to zero its own gradient element of array parameter k first,
    honoured for the parameters `zeroable` lists in the loaded kernel (ir.zeroable_gradients).
    """
    if not isinstance(kernel, Kernel):
        raise LaunchError(f"wp.launch expects a @wp.kernel, got {type(kernel).__name__}")
    if record_cmd:
        return Launch(kernel, device, [*inputs, *outputs], [*adj_inputs, *adj_outputs], dim, max_blocks, block_dim,
                      adjoint)
    if kernel._generic is not False and kernel.is_generic:
        kernel = _instantiate(kernel, [*inputs, *outputs])
    if dim.__class__ is int and 0 <= dim < 2**31:
        dims = (dim,)
    else:
        dims = _dims(dim)
    lanes = 0
    if block_dim is not None or max_blocks:
        explicit = block_dim is not None
        block_dim, max_blocks = _block_shape(kernel, block_dim if explicit else 256, max_blocks)
        lanes = block_dim if explicit and block_dim > 1 and config.enable_cpu_blocks else 0
    else:
        block_dim = 256
    dev = get_device(device) if stream is None else _stream_device(stream, device)
    if lanes and dev.backend.cpu_blocks is not None:
        lm = kernel.module.load(dev, _cpu_lanes(kernel, dev, lanes))
    else:
        lm = kernel.module.load(dev)
    lk = lm.kernels.get(kernel.key) or lm.kernel(kernel.key)
    plan = lk.plan or _make_plan(lk, dev)
    params = [*inputs, *outputs]
    if len(params) != len(plan.names):
        sig = ", ".join(f"{n}: {T.type_name(t)}" for n, t in zip(plan.names, plan.types, strict=True))
        raise LaunchError(f"kernel {kernel.label} takes {len(plan.names)} argument(s) ({sig}), "
                          f"got {len(params)}")
    if lk.tid_count > 1 and len(dims) != lk.tid_count and not (len(dims) == lk.tid_count + 1 and
                                                               (dims[-1] == 1 or lk.lanes)):
        raise LaunchValueError(f"kernel {kernel.label} unpacks wp.tid() into {lk.tid_count} indices but was "
                               f"launched with dim={dims}")
    hooks = config.launch_hooks
    if hooks and config.print_launches:
        args = ", ".join(f"{n}={_brief(v)}" for n, v in zip(plan.names, params, strict=True))
        log_info(f"launch{' (adjoint)' if adjoint else ''}: kernel {kernel.label} dim={dims} device={dev} {args}")
    if adjoint:
        _launch_adjoint(kernel, lm, dev, stream, plan, dims, params, [*adj_inputs, *adj_outputs], zero_grads,
                        block_dim, max_blocks)
        return
    check_fp = hooks and config.verify_fp and capturing_graph(dev, stream) is None  # a capture runs it later
    if check_fp:
        _verify_fp(kernel, plan, params, lk.reads, "before")
    saved = None
    if registry.recording and record_tape and registry.local.recorders:
        _check_differentiable(kernel, plan, params)
        if lk.has_backward and lk.in_place is not None:
            for tape in registry.local.recorders:
                tape.before_launch(kernel, lk, params)
            # arrays it reads, then updates: its adjoint replays from their values before the launch
            saved = {i: snapshot(params[i], stream) for i in lk.in_place.restorable} or None
    if len(dims) == 1:
        size = dims[0]
    else:
        size = 1
        for d in dims:
            size *= d
    if lm.debug:
        slot = dev.backend.fault_slot()
        header = lk.header(size, dims, slot.address, 0, block_dim, max_blocks)
    else:
        header = lk.header(size, dims, 0, 0, block_dim, max_blocks)
    # pins: temporaries the block points into; foreign arrays' streams are waited for on the launch's stream
    blob, pins = _packed(plan, kernel, header, params) if stream is None else \
        run_on(stream, _packed, (plan, kernel, header, params))
    fault = None
    if size:
        if streams.intercept:  # a graph capture or activity timing is on
            _submit(kernel, lm, lk.launch, dev, stream, blob, params, pins, slot if lm.debug else None,
                    [(params[i], kernel.key) for i in lk.writes], "forward")
        elif stream is None:
            lk.launch(blob)
            if lm.debug:
                fault = slot.take()
        else:
            fault = run_on(stream, _launched, (lk.launch, blob, slot if lm.debug else None))
    if registry.recording and record_tape and fault is None:  # a launch that faulted did not run as written
        for tape in registry.local.recorders:
            tape.record_launch(kernel, lk, dims, params, dev, saved)
    for i in lk.writes:
        v = params[i]
        if v.__class__ is array or v.__class__ is indexedarray:
            v._storage.bump(kernel.key)
    if fault is not None:
        raise _fault_error(kernel, lm, fault, "")
    if check_fp:
        _verify_fp(kernel, plan, params, lk.writes, "after")


def _brief(v: Any) -> str:
    """An argument as print_launches shows it: arrays by shape and type, not by content."""
    if isinstance(v, array | indexedarray) or not hasattr(v, "shape"):
        return repr(v)
    return f"{type(v).__name__}(shape={tuple(v.shape)})"


def _verify_fp(kernel: Kernel, plan: LaunchPlan, params: list, which: frozenset, when: str) -> None:
    """wp.config.verify_fp: every float in the arrays `which` (positions) must be finite (device memory is
    read back, waiting for the launch); arrays of structs are not checked."""
    for i in sorted(which):
        t, v = plan.types[i], params[i]
        if not (isinstance(t, ArrayType) and _float_valued(t.dtype)) or v is None:
            continue
        if isinstance(v, array | indexedarray):
            values = v.numpy()
        else:
            values = np.asarray(v)
        if not np.isfinite(values).all():
            raise KernelRuntimeError(f"kernel {kernel.label}: array '{plan.names[i]}' holds a NaN or an infinity "
                                     f"{when} the launch (wp.config.verify_fp is on)")


def _float_valued(t: Any) -> bool:
    return T.is_float(t) or T.is_composite(t) and t._wp_scalar_type_.is_float


def _lane_free(kernel: Kernel, dev: Device, grid_ndim: int) -> bool:
    """Whether a tiled launch of `kernel` on a grid of `grid_ndim` dimensions does the same in every lane of a
    block, so that one lane per block (the default build's fast path) gives the same result."""
    if kernel.is_generic:
        return False
    lm = kernel.module.load(dev)
    lk = lm.kernels.get(kernel.key) or lm.kernel(kernel.key)
    return lk.lane_free and lk.tid_count <= grid_ndim  # wp.tid() gives no lane index


def _cpu_lanes(kernel: Kernel, dev: Device, lanes: int) -> int:
    """The lanes of a CPU block (wp.config.enable_cpu_blocks), where this machine can run them together."""
    if not dev.backend.cpu_blocks:
        raise LaunchError(f"kernel {kernel.label}: wp.config.enable_cpu_blocks runs a block's lanes together only "
                          f"on x86-64 Linux, not on {platform.system()} {platform.machine()}; launch with block_dim=1 "
                          "or leave it off")
    return lanes


def _block_shape(kernel: Kernel, block_dim: Any, max_blocks: Any) -> tuple[int, int]:
    """`wp.launch`'s block size (1 to 1024) and block cap (zero or negative: none), checked."""
    if not isinstance(block_dim, int | np.integer) or not 1 <= block_dim <= 1024:
        raise LaunchValueError(f"kernel {kernel.label}: block_dim must be an int from 1 to 1024, got {block_dim!r}")
    if not isinstance(max_blocks, int | np.integer):
        raise LaunchValueError(f"kernel {kernel.label}: max_blocks must be an int, got {max_blocks!r}")
    return int(block_dim), max(int(max_blocks), 0)


def _packed(plan: LaunchPlan, kernel: Kernel, header: tuple, params: list) -> tuple[bytes, Any]:
    """The packed block of a launch and the temporaries it points into."""
    try:
        return plan.pack(header, params), ()
    except (struct.error, OverflowError, TypeError):
        return plan.pack_checked(kernel, header, params)


def _launched(launch_fn: Any, blob: bytes, slot: Any) -> Any:
    """Run a packed launch; with a debug fault slot, the fault it recorded (read on the same stream)."""
    launch_fn(blob)
    return slot.take() if slot is not None else None


def _stream_device(stream: Any, device: Any) -> Device:
    """The device of a launch on `stream` (`device`, when given too, must be the stream's)."""
    if not isinstance(stream, Stream):
        raise LaunchError(f"wp.launch: stream must be a wp.Stream, got {type(stream).__name__}")
    if device is not None and get_device(device) != stream.device:
        raise DeviceError(f"wp.launch: device {get_device(device)} is not the device of the stream ({stream.device})")
    return stream.device


def _submit(kernel: Kernel, lm: LoadedModule, launch_fn: Any, dev: Device, stream: Any, blob: bytes, params: list,
            pins: Any, slot: Any, written: list, direction: str) -> None:
    """A launch while a graph capture or activity timing is on: handed to `stream.submit` with what it
    writes (for the capture's bookkeeping: (array or gradient, writer) pairs) and what its packed block
    points into (kept alive as long as a graph that recorded it). A debug-mode launch checks its fault
    slot right after it runs, whenever that is."""
    writes = [(a._storage, w) for a, w in written if a.__class__ is array or a.__class__ is indexedarray]
    fn = launch_fn if slot is None else _checked(kernel, lm, launch_fn, slot, "" if direction == "forward"
                                                 else " (in its adjoint)")
    submit(dev, stream, fn, (blob,), writes, f"{direction} kernel {kernel.key}", TIMING_KERNEL, (lm, params, pins))


def _checked(kernel: Kernel, lm: LoadedModule, launch_fn: Any, slot: Any, where: str) -> Any:
    """`launch_fn` followed by a look at the debug-mode fault slot its launches report to."""
    def run(blob: bytes) -> None:
        launch_fn(blob)
        fault = slot.take()
        if fault is not None:
            raise _fault_error(kernel, lm, fault, where)
    return run


def _launch_adjoint(kernel: Kernel, lm: LoadedModule, dev: Device, stream: Any, plan: LaunchPlan, dims: tuple,
                    params: list, adj_params: list, zero_grads: int = 0, block_dim: int = 0,
                    max_blocks: int = 0) -> None:
    """Run a kernel's adjoint: array gradients come from `adj_params` (or, when it is empty, from each
    array's own `.grad`); scalar adjoints are not returned, as in Warp."""
    adjoint = lm.adjoint(kernel.key)
    if adjoint is None:
        raise LaunchError(f"kernel {kernel.label} was built without its backward pass "
                          "(enable_backward=False); it cannot be launched with adjoint=True")
    if adj_params and len(adj_params) != len(params):
        raise LaunchError(f"kernel {kernel.label}: adj_inputs + adj_outputs must match inputs + outputs "
                          f"one for one ({len(params)} arguments), got {len(adj_params)}")
    values, pins = plan.convert(params)  # pins: alive until the launch is done
    staged: list[tuple[array, Any]] = []  # (stand-in, the caller's adjoint to write back into, or None)
    if adj_params:
        for i, t in enumerate(plan.types):
            if isinstance(t, ArrayType):
                values[i] = _with_grad(kernel, plan.names[i], t, values[i], adj_params[i], staged)
        if staged and streams.intercept:
            raise LaunchError(f"kernel {kernel.label}: an adjoint laid out otherwise than its array cannot "
                              "go into a graph capture; pass adjoints with their arrays' strides")
        pins = (pins, staged)
    size = 1
    for d in dims:
        size *= d
    slot = dev.backend.fault_slot() if lm.debug else None
    header = adjoint.header(size, dims, slot.address if slot else 0, zero_grads, block_dim, max_blocks)
    try:
        blob = plan.struct.pack(*header, *values)
    except (struct.error, OverflowError) as e:
        raise _pack_error(kernel, plan, values, e) from None
    if not size:
        return
    if streams.intercept:
        grads = adj_params or [getattr(p, "grad", None) for p in params]
        written = [(g, f"the adjoint of {kernel.key}") for t, g in zip(plan.types, grads, strict=True)
                   if isinstance(t, ArrayType) and g is not None]
        _submit(kernel, lm, adjoint.launch, dev, stream, blob, [*params, *adj_params], pins, slot, written, "backward")
        return
    if stream is None:
        adjoint.launch(blob)
        fault = slot.take() if slot else None
    else:
        fault = run_on(stream, _launched, (adjoint.launch, blob, slot))
    if fault is not None:
        raise _fault_error(kernel, lm, fault, " (in its adjoint)")
    for stand_in, target in staged:
        if target is not None:
            np.copyto(target, stand_in.numpy())


def _with_grad(kernel: Kernel, name: str, t: ArrayType, desc: bytes, adj: Any, staged: list) -> bytes:
    """The array descriptor `desc` with its gradient pointer taken from `adj` (None: the array's own `.grad`,
    as in Warp), an array of ours or another framework's, of the array's shape and memory the caller sees
    (the adjoint accumulates into it). The gradient shares the array's strides in the kernel: one laid out
    otherwise on the CPU (a broadcast `ones.expand(n)` from torch's backward, a strided view) is copied into a
    stand-in appended to `staged`, and copied back after the launch unless its elements overlap (a broadcast
    is only read)."""
    if adj is None:
        return desc
    if isinstance(adj, array):
        ptr, shape, strides, readonly, copied = adj.ptr or 0, adj.shape, adj.strides, adj.readonly, False
        where = adj.device
    else:
        what = f"kernel {kernel.label}: the adjoint of '{name}'"
        try:
            buf = foreign.describe(adj)
            shape, strides = foreign.fit(buf, t.dtype, what)
        except (TypeError, ValueError, BufferError) as e:
            raise LaunchError(str(e) if what in str(e) else f"{what}: {e}") from None
        ptr, readonly, copied, where = buf.ptr, buf.readonly, buf.copied, buf.device
    fields = DESC.unpack_from(desc)  # an indexedarray's descriptor starts with its data's
    expect_shape, expect_strides = fields[2:2 + t.ndim], fields[6:6 + t.ndim]
    if tuple(shape) == expect_shape and tuple(strides) != expect_strides:
        ptr = _stand_in(t, adj, where, expect_shape, expect_strides, staged, readonly or copied)
        if ptr is not None:  # a caller's buffer: kept, as below
            return desc[:8] + struct.pack("<Q", ptr | RETAIN_GRAD_BIT) + desc[16:]
    if tuple(shape) != expect_shape or tuple(strides) != expect_strides:
        raise LaunchValueError(f"kernel {kernel.label}: the adjoint of '{name}' must match the array's shape "
                               f"{expect_shape} and strides {expect_strides}, got {shape} and {strides}")
    if readonly or copied:
        raise LaunchError(f"kernel {kernel.label}: the adjoint of '{name}' is {'read-only' if readonly else 'a copy'}, "
                          "but the adjoint launch accumulates into it")
    own = fields[1]
    if ptr and ptr != own & ~RETAIN_GRAD_BIT:  # the caller's buffer: stores' adjoints leave it as it is, as in Warp
        ptr |= RETAIN_GRAD_BIT
    elif ptr:
        ptr = own
    return desc[:8] + struct.pack("<Q", ptr) + desc[16:]


def _stand_in(t: ArrayType, adj: Any, device: Device, shape: tuple, strides: tuple, staged: list,
              read_only: bool) -> int | None:
    """The pointer of a copy of `adj` (on `device`) laid out as the array (`shape`, byte `strides`, which must
    be dense), or None where none can be made (memory the host cannot read, a layout with gaps): the caller
    then refuses."""
    if not device.backend.host_accessible:
        return None
    if strides != foreign.contiguous_strides(shape, T.type_size(t.dtype)):
        return None
    view = adj.numpy() if isinstance(adj, array) else np.asarray(adj)
    if view.shape != (*shape, *getattr(t.dtype, "_shape_", ())):
        return None
    stand_in = array(np.ascontiguousarray(view), dtype=t.dtype)
    overlaps = any(s == 0 for s, n in zip(view.strides, view.shape, strict=True) if n > 1)
    staged.append((stand_in, None if overlaps or read_only or not view.flags.writeable else view))
    return stand_in.ptr


def _make_plan(lk: LoadedKernel, device: Device) -> LaunchPlan:
    lk.plan = LaunchPlan(lk, device)
    return lk.plan


def _check_differentiable(kernel: Kernel, plan: LaunchPlan, params: list) -> None:
    """A launch a Tape records: a foreign array that needs a gradient (a tensor with requires_grad) has no
    gradient buffer here, so its gradient would be lost; `from_torch` gives the array one."""
    for n, t, v in zip(plan.names, plan.types, params, strict=True):
        if isinstance(t, ArrayType) and not isinstance(v, array | indexedarray) and \
                getattr(v, "requires_grad", False) is True:
            raise LaunchError(f"kernel {kernel.label} argument '{n}': a {type(v).__name__} that requires grad was "
                              "passed directly to a launch a wp.Tape records, where it has no gradient buffer; pass "
                              f"wp.from_torch({n}) (which shares its .grad) instead")


def _pack_error(k: Kernel, plan: LaunchPlan, values: list, e: Exception) -> Exception:
    for n, t, v in zip(plan.names, plan.types, values, strict=True):
        if T.is_scalar(t):
            try:
                struct.pack("<" + _SCALAR_CODES[t], v)
            except struct.error:
                return LaunchValueError(f"kernel {k.label} argument '{n}': {v!r} does not fit in {T.type_name(t)}")
    return LaunchValueError(f"kernel {k.label}: cannot pack arguments ({e})")


def _fault_error(k: Kernel, lm: LoadedModule, fault: ErrorRecord, where: str) -> KernelRuntimeError:
    """The exception for the first fault a debug-mode launch of `k` reported."""
    site = lm.sites[fault.site] if 0 <= fault.site < len(lm.sites) else ("?", "?", "?", 0)
    owner, text, filename, line = site
    return KernelRuntimeError(
        f"kernel {k.label}{where}: index {fault.index} is out of bounds for an extent of {fault.extent} in "
        f"`{text}` (in '{owner}' at {filename}:{line})"
    )


def launch_tiled(kernel: Kernel, dim: Any, inputs: Any = (), outputs: Any = (), adj_inputs: Any = (),
                 adj_outputs: Any = (), device: Any = None, stream: Any = None, adjoint: bool = False,
                 record_tape: bool = True, record_cmd: bool = False, max_blocks: int = 0, *,
                 block_dim: int | None = None) -> Launch | None:
    """Launch `kernel` over a grid of blocks: `dim` (up to 3 dimensions) with a trailing block dimension
    appended, as Warp does; `wp.tid()` gives the block's index (`i, j = wp.tid()` for a 2-D grid, and
    `i, lane = wp.tid()` the lane too).

    On the CPU each block runs as one task whose tile operations are vectorized loops over the tile's
    elements: `block_dim` is the lane count Warp would give the block on a GPU, and the trailing dimension
    (and `wp.block_dim()`) is 1, as in Warp's CPU backend. With `wp.config.enable_cpu_blocks`, a `block_dim`
    > 1 is honoured: the trailing dimension is `block_dim` and the block's lanes run together (see launch),
    except for a kernel that does the same in every lane (codegen.lane_free), which keeps one lane a block."""
    dims = _dims(dim)
    if len(dims) > 3:
        raise LaunchValueError(f"wp.launch_tiled() takes a grid of up to 3 dimensions, got {dims}")
    if block_dim is not None and not isinstance(block_dim, int):
        raise LaunchValueError(f"wp.launch_tiled(): block_dim must be an int, got {block_dim!r}")
    if block_dim is not None and block_dim > 1024:
        raise LaunchValueError(f"wp.launch_tiled(): block_dim must be at most 1024, got {block_dim}")
    lanes = None
    if block_dim is not None and block_dim > 1 and config.enable_cpu_blocks:
        dev = get_device(device) if stream is None else _stream_device(stream, device)
        lanes = block_dim if dev.backend.cpu_blocks is not None and not _lane_free(kernel, dev, len(dims)) else None
    return launch(kernel, (*dims, lanes or 1), inputs, outputs, adj_inputs, adj_outputs, device, stream, adjoint,
                  record_tape, record_cmd, max_blocks, lanes)  # without lanes, each thread runs a whole block


def synchronize() -> None:
    """Wait for all outstanding work on every device (CPU launches complete before `launch` returns)."""
    for dev in get_devices():
        dev.backend.synchronize()


def synchronize_device(device: Any = None) -> None:
    """Wait for the work queued on one device (default: the current one)."""
    get_device(device).backend.synchronize()
