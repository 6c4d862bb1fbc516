"""Runtime helpers Warp programs call: `init`, cache clearing, and the memory-pool and peer-access queries.

loomwork initializes itself on first use, so `init()` only applies `wp.config.track_memory` (it is
idempotent, as Warp's). No loomwork device allocates from a memory pool or maps another device's memory:
the queries answer False, turning a pool or peer access off is a no-op, and asking to turn one on, or for
a pool's threshold or usage, raises a ValueError naming why (as Warp does for its CPU device).
"""

from __future__ import annotations

from typing import Any

from . import cache, config
from .device import get_device
from .memory import tracker


class _State:
    def __init__(self) -> None:
        self.initialized = False


_state = _State()


def init() -> None:
    """Warp's runtime initialization (loomwork starts on first use); with `wp.config.track_memory` set,
    it turns allocation tracking on for the rest of the process. Calling it again does nothing."""
    if _state.initialized:
        return
    _state.initialized = True
    if config.track_memory:
        tracker.enabled += 1


def clear_kernel_cache() -> None:
    """Delete the compiled modules in `wp.config.kernel_cache_dir` (see `cache.clear`): modules this
    process already loaded keep running; anything built again is compiled anew."""
    cache.clear(config.kernel_cache_dir)


def clear_lto_cache() -> None:
    """Warp's cache of link-time-optimized CUDA code; loomwork keeps none, so there is nothing to delete."""


def _devices(*devices: Any) -> None:
    """Check that each argument names a device (raises DeviceError otherwise)."""
    for d in devices:
        get_device(d)


def _no_pools(device: Any, what: str) -> ValueError:
    return ValueError(f"{what}: {get_device(device)} has no memory pool (no loomwork device allocates from one)")


def _no_pool(device: Any = None) -> bool:
    """False: no loomwork device allocates from a memory pool (the device is checked to exist)."""
    get_device(device)
    return False


is_mempool_supported = is_mempool_enabled = _no_pool


def set_mempool_enabled(device: Any, enable: bool) -> None:
    """Turn pool allocation on or off: off is what every loomwork device does; on raises."""
    if enable:
        raise _no_pools(device, "set_mempool_enabled")
    get_device(device)


def set_mempool_release_threshold(device: Any, threshold: int | float) -> None:
    raise _no_pools(device, "set_mempool_release_threshold")


def get_mempool_release_threshold(device: Any = None) -> int:
    raise _no_pools(device, "get_mempool_release_threshold")


def get_mempool_used_mem_current(device: Any = None) -> int:
    raise _no_pools(device, "get_mempool_used_mem_current")


def get_mempool_used_mem_high(device: Any = None) -> int:
    raise _no_pools(device, "get_mempool_used_mem_high")


def _no_access(target_device: Any, peer_device: Any) -> bool:
    """False: no loomwork device maps another's memory or pool (the devices are checked to exist)."""
    _devices(target_device, peer_device)
    return False


is_mempool_access_supported = is_mempool_access_enabled = _no_access
is_peer_access_supported = is_peer_access_enabled = _no_access


def set_mempool_access_enabled(target_device: Any, peer_device: Any, enable: bool) -> None:
    if enable:
        raise _no_pools(target_device, "set_mempool_access_enabled")
    get_device(peer_device)


def set_peer_access_enabled(target_device: Any, peer_device: Any, enable: bool) -> None:
    if enable:
        raise ValueError(f"set_peer_access_enabled: {get_device(peer_device)} cannot map the memory of "
                         f"{get_device(target_device)} (peer access is between CUDA devices)")
    _devices(target_device, peer_device)


class ScopedMempool:
    """`with wp.ScopedMempool(device, enable):` pool allocation on or off inside the block."""

    def __init__(self, device: Any, enable: bool) -> None:
        self.device, self.enable = get_device(device), enable

    def __enter__(self) -> ScopedMempool:
        self._saved = is_mempool_enabled(self.device)
        set_mempool_enabled(self.device, self.enable)
        return self

    def __exit__(self, *exc: Any) -> None:
        set_mempool_enabled(self.device, self._saved)


class _ScopedAccess:
    """Access of `peer_device` to `target_device` switched on or off inside a block, restored after."""

    _is_enabled: Any
    _set_enabled: Any

    def __init__(self, target_device: Any, peer_device: Any, enable: bool) -> None:
        self.target_device, self.peer_device, self.enable = target_device, peer_device, enable

    def __enter__(self) -> _ScopedAccess:
        self._saved = self._is_enabled(self.target_device, self.peer_device)
        self._set_enabled(self.target_device, self.peer_device, self.enable)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._set_enabled(self.target_device, self.peer_device, self._saved)


class ScopedMempoolAccess(_ScopedAccess):
    """`with wp.ScopedMempoolAccess(target, peer, enable):` pool access on or off inside the block."""

    _is_enabled = staticmethod(is_mempool_access_enabled)
    _set_enabled = staticmethod(set_mempool_access_enabled)


class ScopedPeerAccess(_ScopedAccess):
    """`with wp.ScopedPeerAccess(target, peer, enable):` peer access on or off inside the block."""

    _is_enabled = staticmethod(is_peer_access_enabled)
    _set_enabled = staticmethod(set_peer_access_enabled)
