"""The exception hierarchy. Each class also subclasses Python's own, so `except TypeError` works."""

from __future__ import annotations


class LoomworkError(Exception):
    """Base of every error loomwork raises."""


class KernelError(LoomworkError, RuntimeError):
    """An error in a kernel or function's source, raised while it is compiled (a RuntimeError, as Warp's
    WarpCodegenError; each subclass is also the Python error of its kind)."""


class KernelSyntaxError(KernelError, SyntaxError):
    """A Python construct the kernel language does not support."""

    def __init__(self, *args: object) -> None:
        SyntaxError.__init__(self, *args)  # sets .msg, which tracebacks show (RuntimeError's init would not)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class KernelTypeError(KernelError, TypeError):
    """Operands or arguments of the wrong type inside a kernel."""


class KernelNameError(KernelError, NameError, KeyError):
    """A name a kernel reads that is neither a local, an argument nor a known global (a KeyError too, which
    is what Warp raises for it)."""

    def __str__(self) -> str:  # KeyError's own __str__ would quote the whole message
        return str(self.args[0]) if self.args else ""


class KernelAttributeError(KernelError, AttributeError):
    """An attribute that a type (or module) in a kernel does not have."""


class KernelValueError(KernelError, ValueError):
    """A value a kernel's source gives that is of the right type but not allowed (a slice bound, a count)."""


class KernelIndexError(KernelError, IndexError):
    """A constant index out of a vector's or matrix's range."""


class CompileError(LoomworkError, RuntimeError):
    """The native compiler rejected generated code, or none was found."""


class CacheError(LoomworkError, OSError):
    """The kernel cache cannot be used: a folder or file there that another user could have written
    (its code would run in this process), or a folder that cannot be created."""


class LaunchError(LoomworkError, TypeError, RuntimeError):
    """A launch with the wrong number or types of arguments (a RuntimeError too, which is what Warp raises
    for these, so `except RuntimeError` in a Warp program still catches it)."""


class LaunchValueError(LoomworkError, ValueError):
    """A launch with well-typed but unusable values (bad dimensions, shapes)."""


class KernelRuntimeError(LoomworkError, IndexError):
    """A fault detected while a kernel ran (debug mode: an out-of-bounds array index)."""


class DeviceError(LoomworkError, RuntimeError):
    """A device that does not exist or cannot be used here, or data on the wrong device."""


class KernelKeyError(KernelError, KeyError):
    """A key a kernel looks up that is not there (a struct field or a mapping entry missing at compile time)."""

    def __str__(self) -> str:  # KeyError's own __str__ would quote the whole message
        return str(self.args[0]) if self.args else ""


class CaptureError(LoomworkError, RuntimeError):
    """A graph capture used in a way that cannot be recorded or replayed faithfully (nested captures, a
    graph launched inside its own capture, Python reading an array the capture has yet to write)."""


# Warp's names for the errors above, so `except wp.WarpCodegenTypeError` catches what loomwork raises; the
# hierarchy is Warp's (each is a WarpCodegenError and the Python error of its kind).
WarpCodegenError = KernelError
WarpCodegenTypeError = KernelTypeError
WarpCodegenValueError = KernelValueError
WarpCodegenAttributeError = KernelAttributeError
WarpCodegenIndexError = KernelIndexError
WarpCodegenKeyError = KernelKeyError


class ShapeError(LoomworkError, ValueError, RuntimeError):
    """An array shape that cannot be used (a negative extent, a reshape to another size): a ValueError, and a
    RuntimeError where Warp raises one."""


class CopyError(LoomworkError, ValueError, TypeError, RuntimeError):
    """Arguments `wp.copy` cannot use (offsets or a count out of range, element sizes or shapes that differ):
    a ValueError or TypeError, and a RuntimeError where Warp raises one."""


class OverloadError(LoomworkError, TypeError, RuntimeError):
    """A builtin called from Python with arguments none of its overloads takes: a TypeError, and the
    RuntimeError Warp raises for it."""


def no_overload(name: str, args: tuple) -> OverloadError:
    """The error for `name(*args)` in Python scope when no overload takes those argument types."""
    kinds = ", ".join(type(a).__name__ for a in args)
    return OverloadError(f"Couldn't find a function '{name}' compatible with the arguments '{kinds}'")
