"""The on-disk kernel cache: whom it trusts, how an entry is published and checked, locks and cleanup.

Loading a cached library runs its code in this process, so the cache is trusted only where no other user
could have written it: the cache folder (created 0700), each entry folder and each artifact must belong
to the current user and be writable by no one else; otherwise `CacheError` says which path and what to
do. An entry `<cache>/<key>/` holds the artifact and `<artifact>.sha256` (sha256sum's format). It is
built in a private `.tmp-<key>.*` folder, sealed (group/other write bits cleared, digest recorded, all
fsynced) and renamed into place, so a reader sees a complete entry or none. Before it is used the
artifact is hashed against its record (a fraction of a millisecond); a damaged entry (truncated, empty,
garbage, missing file) is rebuilt with a warning. One build per entry runs at a time (a lock file in
`<cache>/.locks/`, removed by its holder when the build is done), so threads and processes that need the
same new entry compile it once; temporaries and lock files left by killed builds are removed once they are
older than `STALE_AFTER` and no build holds their lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import CacheError

#: part of every cache key: entries of an earlier layout (no digest record) are not looked at
FORMAT = "2"

#: seconds after which a temporary build folder no build holds is removed
STALE_AFTER = 600.0

_ABSENT = "absent"
_cleaned: set[Path] = set()  # cache folders already swept for stale temporaries by this process
_built: set[Path] = set()  # entries this process built (wp.config.cache_kernels = False reuses only these)


def _current_uid() -> int:
    """The user the cache must belong to (tests substitute another)."""
    return os.geteuid()


def _check_trusted(path: Path, st: os.stat_result, what: str, remedy: str) -> None:
    """Raise CacheError unless `path` belongs to the current user and no one else may write it."""
    uid = _current_uid()
    if st.st_uid != uid:
        raise CacheError(f"{what} {path} belongs to uid {st.st_uid}, not to you (uid {uid}): loomwork loads "
                         f"compiled code only from a cache no one else can write. {remedy}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = " and ".join(w for w, bit in (("its group", stat.S_IWGRP), ("all users", stat.S_IWOTH))
                           if st.st_mode & bit)
        raise CacheError(f"{what} {path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o}), so another "
                         f"user could plant code that this process would load. {remedy}")


def _cache_root(cache_dir: str) -> Path:
    """The cache folder, created private (0700) when missing, checked to be trusted."""
    root = Path(cache_dir)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(root)
    except OSError as e:
        raise CacheError(f"the kernel cache folder {root} cannot be created ({e.strerror or e}): point "
                         "wp.config.kernel_cache_dir (or LOOMWORK_CACHE_DIR) at a folder you can write") from None
    _check_trusted(root, st, "the kernel cache folder", f"Run 'chmod 700 {root}' if you own it and trust its "
                   "contents, or point wp.config.kernel_cache_dir (or LOOMWORK_CACHE_DIR) at a folder of your own.")
    return root


def _problem(folder: Path, artifact: str) -> str | None:
    """What is wrong with the entry `folder` (None: nothing, _ABSENT: there is none); raises CacheError
    when the entry or its artifact is not trusted."""
    remedy = f"Delete it ('rm -rf {folder}'); loomwork builds it again."
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return _ABSENT
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    _check_trusted(folder, st, "the kernel cache entry", remedy)
    try:
        record = (folder / f"{artifact}.sha256").read_bytes()
        with open(folder / artifact, "rb") as f:
            st = os.fstat(f.fileno())
            _check_trusted(folder / artifact, st, "the cached build", remedy)
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except CacheError:
        raise
    except FileNotFoundError as e:
        return f"{Path(e.filename).name} is missing"
    except OSError as e:
        return f"it cannot be read ({e.strerror or e})"
    if record.split()[:1] != [digest.encode()]:
        return f"{artifact} ({st.st_size} bytes) does not match the digest recorded when it was built"
    return None


def _lock(root: Path, key: str, blocking: bool = True) -> int | None:
    """An exclusive lock on the entry `key` (a file descriptor for `_unlock`), or None when `blocking` is
    False and a build holds it. The holder removes the lock file when it is done, so a waiter may wake up
    holding a file no longer in `.locks/`: it then tries again on the file now there (one path, one
    holder). A file system without locks gives an unlocked descriptor: the atomic rename still keeps
    every entry whole."""
    locks = root / ".locks"
    locks.mkdir(mode=0o700, exist_ok=True)
    path = locks / key
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:
            return fd
        try:
            held = os.fstat(fd)
            current = os.stat(path)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed the file while this process waited


def _unlock(root: Path, key: str, fd: int) -> None:
    """Release a lock from `_lock`, removing its file (while still holding it, so no one else owns it)."""
    try:
        os.unlink(root / ".locks" / key)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


@contextmanager
def _locked(root: Path, key: str) -> Iterator[None]:
    fd = _lock(root, key)
    try:
        yield
    finally:
        _unlock(root, key, fd)


def _stale(path: str, now: float) -> bool:
    try:
        return now - os.stat(path, follow_symlinks=False).st_mtime >= STALE_AFTER
    except FileNotFoundError:
        return False


def _clean_stale(root: Path) -> None:
    """Remove what builds that died left behind, once it is older than STALE_AFTER and no build holds its
    lock: temporary folders, and lock files (an earlier version kept them); once per cache folder and
    process, before a build."""
    if root in _cleaned:
        return
    _cleaned.add(root)
    now = time.time()
    for e in os.scandir(root):
        if not e.name.startswith(".tmp-") or not _stale(e.path, now):
            continue
        key = e.name[len(".tmp-"):].rpartition(".")[0] or e.name
        fd = _lock(root, key, blocking=False)
        if fd is not None:
            try:
                shutil.rmtree(e.path, ignore_errors=True)
            finally:
                _unlock(root, key, fd)
    locks = root / ".locks"
    for e in os.scandir(locks) if locks.is_dir() else ():
        if _stale(e.path, now):
            fd = _lock(root, e.name, blocking=False)
            if fd is not None:
                _unlock(root, e.name, fd)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _seal(folder: Path, artifact: str) -> None:
    """Make a finished build private and durable: no group/other write bits (a umask of 000 would leave
    them), the artifact's digest recorded, the artifact, its record and the folder flushed to disk (after
    a crash an entry is whole or absent; the root's rename need not be flushed)."""
    for p in folder.iterdir():
        os.chmod(p, stat.S_IMODE(p.stat().st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
    with open(folder / artifact, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        os.fsync(f.fileno())
    record = folder / f"{artifact}.sha256"
    with open(record, "w") as f:
        f.write(f"{digest}  {artifact}\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(record, 0o644)
    _fsync(folder)


def _publish(root: Path, key: str, artifact: str, produce: Callable[[Path], None]) -> None:
    """Build the entry in a private folder and rename it into place; a failed build leaves nothing."""
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}.", dir=root))
    try:
        produce(tmp)
        _seal(tmp, artifact)
        try:
            os.rename(tmp, root / key)
        except OSError:
            if _problem(root / key, artifact) is not None:  # not a finished entry from a build that took no lock
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def cached(cache_dir: str, key: str, artifact: str, produce: Callable[[Path], None], what: str,
           reuse: bool = True) -> Path:
    """The path of `<cache_dir>/<key>/<artifact>`, checked against its recorded digest; when the entry is
    missing or damaged, `produce(folder)` writes the artifact into an empty folder that becomes the entry.
    With `reuse` False (wp.config.cache_kernels), an entry this process did not build is built again."""
    root = _cache_root(cache_dir)
    folder = root / key
    if (reuse or folder in _built) and _problem(folder, artifact) is None:
        return folder / artifact
    _clean_stale(root)
    with _locked(root, key):
        problem = _problem(folder, artifact)  # another thread or process may have built it meanwhile
        if problem is None and (reuse or folder in _built):
            return folder / artifact
        if problem not in (None, _ABSENT):
            warnings.warn(f"loomwork: the cached build of {what} in {folder} is damaged ({problem}); "
                          "rebuilding it", RuntimeWarning, stacklevel=3)
        if problem != _ABSENT:
            trash = Path(tempfile.mkdtemp(prefix=f".tmp-{key}.", dir=root))
            os.rename(folder, trash / "old")
            shutil.rmtree(trash, ignore_errors=True)
        _publish(root, key, artifact, produce)
        _built.add(folder)
    return folder / artifact


def clear(cache_dir: str) -> int:
    """Delete the entries of the cache at `cache_dir`, and temporaries no build holds; an entry being built
    right now is left to its build. Returns how many were deleted. Libraries a process already loaded keep
    running; what is used again is rebuilt."""
    root = Path(cache_dir)
    if not root.is_dir():
        return 0
    deleted = 0
    for e in list(os.scandir(root)):  # listed first: the trash folders made below are not visited
        if e.name == ".locks" or not e.is_dir(follow_symlinks=False):
            continue
        key = e.name[len(".tmp-"):].rpartition(".")[0] if e.name.startswith(".tmp-") else e.name
        fd = _lock(root, key, blocking=False)
        if fd is None:  # a build of this entry is under way
            continue
        try:
            trash = Path(tempfile.mkdtemp(prefix=".tmp-clear.", dir=root))
            os.rename(e.path, trash / "old")  # gone from its name at once, then removed
            shutil.rmtree(trash, ignore_errors=True)
            deleted += 1
        finally:
            os.close(fd)
    return deleted
