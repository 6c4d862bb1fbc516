"""DLPack exchange as public functions: `wp.from_dlpack` and `wp.to_dlpack` (the capsule level is dlpack.py)."""

from __future__ import annotations

from typing import Any

from . import foreign
from .array import array, over_buffer


def from_dlpack(source: Any, dtype: Any = None) -> array:
    """A zero-copy array over a DLPack producer's memory: an object with `__dlpack__` (a PyTorch tensor, a
    JAX or NumPy array...), asked to order its work before our current stream on its device, or a raw DLPack
    capsule (consumed: a capsule is imported once). `dtype` may be a vector or matrix type, made of the
    trailing dimensions; by default the producer's scalar type. The array keeps the producer's memory
    alive and is read-only when the producer says so."""
    buf = foreign.read_dlpack(source, None)
    return over_buffer(buf, dtype if dtype is not None else buf.scalar, "wp.from_dlpack")


def to_dlpack(a: array) -> Any:
    """A DLPack capsule ("dltensor", the form every consumer reads) viewing `a`'s memory, without stream
    synchronization; the capsule keeps `a` alive until its consumer is done with it."""
    if not isinstance(a, array):
        raise TypeError(f"wp.to_dlpack takes a wp.array, got {type(a).__name__}")
    return a._capsule(versioned=False)
