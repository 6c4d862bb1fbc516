"""Shared test setup: every module built by a test is also compiled by NVRTC, and a `device` fixture.

`LOOMWORK_TEST_DEVICE=cuda:0 pytest ...` makes that device the default one for the whole run, so tests that
name no device run there (a way to see which parts of the suite work on a GPU; CI runs on the CPU). On a GPU
machine each test's device work is waited for, so a kernel fault names its test (run with pytest-xdist, which
restarts the worker that lost its CUDA context)."""

import ctypes
import itertools
import os
import sys

import pytest

import loomwork as wp
from loomwork.kernels import build
from loomwork.kernels import device as device_module
from loomwork.kernels.cpu import CpuBackend

# Every CUDA source must compile with NVRTC in every test run, GPU or not.
wp.config.verify_cuda = build.nvrtc_available()
if os.environ.get("LOOMWORK_TEST_DEVICE"):
    wp.set_device(os.environ["LOOMWORK_TEST_DEVICE"])


def _devices() -> list:
    params = [pytest.param("cpu", id="cpu")]
    params.append(pytest.param("cuda:0", id="cuda", marks=pytest.mark.skipif(
        not wp.is_cuda_available(), reason="no CUDA device on this machine (CUDA code is still compiled by NVRTC)")))
    return params


@pytest.fixture(params=_devices())
def device(request) -> str:
    """Runs a test on the CPU always, and on CUDA when a GPU is present."""
    return request.param


class DeviceMemory(CpuBackend):
    """CPU memory and kernels, reached only through allocate / copy / upload / download, as a GPU's."""

    name = "devmem"
    host_accessible = False

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.uploaded = 0  # bytes

    def allocate(self, nbytes, *, zero):
        ptr, owner = super().allocate(nbytes, zero=zero)
        self.ranges.append((ptr, ptr + nbytes))
        return ptr, owner

    def upload(self, dst, host, nbytes):
        assert self.owns(dst, nbytes), "an upload outside device memory"
        self.uploaded += nbytes
        ctypes.memmove(dst, host, nbytes)

    def download(self, host, src, nbytes):
        assert self.owns(src, nbytes), "a download from outside device memory"
        ctypes.memmove(host, src, nbytes)

    def owns(self, ptr: int, nbytes: int = 1) -> bool:
        return any(lo <= ptr and ptr + nbytes <= hi for lo, hi in self.ranges)


_numbers = itertools.count()


@pytest.fixture(params=["stand-in", pytest.param("cuda", marks=pytest.mark.skipif(
    not wp.is_cuda_available(), reason="no CUDA device on this machine (CUDA code is still compiled by NVRTC)"))])
def dev(request, monkeypatch):
    """A device whose memory the host cannot read in place: a stand-in (CPU kernels on memory reached only
    through copies, recording its allocations) in every run, and the GPU when there is one."""
    if request.param == "cuda":
        return wp.get_device("cuda:0")
    monkeypatch.setattr(device_module, "_kinds", dict(device_module._kinds))
    monkeypatch.setattr(device_module, "_devices", dict(device_module._devices))
    kind = f"devmem{next(_numbers)}"
    device_module.register_backend(kind, lambda ordinal: DeviceMemory(), lambda: 1)
    return wp.get_device(kind)


if wp.is_cuda_available():
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item):
        """On a GPU machine: wait for each test's device work, and when a kernel faulted (the CUDA context is
        lost for the process) say which test did it and end this worker, so pytest-xdist starts a fresh one
        and the tests after it are not failed by the lost context."""
        yield
        import ctypes

        from loomwork.kernels import cuda
        lib = cuda.driver()
        ctx = ctypes.c_void_p()
        if lib is None or lib.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
            return
        err = lib.cuCtxSynchronize()
        if err != 0:
            print(f"\nCUDA fault after {item.nodeid}: {cuda.error_text(err)}", file=sys.stderr, flush=True)
            os._exit(3)
