"""Extension points the upper layers fill in when they are imported (the kernel layer never imports them).

This is the runtime registry design.md allows: `adjoint_source` generates the reverse-mode part of a
module's source (set by loomwork.autodiff), and `recorders` is the stack of active tapes that
`wp.launch` reports to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Registry:
    def __init__(self) -> None:
        self.adjoint_source: Callable[[list, list, bool, dict], str] | None = None
        self.recorders: list[Any] = []


registry = Registry()
