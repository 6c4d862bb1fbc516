"""Runtime helpers Warp programs call: `init`, cache clearing, and the memory-pool and peer-access queries.

loomwork initializes itself on first use, so `init()` only applies `wp.config.track_memory` (it is
idempotent, as Warp's). Memory pools and peer access are CUDA's: on the CPU the queries answer False,
turning one off is a no-op, and asking to turn one on, or for a pool's threshold or usage, raises a
ValueError naming why (as Warp does for its CPU device).
"""

from __future__ import annotations

from typing import Any

from . import cache, config
from .device import get_cuda_devices, get_device
from .memory import check_allocator, tracker


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


def _pooled(device: Any, what: str) -> Any:
    """The backend of `device`, which must allocate from a memory pool (a ValueError names why not)."""
    backend = get_device(device).backend
    if not getattr(backend, "is_mempool_supported", False):
        raise ValueError(f"{what}: {get_device(device)} has no memory pool (CUDA devices with a driver that "
                         "supports stream-ordered allocation have one)")
    return backend


def is_mempool_supported(device: Any = None) -> bool:
    """Whether `device` can allocate from a stream-ordered memory pool (CUDA devices)."""
    return bool(getattr(get_device(device).backend, "is_mempool_supported", False))


def is_mempool_enabled(device: Any = None) -> bool:
    """Whether new arrays on `device` come from its memory pool (on by default where supported)."""
    return bool(getattr(get_device(device).backend, "mempool_enabled", False))


def set_mempool_enabled(device: Any, enable: bool) -> None:
    """Allocate new arrays on `device` from its memory pool (or with plain allocations); turning it on for
    a device without one raises."""
    if not enable and not is_mempool_supported(device):
        return
    _pooled(device, "set_mempool_enabled").mempool_enabled = bool(enable)


def set_mempool_release_threshold(device: Any, threshold: int | float) -> None:
    """Bytes the pool keeps reserved at synchronizations instead of returning them to the driver; a float
    in [0, 1] is a fraction of the device's memory."""
    backend = _pooled(device, "set_mempool_release_threshold")
    if isinstance(threshold, float) and 0.0 <= threshold <= 1.0:
        threshold = int(threshold * backend.memory_info()[1])
    if threshold < 0:
        raise ValueError(f"set_mempool_release_threshold: threshold must not be negative, got {threshold}")
    backend.set_release_threshold(int(threshold))


def get_mempool_release_threshold(device: Any = None) -> int:
    return _pooled(device, "get_mempool_release_threshold").release_threshold()


def get_mempool_used_mem_current(device: Any = None) -> int:
    """Bytes of the pool in use by live allocations."""
    return _pooled(device, "get_mempool_used_mem_current").pool_used(high=False)


def get_mempool_used_mem_high(device: Any = None) -> int:
    """The most bytes of the pool in use at once so far."""
    return _pooled(device, "get_mempool_used_mem_current").pool_used(high=True)


def _gpu_pair(target_device: Any, peer_device: Any) -> tuple[Any, Any] | None:
    """The backends of two devices if both map memory between themselves (CUDA devices), else None."""
    t, p = get_device(target_device).backend, get_device(peer_device).backend
    return (t, p) if hasattr(t, "can_access_peer") and hasattr(p, "can_access_peer") else None


def is_peer_access_supported(target_device: Any, peer_device: Any) -> bool:
    """Whether kernels on `peer_device` can read and write memory of `target_device` directly."""
    pair = _gpu_pair(target_device, peer_device)
    return pair is not None and pair[1].can_access_peer(pair[0])


def is_peer_access_enabled(target_device: Any, peer_device: Any) -> bool:
    pair = _gpu_pair(target_device, peer_device)
    return pair is not None and (pair[0] is pair[1] or pair[1].ordinal in pair[0].peers)


def set_peer_access_enabled(target_device: Any, peer_device: Any, enable: bool) -> None:
    """Let kernels on `peer_device` access memory of `target_device` directly (or stop them)."""
    if not enable and not is_peer_access_enabled(target_device, peer_device):
        return
    if not is_peer_access_supported(target_device, peer_device):
        raise ValueError(f"set_peer_access_enabled: {get_device(peer_device)} cannot map the memory of "
                         f"{get_device(target_device)}")
    t, p = _gpu_pair(target_device, peer_device)
    t.set_peer_access(p, bool(enable))


def is_mempool_access_supported(target_device: Any, peer_device: Any) -> bool:
    """Whether `peer_device` can be given access to `target_device`'s memory pool."""
    return is_peer_access_supported(target_device, peer_device) and is_mempool_supported(target_device)


def is_mempool_access_enabled(target_device: Any, peer_device: Any) -> bool:
    pair = _gpu_pair(target_device, peer_device)
    return pair is not None and is_mempool_supported(target_device) and pair[0].pool_access(pair[1])


def set_mempool_access_enabled(target_device: Any, peer_device: Any, enable: bool) -> None:
    """Let `peer_device` access allocations from `target_device`'s memory pool (or stop it)."""
    if not enable and not is_mempool_access_enabled(target_device, peer_device):
        return
    if not is_mempool_access_supported(target_device, peer_device):
        raise ValueError(f"set_mempool_access_enabled: {get_device(peer_device)} cannot access the memory pool "
                         f"of {get_device(target_device)}")
    t, p = _gpu_pair(target_device, peer_device)
    t.set_pool_access(p, bool(enable))


def set_device_allocator(device: Any, allocator: Any) -> None:
    """Make arrays allocated on `device` from now on take their memory from `allocator` (an object with
    `allocate(size_in_bytes) -> address` and `deallocate(address, size_in_bytes)`); None restores the built-in
    one. Arrays made before keep the memory they have. Unlike Warp (CUDA only) this works on every device."""
    check_allocator(allocator)
    get_device(device)._custom_allocator = allocator


def set_cuda_allocator(allocator: Any) -> None:
    """`set_device_allocator` for every CUDA device (a RuntimeError when there is none)."""
    check_allocator(allocator)
    devices = get_cuda_devices()
    if not devices:
        raise RuntimeError("set_cuda_allocator: no CUDA devices available")
    for d in devices:
        get_device(d)._custom_allocator = allocator


def get_device_allocator(device: Any) -> Any:
    """The allocator arrays on `device` get their memory from (its `get_allocator()`)."""
    return get_device(device).get_allocator()


class ScopedAllocator:
    """`with wp.ScopedAllocator(device, allocator):` arrays allocated on `device` inside the block use
    `allocator` (None: the built-in one); the previous setting comes back after."""

    def __init__(self, device: Any, allocator: Any) -> None:
        check_allocator(allocator)
        self.device, self.allocator = get_device(device), allocator

    def __enter__(self) -> ScopedAllocator:
        self.saved = self.device._custom_allocator
        self.device._custom_allocator = self.allocator
        return self

    def __exit__(self, *exc: Any) -> None:
        self.device._custom_allocator = self.saved


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
