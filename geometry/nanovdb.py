"""NanoVDB's published memory and file layout: build a grid buffer from leaves, check one read from
elsewhere, and wrap grids in `.nvdb` files (codecs none and zip). Used by `wp.Volume` (volume.py).

A grid is one contiguous buffer: GridData (672 bytes: magic, checksum, version, flags, name, the
index-to-world map, bounding boxes, types), TreeData (64 bytes: where each level's nodes start and how
many there are), the root (background value and a table of tiles keyed by 4096^3 blocks), then every
upper node (32^3 children), every lower node (16^3) and every leaf (8^3 voxels), each level contiguous
("breadth first"). Offsets inside nodes depend on the value type (the table below). A file is a 16-byte
header, one 176-byte metadata record and name per grid, then the grids (each zlib-compressed behind its
byte count with codec zip).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from loomwork.kernels import types as T

from .common import GeometryError

MAGIC_NUMBER = 0x304244566F6E614E  # "NanoVDB0": grids and files of every 32.x version
MAGIC_GRID = 0x314244566F6E614E  # "NanoVDB1": a grid (since 32.6)
MAGIC_FILE = 0x324244566F6E614E  # "NanoVDB2": a file (since 32.6)
MAJOR, MINOR, PATCH = 32, 8, 0
VERSION = MAJOR << 21 | MINOR << 10 | PATCH
GRID_SIZE, TREE_SIZE, FILE_HEADER_SIZE, FILE_META_SIZE, BLIND_META_SIZE = 672, 64, 16, 176, 288
NAME_SIZE = 256
CHECKSUM_EMPTY = 0xFFFFFFFFFFFFFFFF  # no checksum recorded
FLAG_HAS_BBOX, FLAG_BREADTH_FIRST = 1 << 1, 1 << 5
CLASS_UNKNOWN, CLASS_INDEX = 0, 8
CODECS = {"none": 0, "zip": 1, "blosc": 2}
UPPER_CHILD_MASK, LOWER_CHILD_MASK, LEAF_VALUE_MASK = 4128, 544, 16
INDEX, ON_INDEX = 19, 20


@dataclass(frozen=True)
class GridKind:
    """A NanoVDB grid type this module reads and writes, with its node layout (bytes)."""

    code: int
    name: str  # NanoVDB's name of the value type
    dtype: type | None  # the kernel value type (None: an index grid)
    root_background: int
    root_size: int  # bytes from the root to its first tile
    table_stride: int  # bytes per internal-node table entry
    root_tile_value: int
    root_tile_size: int
    upper_table: int
    upper_size: int
    lower_table: int
    lower_size: int
    leaf_table: int  # the leaf's values (index grids: its first index)
    leaf_size: int

    @property
    def scalar(self) -> np.dtype:
        return np.dtype(np.uint64 if self.dtype is None else T.elem_scalar(self.dtype).np_dtype).newbyteorder("<")

    @property
    def components(self) -> int:
        return 1 if self.dtype is None or T.is_scalar(self.dtype) else self.dtype._length_

    @property
    def value_size(self) -> int:
        return 0 if self.dtype is None else self.scalar.itemsize * self.components

    @property
    def is_index(self) -> bool:
        return self.dtype is None


# (code, name, dtype, then the offsets and sizes of NanoVDB's layout for that value type)
_KINDS = [
    GridKind(1, "float", T.float32, 28, 64, 8, 20, 32, 8256, 270400, 1088, 33856, 96, 2144),
    GridKind(2, "double", T.float64, 32, 96, 8, 24, 32, 8256, 270400, 1088, 33856, 128, 4224),
    GridKind(4, "int32", T.int32, 28, 64, 8, 20, 32, 8256, 270400, 1088, 33856, 96, 2144),
    GridKind(5, "int64", T.int64, 32, 96, 8, 24, 32, 8256, 270400, 1088, 33856, 128, 4224),
    GridKind(6, "Vec3f", T.vec3f, 28, 96, 16, 20, 32, 8256, 532544, 1088, 66624, 128, 6272),
    GridKind(7, "Vec3d", T.vec3d, 32, 128, 24, 24, 64, 8288, 794720, 1120, 99424, 160, 12448),
    GridKind(10, "uint32", T.uint32, 28, 64, 8, 20, 32, 8256, 270400, 1088, 33856, 96, 2144),
    GridKind(17, "Vec4f", T.vec4f, 28, 96, 16, 20, 64, 8288, 532576, 1120, 66656, 128, 8320),
    GridKind(18, "Vec4d", T.vec4d, 32, 160, 32, 24, 64, 8320, 1056896, 1152, 132224, 160, 16544),
    GridKind(INDEX, "Index", None, 32, 96, 8, 24, 32, 8256, 270400, 1088, 33856, 80, 96),
    GridKind(ON_INDEX, "OnIndex", None, 32, 96, 8, 24, 32, 8256, 270400, 1088, 33856, 80, 96),
]
KINDS = {k.code: k for k in _KINDS}
KIND_OF_DTYPE = {k.dtype: k for k in _KINDS if k.dtype is not None}
_TYPE_NAMES = {0: "?", 1: "float", 2: "double", 3: "int16", 4: "int32", 5: "int64", 6: "Vec3f", 7: "Vec3d", 8: "Mask",
               9: "Half", 10: "uint32", 11: "bool", 12: "RGBA8", 13: "Fp4", 14: "Fp8", 15: "Fp16", 16: "FpN",
               17: "Vec4f", 18: "Vec4d", 19: "Index", 20: "OnIndex", 21: "IndexMask", 22: "OnIndexMask",
               23: "PointIndex", 24: "Vec3u8", 25: "Vec3u16", 26: "UInt8"}


def aligned_bytes(n: int) -> np.ndarray:
    """n zeroed bytes starting on a 32-byte boundary (NanoVDB's node alignment)."""
    raw = np.zeros(n + 32, dtype=np.uint8)
    skip = -raw.ctypes.data % 32
    return raw[skip:skip + n]


def _u64(buf: np.ndarray, offset: int) -> int:
    return int(buf[offset:offset + 8].view("<u8")[0])


def _put(buf: np.ndarray, offset: int, fmt: str, *values) -> None:
    struct.pack_into(fmt, buf, offset, *values)


def _bits_to_words(bits: np.ndarray) -> np.ndarray:
    """(..., 64 * w) booleans -> (..., w) little-endian uint64 mask words."""
    packed = np.packbits(bits.astype(np.uint8), axis=-1, bitorder="little")
    return packed.view("<u8")


def leaf_key_order(origins: np.ndarray) -> np.ndarray:
    """The order of leaves in a breadth-first layout: by upper node, then lower node, then leaf."""
    x, y, z = (origins[:, d].astype(np.int64) for d in range(3))
    return np.lexsort((z >> 3, y >> 3, x >> 3, z >> 7, y >> 7, x >> 7, z >> 12, y >> 12, x >> 12))


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted rows `keys`: the first row of each run of equal rows, and each row's run number."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    new = np.ones(len(keys), bool)
    new[1:] = (keys[1:] != keys[:-1]).any(axis=1)
    return np.flatnonzero(new), np.cumsum(new) - 1


def grid_bytes(kind: GridKind, n_upper: int, n_lower: int, n_leaf: int) -> int:
    """The size of a grid `build_grid` makes with so many upper, lower and leaf nodes."""
    return (GRID_SIZE + TREE_SIZE + kind.root_size + n_upper * (kind.root_tile_size + kind.upper_size)
            + n_lower * kind.lower_size + n_leaf * kind.leaf_size)


def build_grid(kind: GridKind, origins: np.ndarray, masks: np.ndarray, values: np.ndarray | None,
               background: np.ndarray, voxel_size: tuple[float, float, float],
               translation: tuple[float, float, float], name: str = "") -> np.ndarray:
    """A NanoVDB grid of `kind` with one leaf per row of `origins` (distinct multiples of 8, in
    `leaf_key_order`), its active voxels `masks` ((n, 512) booleans, voxel n = 64 x + 8 y + z), the
    values (value grids: (n, 512) values of kind.scalar, or (n, 512, components)) and the background."""
    if len(name.encode()) >= NAME_SIZE:
        raise GeometryError(f"Volume: the grid name must be shorter than {NAME_SIZE} bytes, got {len(name)}")
    n_leaf = len(origins)
    origins = origins.astype(np.int32)
    lower_first, lower_of_leaf = _groups(origins >> 7)
    upper_first, upper_of_lower = _groups(origins[lower_first] >> 12)
    n_lower, n_upper = len(lower_first), len(upper_first)
    root = GRID_SIZE + TREE_SIZE
    uppers = root + kind.root_size + n_upper * kind.root_tile_size
    lowers = uppers + n_upper * kind.upper_size
    leaves = lowers + n_lower * kind.lower_size
    total = grid_bytes(kind, n_upper, n_lower, n_leaf)
    buf = aligned_bytes(total)
    bg = np.zeros(8 if kind.is_index else kind.value_size, np.uint8)  # an index grid's background index is 0
    if not kind.is_index:
        bg[:] = np.asarray(background, kind.scalar).reshape(kind.components).view(np.uint8)

    # leaves: the bounding box of their active voxels, masks, values or first indices
    active = masks.astype(bool)
    cube = active.reshape(n_leaf, 8, 8, 8)
    per_axis = [cube.any(axis=tuple(a for a in (1, 2, 3) if a != d + 1)) for d in range(3)]  # (n, 8) each
    lo = np.stack([p.argmax(axis=1) for p in per_axis], 1)  # an empty leaf gets the box of voxel 0
    hi = np.stack([np.where(p.any(axis=1), 7 - p[:, ::-1].argmax(axis=1), 0) for p in per_axis], 1)
    leaf_lo, leaf_hi = origins + lo, origins + hi
    nodes = buf[leaves:total].reshape(n_leaf, kind.leaf_size)
    nodes[:, 0:12] = leaf_lo.astype("<i4").view(np.uint8).reshape(n_leaf, 12)
    nodes[:, 12:15] = (hi - lo).astype(np.uint8)
    nodes[:, 15] = 2  # the leaf has a bounding box
    nodes[:, 16:80] = _bits_to_words(active).view(np.uint8).reshape(n_leaf, 64)
    counts = active.sum(axis=1)
    if kind.is_index:
        first = (1 + np.cumsum(counts) - counts).astype(np.uint64)  # index 0 is the background's
        words = active.reshape(n_leaf, 8, 64).sum(axis=2)
        prefix = np.cumsum(words, axis=1)[:, :7].astype(np.uint64)
        packed = np.zeros(n_leaf, np.uint64)
        for w in range(7):
            packed |= prefix[:, w] << np.uint64(9 * w)
        nodes[:, 80:88] = first.astype("<u8").view(np.uint8).reshape(n_leaf, 8)
        nodes[:, 88:96] = packed.astype("<u8").view(np.uint8).reshape(n_leaf, 8)
    else:
        vals = np.ascontiguousarray(np.asarray(values, kind.scalar).reshape(n_leaf, 512 * kind.components))
        nodes[:, kind.leaf_table:kind.leaf_table + 512 * kind.value_size] = vals.view(np.uint8).reshape(
            n_leaf, 512 * kind.value_size)

    def internal(start: int, count: int, size: int, table: int, child_mask: int, dim_log2: int, child_log2: int,
                 child_of: np.ndarray, child_origins: np.ndarray, child_addrs: np.ndarray,
                 child_lo: np.ndarray, child_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fill `count` internal nodes from their children; returns their bounding boxes."""
        nodes = buf[start:start + count * size].reshape(count, size)
        slots = 1 << (3 * dim_log2)
        entries = nodes[:, table:table + slots * kind.table_stride].reshape(count, slots, kind.table_stride)
        entries[:, :, :len(bg)] = bg
        m = (1 << (dim_log2 + child_log2)) - 1
        local = (child_origins.astype(np.int64) & m) >> child_log2
        n = (local[:, 0] << (2 * dim_log2)) | (local[:, 1] << dim_log2) | local[:, 2]
        node_addr = start + child_of.astype(np.int64) * size
        entries[child_of, n, :8] = (child_addrs - node_addr).astype("<i8").view(np.uint8).reshape(len(n), 8)
        bits = np.zeros((count, slots), bool)
        bits[child_of, n] = True
        nodes[:, child_mask:child_mask + slots // 8] = _bits_to_words(bits).view(np.uint8).reshape(count, slots // 8)
        lo = np.full((count, 3), np.iinfo(np.int32).max, np.int64)
        hi = np.full((count, 3), np.iinfo(np.int32).min, np.int64)
        np.minimum.at(lo, child_of, child_lo)
        np.maximum.at(hi, child_of, child_hi)
        nodes[:, 0:12] = lo.astype("<i4").view(np.uint8).reshape(count, 12)
        nodes[:, 12:24] = hi.astype("<i4").view(np.uint8).reshape(count, 12)
        return lo, hi

    leaf_addrs = leaves + np.arange(n_leaf, dtype=np.int64) * kind.leaf_size
    lower_lo, lower_hi = internal(lowers, n_lower, kind.lower_size, kind.lower_table, LOWER_CHILD_MASK, 4, 3,
                                  lower_of_leaf, origins, leaf_addrs, leaf_lo, leaf_hi)
    lower_addrs = lowers + np.arange(n_lower, dtype=np.int64) * kind.lower_size
    upper_lo, upper_hi = internal(uppers, n_upper, kind.upper_size, kind.upper_table, UPPER_CHILD_MASK, 5, 7,
                                  upper_of_lower, origins[lower_first], lower_addrs, lower_lo, lower_hi)

    # the root: bounding box, background and one tile per upper node
    if n_upper:
        box_lo, box_hi = upper_lo.min(axis=0), upper_hi.max(axis=0)
    else:
        box_lo, box_hi = np.zeros(3, np.int64), np.full(3, -1, np.int64)
    _put(buf, root, "<6iI", *box_lo.tolist(), *box_hi.tolist(), n_upper)
    buf[root + kind.root_background:root + kind.root_background + len(bg)] = bg
    upper_origins = origins[lower_first][upper_first].astype(np.int64)
    u = (upper_origins & 0xFFFFFFFF) >> 12
    keys = (u[:, 2] | (u[:, 1] << 21) | (u[:, 0] << 42)).astype(np.uint64)
    tiles = buf[root + kind.root_size:uppers].reshape(n_upper, kind.root_tile_size)
    tiles[:, 0:8] = keys.astype("<u8").view(np.uint8).reshape(n_upper, 8)
    child = uppers + np.arange(n_upper, dtype=np.int64) * kind.upper_size - root
    tiles[:, 8:16] = child.astype("<i8").view(np.uint8).reshape(n_upper, 8)

    voxels = int(counts.sum())
    offsets = [leaves if n_leaf else 0, lowers if n_lower else 0, uppers if n_upper else 0, root]
    _put(buf, GRID_SIZE, "<4q3I3IQ", *[o - GRID_SIZE if o else 0 for o in offsets], n_leaf, n_lower, n_upper,
         0, 0, 0, voxels)

    # the grid header and its index-to-world map
    vs, t = np.asarray(voxel_size, np.float64), np.asarray(translation, np.float64)
    _put(buf, 0, "<QQIIIIQ", MAGIC_GRID, CHECKSUM_EMPTY, VERSION, FLAG_HAS_BBOX | FLAG_BREADTH_FIRST, 0, 1, total)
    buf[40:40 + NAME_SIZE] = np.frombuffer(name.encode().ljust(NAME_SIZE, b"\0"), np.uint8)
    mat, inv = np.diag(vs), np.diag(1.0 / vs)
    _put(buf, 296, "<9f9f3ff9d9d3dd", *mat.ravel(), *inv.ravel(), *t, 1.0, *mat.ravel(), *inv.ravel(), *t, 1.0)
    world_lo, world_hi = box_lo * vs + t, (box_hi + 1) * vs + t
    _put(buf, 560, "<6d3dIIqIIQQ", *world_lo, *world_hi, *vs, CLASS_INDEX if kind.is_index else CLASS_UNKNOWN,
         kind.code, 0, 0, 0, voxels + 1 if kind.is_index else 0, 0)
    return buf


@dataclass(frozen=True)
class GridLayout:
    """Where a checked grid's parts are (byte offsets into its buffer) and what it holds."""

    kind: GridKind
    size: int
    root: int
    root_tiles: int
    leaves: int
    leaf_count: int
    lower_count: int
    upper_count: int
    voxel_count: int
    value_count: int  # index grids: indices handed out, the background's 0 included
    blind: tuple  # per blind data array: (name, byte offset, value count, value size, NanoVDB type name)


def check_grid(buf: np.ndarray, what: str) -> GridLayout:
    """Check that `buf` starts with a NanoVDB grid this module can read, every node reference inside it
    pointing to a node of the right level inside the buffer, so kernels never read outside it."""
    n = len(buf)
    if n < GRID_SIZE + TREE_SIZE:
        raise GeometryError(f"{what}: truncated NanoVDB grid ({n} bytes; the headers alone take "
                            f"{GRID_SIZE + TREE_SIZE})")
    magic, _, version, _, _, _, size = struct.unpack_from("<QQIIIIQ", buf, 0)
    if magic not in (MAGIC_NUMBER, MAGIC_GRID):
        raise GeometryError(f"{what}: not a NanoVDB grid (magic {magic:#x})")
    _check_version(version, what)
    code = int(struct.unpack_from("<I", buf, 636)[0])
    kind = KINDS.get(code)
    if kind is None:
        supported = ", ".join(k.name for k in _KINDS)
        raise GeometryError(f"{what}: NanoVDB grid type {_TYPE_NAMES.get(code, code)!r} is not supported "
                            f"(supported: {supported})")
    if size > n:
        raise GeometryError(f"{what}: truncated NanoVDB grid ({n} bytes of {size})")
    if size < GRID_SIZE + TREE_SIZE:
        raise GeometryError(f"{what}: corrupt NanoVDB grid (grid size {size})")
    tree = struct.unpack_from("<4q3I3IQ", buf, GRID_SIZE)
    offsets, counts, voxels = tree[0:4], tree[4:7], tree[10]
    root = GRID_SIZE + offsets[3]
    sizes = (kind.leaf_size, kind.lower_size, kind.upper_size)
    starts = [GRID_SIZE + o for o in offsets[:3]]
    if root < GRID_SIZE + TREE_SIZE or root + kind.root_size > size:
        raise GeometryError(f"{what}: corrupt NanoVDB grid (root at {root} outside {size} bytes)")
    tiles = int(struct.unpack_from("<I", buf, root + 24)[0])
    if root + kind.root_size + tiles * kind.root_tile_size > size:
        raise GeometryError(f"{what}: corrupt or truncated NanoVDB grid ({tiles} root tiles do not fit)")
    for level, (start, count, s) in enumerate(zip(starts, counts, sizes, strict=True)):
        if count and (start < root or start % 32 or start + count * s > size):
            raise GeometryError(f"{what}: corrupt or truncated NanoVDB grid (the {count} nodes of level {level} do "
                                f"not fit at {start} in {size} bytes)")
    g = buf[:size]

    def children(parents: np.ndarray, mask_at: int, table: int, slots: int, level: int) -> None:
        """Every child reference of nodes at `parents` lands on a node of `level`."""
        if len(parents) == 0:
            return
        mask_bytes = g[parents[:, None] + mask_at + np.arange(slots // 8)]
        bits = np.unpackbits(mask_bytes, axis=1, bitorder="little").astype(bool)
        p, s = np.nonzero(bits)
        at = parents[p] + table + s * kind.table_stride
        refs = g[at[:, None] + np.arange(8)].copy().view("<i8").reshape(-1)
        _check_refs(parents[p] + refs, starts[level], counts[level], sizes[level], level, what)

    tile_at = root + kind.root_size + np.arange(tiles, dtype=np.int64) * kind.root_tile_size
    refs = g[tile_at[:, None] + 8 + np.arange(8)].copy().view("<i8").reshape(-1) if tiles else np.zeros(0, np.int64)
    refs = refs[refs != 0]
    _check_refs(root + refs, starts[2], counts[2], sizes[2], 2, what)
    uppers = starts[2] + np.arange(counts[2], dtype=np.int64) * sizes[2]
    children(uppers, UPPER_CHILD_MASK, kind.upper_table, 1 << 15, 1)
    lowers = starts[1] + np.arange(counts[1], dtype=np.int64) * sizes[1]
    children(lowers, LOWER_CHILD_MASK, kind.lower_table, 1 << 12, 0)
    value_count = _u64(g, 656) if kind.is_index else 0
    return GridLayout(kind, size, root, tiles, starts[0], counts[0], counts[1], counts[2], int(voxels), value_count,
                      _blind_data(g, what))


def _blind_data(g: np.ndarray, what: str) -> tuple:
    """The grid's blind data arrays (after its nodes), each checked to lie inside the grid."""
    offset, count = struct.unpack_from("<qI", g, 640)
    if count == 0:
        return ()
    if offset < GRID_SIZE or offset + count * BLIND_META_SIZE > len(g):
        raise GeometryError(f"{what}: corrupt NanoVDB grid (its {count} blind data records do not fit)")
    out = []
    for n in range(count):
        at = offset + n * BLIND_META_SIZE
        data, values, value_size, _, _, data_type = struct.unpack_from("<qQIIII", g, at)
        name = bytes(g[at + 32:at + 32 + NAME_SIZE]).split(b"\0", 1)[0].decode("utf-8", "replace")
        start, nbytes = at + data, values * value_size
        if start < 0 or start + nbytes > len(g):
            raise GeometryError(f"{what}: corrupt NanoVDB grid (blind data {name!r} lies outside the grid)")
        out.append((name, start, values, value_size, _TYPE_NAMES.get(data_type, "?")))
    return tuple(out)


def _check_refs(addrs: np.ndarray, start: int, count: int, size: int, level: int, what: str) -> None:
    rel = addrs - start
    bad = (rel < 0) | (rel >= count * size) | (rel % size != 0)
    if bad.any():
        raise GeometryError(f"{what}: corrupt NanoVDB grid (a reference to a level-{level} node points to byte "
                            f"{int(addrs[bad][0])}, not to one of its {count} nodes)")


def _check_version(version: int, what: str) -> None:
    major, minor, patch = version >> 21, (version >> 10) & 0x7FF, version & 0x3FF
    if major != MAJOR:
        raise GeometryError(f"{what}: NanoVDB version {major}.{minor}.{patch} is not supported (this reader "
                            f"reads major version {MAJOR})")


def read_file(data: bytes, what: str) -> np.ndarray:
    """The grids of an `.nvdb` file's bytes (decompressed, one after another) as an aligned buffer; a bare
    grid buffer is accepted too."""
    if len(data) >= 8 and struct.unpack_from("<Q", data, 0)[0] == MAGIC_GRID:
        grids = [data]
    else:
        if len(data) < FILE_HEADER_SIZE:
            raise GeometryError(f"{what}: truncated NanoVDB file ({len(data)} bytes)")
        magic, version, grid_count, codec = struct.unpack_from("<QIHH", data, 0)
        if magic not in (MAGIC_NUMBER, MAGIC_FILE):
            raise GeometryError(f"{what}: not a NanoVDB file (magic {magic:#x})")
        _check_version(version, what)
        if grid_count == 0:
            raise GeometryError(f"{what}: the NanoVDB file holds no grid")
        if codec not in (0, 1, 2):
            raise GeometryError(f"{what}: unknown NanoVDB codec {codec}")
        at, sizes = FILE_HEADER_SIZE, []
        for _ in range(grid_count):
            if at + FILE_META_SIZE > len(data):
                raise GeometryError(f"{what}: truncated NanoVDB file (in the metadata of its grids)")
            sizes.append(struct.unpack_from("<Q", data, at)[0])
            at += FILE_META_SIZE + struct.unpack_from("<I", data, at + 136)[0]
        grids = []
        for grid_size in sizes:
            if codec == 0:
                grid = data[at:at + grid_size]
                at += grid_size
            else:
                if at + 8 > len(data):
                    raise GeometryError(f"{what}: truncated NanoVDB file (before grid {len(grids)})")
                chunk = struct.unpack_from("<Q", data, at)[0]
                payload = data[at + 8:at + 8 + chunk]
                if len(payload) < chunk:
                    raise GeometryError(f"{what}: truncated NanoVDB file ({len(payload)} of {chunk} compressed "
                                        "bytes)")
                grid = _decompress(payload, codec, what)
                at += 8 + chunk
            if len(grid) < grid_size:
                raise GeometryError(f"{what}: truncated NanoVDB file ({len(grid)} of grid {len(grids)}'s "
                                    f"{grid_size} bytes)")
            grids.append(grid[:grid_size])
    joined = b"".join(grids)
    buf = aligned_bytes(len(joined))
    buf[:] = np.frombuffer(joined, np.uint8)
    return buf


def _decompress(payload: bytes, codec: int, what: str) -> bytes:
    if codec == 1:
        try:
            return zlib.decompress(payload)
        except zlib.error as e:
            raise GeometryError(f"{what}: corrupt zip-compressed NanoVDB grid ({e})") from None
    try:
        import blosc  # noqa: PLC0415 - optional
    except ImportError:
        raise GeometryError(f"{what}: the grid is blosc-compressed; `pip install blosc` to read it") from None
    return blosc.decompress(payload)


def write_file(grid: np.ndarray, layout: GridLayout, codec: str) -> bytes:
    """An `.nvdb` file holding one grid."""
    if codec not in CODECS:
        raise GeometryError(f"save_to_nvdb: codec must be one of {', '.join(CODECS)}, got {codec!r}")
    raw = bytearray(grid[:layout.size].tobytes())
    struct.pack_into("<II", raw, 24, 0, 1)  # the file's only grid
    if codec == "zip":
        payload = zlib.compress(raw)
    elif codec == "blosc":
        try:
            import blosc  # noqa: PLC0415 - optional
        except ImportError:
            raise GeometryError("save_to_nvdb(codec='blosc') needs the blosc package (`pip install blosc`)") from None
        payload = blosc.compress(raw)
    else:
        payload = raw
    raw = bytes(raw)
    name = raw[40:40 + NAME_SIZE].split(b"\0", 1)[0] + b"\0"
    world_bbox = struct.unpack_from("<6d", raw, 560)
    voxel_size = struct.unpack_from("<3d", raw, 608)
    grid_class, grid_type = struct.unpack_from("<II", raw, 632)
    index_bbox = struct.unpack_from("<6i", raw, layout.root)
    head = struct.pack("<QIHH", MAGIC_FILE, VERSION, 1, CODECS[codec])
    meta = struct.pack("<QQQQII6d6i3dI4I3IHHI", layout.size, len(payload), 0, layout.voxel_count, grid_type,
                       grid_class, *world_bbox, *index_bbox, *voxel_size, len(name), layout.leaf_count,
                       layout.lower_count, layout.upper_count, 1, 0, 0, 0, CODECS[codec], 0, VERSION)
    assert len(meta) == FILE_META_SIZE
    size_prefix = struct.pack("<Q", len(payload)) if codec != "none" else b""
    return head + meta + name + size_prefix + payload
