"""Where loomwork's messages go, with Warp's names: levels `LOG_*`, a pluggable logger, scoped overrides.

A logger is any object with `debug(message)`, `info(message)`, `warning(message, category=None,
stacklevel=1)` and `error(message)` (Warp's protocol). The default one writes debug and info lines to
standard output (the `ScopedTimer` report is one) and errors to standard error, and routes warnings
through Python's `warnings`. A standard `logging.Logger` is accepted too: `set_logger` adapts it.
`wp.config.log_level` is the threshold for debug, info and warning messages.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Protocol, runtime_checkable

from . import config
from .config import LOG_DEBUG, LOG_ERROR, LOG_INFO, LOG_WARNING  # noqa: F401 (Warp's names, exported from here)


@runtime_checkable
class Logger(Protocol):
    """What `set_logger` takes (Warp's protocol)."""

    def debug(self, message: str) -> None: ...

    def info(self, message: str) -> None: ...

    def warning(self, message: str, category: Any = None, stacklevel: int = 1) -> None: ...

    def error(self, message: str) -> None: ...


class _DefaultLogger:
    """Debug and info to stdout, warnings through `warnings.warn`, errors to stderr."""

    def debug(self, message: str) -> None:
        sys.stdout.write(message + "\n")

    def info(self, message: str) -> None:
        sys.stdout.write(message + "\n")

    def warning(self, message: str, category: Any = None, stacklevel: int = 1) -> None:
        warnings.warn(message, category or UserWarning, stacklevel=stacklevel + 1)

    def error(self, message: str) -> None:
        sys.stderr.write(f"loomwork error: {message}\n")


class _PythonLogging:
    """A `logging.Logger` seen through the protocol (its `warning` takes no category)."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def debug(self, message: str) -> None:
        self.logger.debug(message)

    def info(self, message: str) -> None:
        self.logger.info(message)

    def warning(self, message: str, category: Any = None, stacklevel: int = 1) -> None:
        self.logger.warning(message, stacklevel=stacklevel + 1)

    def error(self, message: str) -> None:
        self.logger.error(message)


class _State:
    def __init__(self) -> None:
        self.logger: Any = _DefaultLogger()


_state = _State()


def _checked(logger: Any) -> Any:
    logging = sys.modules.get("logging")  # a logging.Logger means the module is loaded: no import needed
    if logging is not None and isinstance(logger, logging.Logger):
        return _PythonLogging(logger)
    if not all(callable(getattr(logger, m, None)) for m in ("debug", "info", "warning", "error")):
        raise TypeError("a logger needs debug(message), info(message), warning(message, category, stacklevel) "
                        f"and error(message) methods (or pass a logging.Logger), got {type(logger).__name__}")
    return logger


def set_logger(logger: Any) -> None:
    """Send loomwork's messages to `logger` (None: back to the default, stdout and stderr)."""
    _state.logger = _DefaultLogger() if logger is None else _checked(logger)


def get_logger() -> Any:
    """The logger in use."""
    return _state.logger


def log_level() -> int:
    """The threshold below which messages are dropped (`wp.config.log_level`)."""
    return config.log_level


def log_debug(message: str) -> None:
    if log_level() <= LOG_DEBUG:
        _state.logger.debug(message)


def log_info(message: str) -> None:
    if log_level() <= LOG_INFO:
        _state.logger.info(message)


class ScopedLogger:
    """`with wp.ScopedLogger(logger):` sends messages to `logger` inside the block (None: the default)."""

    def __init__(self, logger: Any) -> None:
        self.logger = None if logger is None else _checked(logger)

    def __enter__(self) -> ScopedLogger:
        self._saved = _state.logger
        _state.logger = self.logger if self.logger is not None else _DefaultLogger()
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.logger = self._saved


class ScopedLogLevel:
    """`with wp.ScopedLogLevel(wp.LOG_WARNING):` sets `wp.config.log_level` inside the block."""

    def __init__(self, log_level: int) -> None:
        self.log_level = log_level

    def __enter__(self) -> ScopedLogLevel:
        self._saved = log_level()
        config.log_level = self.log_level
        return self

    def __exit__(self, *exc: Any) -> None:
        config.log_level = self._saved
