"""Tile FFTs: `wp.tile_fft(t)` and `wp.tile_ifft(t)` transform a tile of vec2f/vec2d (complex re, im)
values in place along its last axis (every leading index is one batch row), unnormalized in both directions
as in Warp; their adjoints are the transforms of the other direction (native/tiles_fft.h)."""

from __future__ import annotations

import ast
from typing import Any

from . import builtins as B
from . import types as T
from .errors import KernelTypeError, KernelValueError
from .frontend import Builder, call_form
from .tiles import _adj, _bind, _tile_arg, emit, write


@call_form("tile_fft", "tile_ifft")
def tile_fft(bld: Builder, node: ast.Call, obj: Any) -> None:
    name = obj.name
    a = _bind(bld, node, name, ("inout",), 1)
    t = _tile_arg(bld, a["inout"], name)
    complex_types = (T.vector(2, T.float32), T.vector(2, T.float64))
    if t.type.dtype not in complex_types:
        bld.error(node, KernelTypeError, f"wp.{name}() takes a tile of vec2f or vec2d (complex) values, got "
                  f"{t.type}")
    if t.type.ndim < 2:
        bld.error(node, KernelValueError, f"wp.{name}() takes a tile of at least 2 dimensions (batch rows, then the "
                  f"transformed axis), got {t.type.ndim}-D")
    sign = -1 if name == "tile_fft" else 1
    r = emit(bld, name, f"lw::tile_fft_rows<{sign}>", [t], t.type,
             adjoint=_adj(t.type.dtype, f"lw::adj_tile_fft_rows<{sign}>"))
    write(bld, a["inout"], r, node)


BUILTIN_DOCS = {
    "tile_fft": "tile_fft(inout): the forward FFT of each row (last axis) of a tile of vec2 complex values, in "
                "place",
    "tile_ifft": "tile_ifft(inout): the inverse FFT (unnormalized) of each row of a tile of vec2 complex values, "
                 "in place",
}
for _name, _doc in BUILTIN_DOCS.items():
    B.BUILTINS[_name] = B.Builtin(_name, "Tile Primitives", _doc)
