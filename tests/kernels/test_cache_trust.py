"""The kernel cache: whom it trusts, how it heals damaged entries, and what builds leave behind."""

import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import loomwork as wp
from loomwork.kernels import build, cache

LIB = 'extern "C" __attribute__((visibility("default"))) int answer() {{ return {value}; }}\n'


def build_lib(root: Path, value: int = 42) -> Path:
    return build.build_cpu(LIB.format(value=value), "trust", str(root), False, False, False, "a test library")


def entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name != ".locks")


def test_cache_is_private_even_under_umask_000(tmp_path):
    """The cache folder is created 0700; entries and artifacts get no group/other write bits."""
    old = os.umask(0)
    try:
        lib = build_lib(tmp_path / "cache")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    for p in (lib.parent, *lib.parent.iterdir()):
        assert not p.stat().st_mode & 0o022, p


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_refuses_a_cache_folder_others_can_write(tmp_path, mode):
    """A cache folder its group or all users can write (a shared /tmp path) is refused, naming the fix."""
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(mode)
    with pytest.raises(wp.CacheError, match=f"kernel cache folder {re.escape(str(root))} is writable by .*chmod 700"):
        build_lib(root)
    assert entries(root) == []


def test_refuses_a_cache_folder_of_another_user(tmp_path, monkeypatch):
    """A cache folder that belongs to another uid is refused: its contents could be anyone's code."""
    build_lib(tmp_path)
    monkeypatch.setattr(cache, "_current_uid", lambda: os.geteuid() + 1)
    match = f"cache folder {re.escape(str(tmp_path))} belongs to uid {os.geteuid()}, not to you"
    with pytest.raises(wp.CacheError, match=match):
        build_lib(tmp_path)


def test_refuses_a_cached_library_others_can_write(tmp_path):
    """A cached library (or entry folder) with group/other write bits is not loaded; the error says to delete it."""
    lib = build_lib(tmp_path)
    lib.chmod(0o777)
    match = f"cached build {re.escape(str(lib))} is writable by its group and all users.*rm -rf"
    with pytest.raises(wp.CacheError, match=match):
        build_lib(tmp_path)
    lib.chmod(0o755)
    lib.parent.chmod(0o757)
    with pytest.raises(wp.CacheError, match=f"cache entry {re.escape(str(lib.parent))} is writable by all users"):
        build_lib(tmp_path)
    lib.parent.chmod(0o700)
    assert build_lib(tmp_path) == lib


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_refuses_a_cached_library_of_another_user(tmp_path):
    """A library another user put into one's own cache is not loaded, even with a matching digest."""
    lib = build_lib(tmp_path)
    os.chown(lib, 12345, 12345)
    with pytest.raises(wp.CacheError, match=f"cached build {re.escape(str(lib))} belongs to uid 12345"):
        build_lib(tmp_path)


# Each damage is applied to a fresh entry, then the entry is looked up and loaded again: it must be rebuilt
# with a warning and load. Runs in a child process: loading a truncated library would kill it (SIGBUS).
DAMAGE = textwrap.dedent("""
    import ctypes, sys, warnings
    from pathlib import Path
    from loomwork.kernels import build

    def lib(value):
        source = 'extern "C" __attribute__((visibility("default"))) int answer() { return %d; }' % value
        return build.build_cpu(source, "heal", sys.argv[1], False, False, False, "a test library")

    damages = {
        "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        "empty": lambda p: p.write_bytes(b""),
        "garbage": lambda p: p.write_bytes(b"\\x7fELF" + b"\\xab" * (p.stat().st_size - 4)),
        "missing": lambda p: p.unlink(),
        "no digest record": lambda p: (p.parent / "module.so.sha256").unlink(),
        "garbage digest record": lambda p: (p.parent / "module.so.sha256").write_bytes(b"\\xff\\xfe"),
    }
    for value, (name, damage) in enumerate(damages.items()):
        path = lib(value)
        damage(path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = lib(value)
        assert again == path, (again, path)
        assert [str(w.message) for w in caught if "is damaged" in str(w.message)], (name, caught)
        assert ctypes.CDLL(str(again)).answer() == value, name
        print(name, "rebuilt:", caught[0].message)
""")


