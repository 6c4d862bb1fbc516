"""DLPack exchange as public functions: `wp.from_dlpack` and `wp.to_dlpack` (the capsule level is dlpack.py)."""

from __future__ import annotations

from typing import Any

from . import foreign
from . import types as T
from .array import array, over_buffer


def from_dlpack(source: Any, dtype: Any = None) -> array:
    """A zero-copy array over a DLPack producer's memory: an object with `__dlpack__` (a PyTorch tensor, a
    JAX or NumPy array...), asked to order its work before our current stream on its device, or a raw DLPack
    capsule (consumed: a capsule is imported once). `dtype` may be a vector or matrix type, made of the
    trailing dimensions; by default the producer's scalar type. The array keeps the producer's memory
    alive and is read-only when the producer says so."""
    buf = foreign.read_dlpack(source, None)
    if dtype is None:
        return over_buffer(buf, buf.scalar, "wp.from_dlpack")
    want = T.elem_scalar(T.normalize_dtype(dtype))
    if want is not buf.scalar and reinterpretable(buf.scalar, want):
        buf = foreign.Buffer((*buf[:3], want, *buf[4:]))  # the same bits read as the other integer type
    elif want is not buf.scalar and not (want is T.bfloat16 and buf.bf16_bits and buf.scalar is T.uint16):
        have = "bool8" if buf.scalar is T.bool_ else T.type_name(buf.scalar)  # DLPack's name, as Warp words it
        raise foreign.DLPackError(f"wp.from_dlpack: Incompatible data types: DLPack {have} and Warp "
                                  f"{T.type_name(dtype)} (integers may be read as the other signedness of their "
                                  "size, bool as int8/uint8; convert anything else first)")
    return over_buffer(buf, dtype, "wp.from_dlpack")


def reinterpretable(have: Any, want: Any) -> bool:
    """Whether DLPack data of scalar type `have` may be viewed as `want` without a copy, as Warp allows:
    integers as the other signedness of their size, and bools as 8-bit integers."""
    if have is T.bool_:
        return want in (T.int8, T.uint8)
    return T.is_int(have) and T.is_int(want) and have.size == want.size


def to_dlpack(a: array) -> Any:
    """A DLPack capsule ("dltensor", the form every consumer reads) viewing `a`'s memory, without stream
    synchronization; the capsule keeps `a` alive until its consumer is done with it."""
    if not isinstance(a, array):
        raise TypeError(f"wp.to_dlpack takes a wp.array, got {type(a).__name__}")
    return a._capsule(versioned=False)