def test_damaged_entries_are_rebuilt_with_a_warning(tmp_path):
    """A truncated, empty, garbage or missing library, or a missing digest record, is rebuilt with a
    warning: never a crash, an OSError or the same failure on every run."""
    r = subprocess.run([sys.executable, "-c", DAMAGE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(" rebuilt")[0] for line in lines] == ["truncated", "empty", "garbage", "missing",
                                                            "no digest record", "garbage digest record"]
    assert "does not match the digest" in lines[0] and "module.so is missing" in lines[3]
    assert "module.so.sha256 is missing" in lines[4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_damaged_cubin_is_rebuilt_with_a_warning(tmp_path):
    """NVRTC artifacts follow the same rules: a corrupt cubin is found and rebuilt."""
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'
    cubin = build.build_cuda(src, "heal_cuda", str(tmp_path), 75, False, False, False, "a test kernel")
    good = cubin.read_bytes()
    cubin.write_bytes(good[:100])
    with pytest.warns(RuntimeWarning, match="cached build of a test kernel .* is damaged"):
        again = build.build_cuda(src, "heal_cuda", str(tmp_path), 75, False, False, False, "a test kernel")
    assert again == cubin and cubin.read_bytes() == good


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    """Build folders left by killed builds go once they are old and no build holds their entry's lock;
    a recent one and one whose build is still running stay."""
    build_lib(tmp_path)  # creates the cache (and sweeps it, empty)
    cache._cleaned.discard(tmp_path)
    old = 1_000_000_000
    stale, legacy, fresh, running = (tmp_path / n for n in (".tmp-gone-1234abcd.x1y2z3w4", ".tmp-runtime-q8r7s6t5",
                                                            ".tmp-fresh-1234abcd.a1b2c3d4", ".tmp-busy-99.e5f6g7h8"))
    for d in (stale, legacy, fresh, running):
        d.mkdir()
        (d / "module.cpp").write_text("// left over")
    for d in (stale, legacy, running):
        os.utime(d, (old, old))
    held = cache._lock(tmp_path, "busy-99")
    try:
        build_lib(tmp_path, value=7)  # a new build sweeps the cache first
    finally:
        cache._unlock(tmp_path, "busy-99", held)
    assert not stale.exists() and not legacy.exists()
    assert fresh.exists() and running.exists()


def test_lock_files_are_removed_after_builds_and_stale_ones_swept(tmp_path):
    """A build removes its lock file when done; lock files an earlier run left are swept once old, unless a
    build holds them."""
    build_lib(tmp_path)
    locks = tmp_path / ".locks"
    assert list(locks.iterdir()) == []
    cache._cleaned.discard(tmp_path)
    old = 1_000_000_000
    for name in ("left-behind", "held", "recent"):
        (locks / name).touch()
    for name in ("left-behind", "held"):
        os.utime(locks / name, (old, old))
    held = cache._lock(tmp_path, "held")
    try:
        build_lib(tmp_path, value=8)  # a new build sweeps the cache first
        assert sorted(p.name for p in locks.iterdir()) == ["held", "recent"]
    finally:
        cache._unlock(tmp_path, "held", held)
    assert sorted(p.name for p in locks.iterdir()) == ["recent"]


def test_entry_lock_stays_exclusive_while_its_file_comes_and_goes(tmp_path):
    """Threads taking one entry's lock in turn (each holder removing the file on release, waiters waking on
    a removed file) never hold it two at a time."""
    cache._cache_root(str(tmp_path))
    inside, overlaps = [0], []

    def worker():
        for _ in range(40):
            with cache._locked(tmp_path, "contended"):
                inside[0] += 1
                overlaps.append(inside[0])
                os.sched_yield()
                inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlaps) == 240 and max(overlaps) == 1
    assert list((tmp_path / ".locks").iterdir()) == []


FAILED_FIRST_BUILD = textwrap.dedent("""
    import loomwork as wp

    @wp.func_native("this is not C++;")
    def broken(x: float) -> float: ...

    @wp.kernel
    def k(a: wp.array(dtype=float)):
        a[0] = broken(a[0])

    try:
        wp.launch(k, dim=1, inputs=[wp.zeros(1, dtype=float)])
    except wp.CompileError:
        print("compile error")
""")


def test_failed_first_build_leaves_no_temporaries(tmp_path):
    """The first build of a process compiles the runtime alongside the module; when the module fails, the
    runtime's build still finishes (no half-built folder, no orphaned compiler)."""
    cache_dir, script = tmp_path / "cache", tmp_path / "broken.py"
    script.write_text(FAILED_FIRST_BUILD)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LOOMWORK_CACHE_DIR=str(cache_dir)))
    assert r.stdout.strip() == "compile error", r.stderr
    assert [n.split("-")[0] for n in entries(cache_dir)] == ["runtime"]


def test_threads_loading_one_new_module_build_it_once(capsys):
    """Six threads loading a module nobody built yet share one build: one compile, one loaded module."""

    def shared(a: wp.array(dtype=float)):
        a[wp.tid()] = 3.0

    k = wp.kernel(shared, module=f"test_cache_threads_{os.getpid()}")
    cpu = wp.get_device("cpu")
    barrier = threading.Barrier(6)
    loaded, errors = [], []

    def worker():
        barrier.wait()
        try:
            loaded.append(k.module.load(cpu))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    wp.config.verbose = True
    try:
        threads = [threading.Thread(target=worker) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        wp.config.verbose = False
    assert not errors and len(loaded) == 6
    assert all(lm is loaded[0] for lm in loaded)
    err = capsys.readouterr().err
    assert err.count(f"built module '{k.module.name}'") == 1 + wp.config.verify_cuda, err
    a = wp.zeros(4, dtype=float)
    wp.launch(k, dim=4, inputs=[a])
    assert (a.numpy() == 3.0).all()
