"""`wp.Bvh`: a bounding volume hierarchy over boxes, for overlap and ray queries in kernels.

In a kernel, `q = wp.bvh_query_aabb(bvh_id, lower, upper)` (or `bvh_query_ray(id, start, dir)`,
`bvh_query_sphere(id, center, radius)`, `bvh_query_capsule(id, start, dir, radius)`, each with an
optional subtree `root`) starts a query and `while wp.bvh_query_next(q, index):` visits every box it
touches. Trees are built on the host by a threaded binned-SAH (or centroid-median) builder into a flat
node array (geometry/native/bvh_build.cpp); the kernels' side is geometry/native/bvh.h.
"""

from __future__ import annotations

import ctypes
import enum
from pathlib import Path
from typing import Any

import numpy as np

from loomwork.kernels import types as T
from loomwork.kernels.builtins import Exact, InOut, Out
from loomwork.kernels.extensions import (
    add_builtin,
    export_name,
    register_handle_type,
    register_header,
    register_value_type,
)

from .common import GeometryError, Handle, finite_or_raise, host_library, int32_array, vec3_array

HEADER = register_header(Path(__file__).parent / "native" / "bvh.h")

BVH_STACK = 64  # bvh.h: the entries a traversal stack holds


class BvhConstructor(enum.IntEnum):
    """How a tree is built: SAH (binned surface-area heuristic, the best queries) or MEDIAN (faster
    builds). LBVH and CUBQL name Warp's GPU builders; on host memory they build with SAH."""

    SAH = 0
    MEDIAN = 1
    LBVH = 2
    CUBQL = -1

    @classmethod
    def parse(cls, value: Any) -> BvhConstructor:
        if value is None:
            return cls.SAH
        if isinstance(value, cls):
            return value
        try:
            return cls[str(value).upper()]
        except KeyError:
            raise GeometryError(f"unknown BVH constructor {value!r}: expected one of "
                                f"{', '.join(m.name.lower() for m in cls)}") from None


class BvhDesc(ctypes.Structure):
    """Mirrors `lw::bvh_t` in bvh.h."""

    _fields_ = [("nodes", ctypes.c_uint64), ("node_uppers", ctypes.c_uint64), ("parents", ctypes.c_uint64),
                ("unused", ctypes.c_uint64), ("order", ctypes.c_uint64), ("max_depth", ctypes.c_int32),
                ("max_nodes", ctypes.c_int32), ("num_nodes", ctypes.c_int32), ("tag", ctypes.c_uint32),
                ("num_items", ctypes.c_int32), ("num_groups", ctypes.c_int32), ("item_lowers", ctypes.c_uint64),
                ("item_uppers", ctypes.c_uint64), ("group_keys", ctypes.c_uint64), ("group_roots", ctypes.c_uint64)]


NODE_DTYPE = np.dtype([("lo", np.float32, 3), ("a", np.int32), ("hi", np.float32, 3), ("b", np.int32)])


class Tree:
    """A built tree over n boxes (NumPy (n, 3) float32 host arrays that stay alive with it) and its descriptor
    on `device` (see common.Handle: on a GPU, device copies of what the host built)."""

    def __init__(self, lowers: np.ndarray, uppers: np.ndarray, groups: np.ndarray | None, constructor: BvhConstructor,
                 leaf_size: int, what: str, device: Any) -> None:
        n = len(lowers)
        self.lowers, self.uppers, self.groups = lowers, uppers, groups
        self.nodes = np.zeros(max(2 * n - 1, 1), dtype=NODE_DTYPE)
        self.parents = np.zeros(len(self.nodes), dtype=np.int32)
        self.order = np.zeros(n, dtype=np.int32)
        self.group_keys = np.zeros(max(n, 1), dtype=np.int32)
        self.group_roots = np.zeros(max(n, 1), dtype=np.int32)
        self.handle = Handle(BvhDesc, device)
        self.desc, self.id = self.handle.desc, self.handle.id
        self.build(constructor, leaf_size, what)

    def build(self, constructor: BvhConstructor, leaf_size: int, what: str) -> None:
        n = len(self.lowers)
        num_groups, depth = ctypes.c_int32(0), ctypes.c_int32(0)
        if n:
            finite_or_raise(self.lowers, f"{what}: lower bounds")
            finite_or_raise(self.uppers, f"{what}: upper bounds")
            count = host_library().lw_bvh_build(
                *(a.ctypes.data for a in (self.lowers, self.uppers)), n,
                None if self.groups is None else self.groups.ctypes.data, int(constructor == BvhConstructor.MEDIAN),
                leaf_size, *(a.ctypes.data for a in (self.nodes, self.parents, self.order, self.group_keys,
                                                     self.group_roots)),
                ctypes.byref(num_groups), ctypes.byref(depth))
        else:
            count = 0
        self.depth = depth.value
        d = self.desc
        d.num_nodes, d.max_nodes, d.num_items, d.num_groups = count, len(self.nodes), n, num_groups.value
        d.max_depth = self.depth
        h = self.handle
        d.order, d.parents = h.address("order", self.order), h.address("parents", self.parents)
        d.group_keys, d.group_roots = h.address("group_keys", self.group_keys), h.address("group_roots",
                                                                                          self.group_roots)
        self._publish()

    def _publish(self) -> None:
        """The nodes and boxes (which refits change) where kernels read them, then the descriptor."""
        d, h = self.desc, self.handle
        d.nodes = h.address("nodes", self.nodes)
        d.node_uppers = d.nodes + NODE_DTYPE.fields["hi"][1]
        d.item_lowers, d.item_uppers = h.address("lowers", self.lowers), h.address("uppers", self.uppers)
        h.publish()

    def refit(self) -> None:
        """Refit every node to the current boxes (the same topology)."""
        if self.desc.num_nodes:
            finite_or_raise(self.lowers, "refit: lower bounds")
            finite_or_raise(self.uppers, "refit: upper bounds")
            host_library().lw_bvh_refit(self.nodes.ctypes.data, self.desc.num_nodes, self.order.ctypes.data,
                                        self.lowers.ctypes.data, self.uppers.ctypes.data)
            self._publish()

    def free(self) -> None:
        self.handle.release()


def groups_or_raise(groups: Any, constructor: BvhConstructor, count: int, what: str, items: str,
                    device: Any) -> Any:
    """`groups` (None, or one int32 group id per item) checked against the item count and the constructor."""
    if groups is None:
        return None
    if constructor == BvhConstructor.CUBQL:
        raise GeometryError(f"Grouped {what} are not supported with constructor='cubql'")
    groups = int32_array(groups, f"{what} groups", device)
    if groups.size != count:
        raise GeometryError(f"{what}: groups has {groups.size} entries for {count} {items}")
    return groups


def leaf_size_or_raise(leaf_size: Any, what: str) -> int:
    if not isinstance(leaf_size, int | np.integer) or leaf_size < 1:
        raise GeometryError(f"{what} must be an int >= 1, got {leaf_size!r}")
    return int(leaf_size)


class Bvh:
    """A bounding volume hierarchy over the boxes [lowers[i], uppers[i]] (wp.vec3 arrays, kept by
    reference: `refit()` after moving them, `rebuild()` after large changes)."""

    def __init__(self, lowers: Any, uppers: Any, constructor: Any = None, groups: Any = None,
                 leaf_size: int = 1) -> None:
        self._tree: Tree | None = None
        lowers = vec3_array(lowers, "Bvh lowers")
        uppers = vec3_array(uppers, "Bvh uppers", lowers.device)
        if len(lowers) != len(uppers):
            raise GeometryError(f"Bvh: lowers and uppers differ in length ({len(lowers)} and {len(uppers)})")
        if lowers.device != uppers.device:
            raise GeometryError(f"Bvh: lowers are on {lowers.device}, uppers on {uppers.device}")
        self.constructor = BvhConstructor.parse(constructor)
        groups = groups_or_raise(groups, self.constructor, len(lowers), "BVHs", "boxes", lowers.device)
        self.leaf_size = leaf_size_or_raise(leaf_size, "Bvh leaf_size")
        self.device = lowers.device
        self.lowers, self.uppers, self.groups = lowers, uppers, groups
        lo, hi = lowers.numpy().reshape(-1, 3), uppers.numpy().reshape(-1, 3)
        if (lo > hi).any():
            bad = int(np.argwhere((lo > hi).any(axis=1))[0, 0])
            raise GeometryError(f"Bvh: box {bad} has lower {lo[bad].tolist()} above upper {hi[bad].tolist()}")
        self._tree = Tree(lo, hi, None if groups is None else groups.numpy().reshape(-1), self.constructor,
                          self.leaf_size, "Bvh", self.device)

    @property
    def id(self) -> int:
        """The handle kernels take as a `wp.uint64`."""
        if self._tree is None:
            raise GeometryError("this Bvh was not built")
        return self._tree.id

    def refit(self) -> None:
        """Refit the tree to the boxes' current values (call after changing lowers / uppers)."""
        self._read_boxes()
        self._tree.refit()

    def rebuild(self, constructor: Any = None) -> None:
        """Rebuild the tree from the boxes' current values, with `constructor` (default: the one it had)."""
        if constructor is not None:
            self.constructor = BvhConstructor.parse(constructor)
        self._read_boxes()
        self._tree.build(self.constructor, self.leaf_size, "Bvh.rebuild")

    def _read_boxes(self) -> None:
        """The tree's host boxes are views of the arrays in host memory; device arrays are copied in again."""
        if not self._tree.handle.on_host:
            np.copyto(self._tree.lowers, self.lowers.numpy().reshape(-1, 3))
            np.copyto(self._tree.uppers, self.uppers.numpy().reshape(-1, 3))

    def __del__(self) -> None:
        tree = getattr(self, "_tree", None)
        if tree is not None:
            tree.free()
            self._tree = None

    def __repr__(self) -> str:
        n = 0 if self._tree is None else self._tree.desc.num_items
        return f"Bvh(boxes={n}, constructor={self.constructor.name.lower()}, device={self.device})"


def query_type(name: str, cname: str, iterate: str) -> type:
    """A value type with bvh.h's `bvh_query_t` layout (mesh face queries share it); `for i in q:` loops over
    what builtin `iterate` yields."""
    return register_value_type(name, cname, [
        ("id", T.uint64), ("owner", T.uint64), ("kind", T.int32), ("count", T.int32), ("leaf_pos", T.int32),
        ("leaf_end", T.int32), ("a", T.vec3f), ("b", T.vec3f), ("rcp", T.vec3f), ("radius", T.float32),
        ("stack", T.vector(BVH_STACK, T.int32))], header=HEADER, iterate=iterate)


bvh_query_t = query_type("bvh_query_t", "lw::bvh_query_t", "bvh_query_next")

register_handle_type(Bvh)
export_name("Bvh", Bvh)
export_name("BvhQuery", bvh_query_t)
export_name("bvh_query_t", bvh_query_t)
U64, V3, F32, I32 = Exact(T.uint64), Exact(T.vec3f), Exact(T.float32), Exact(T.int32)
_ROOT = "; `root` (optional): the node to start from (wp.bvh_get_group_root), -1 for the whole tree"
for _name, _params, _doc in (
        ("bvh_query_aabb", (U64, V3, V3), "bvh_query_aabb(id, low, high): the boxes overlapping [low, high]"),
        ("bvh_query_ray", (U64, V3, V3), "bvh_query_ray(id, start, dir): the boxes the ray hits (t >= 0, t in "
                                         "multiples of |dir| up to bvh_query_next's max_dist)"),
        ("bvh_query_sphere", (U64, V3, F32), "bvh_query_sphere(id, center, radius): the boxes within radius of center"),
        ("bvh_query_capsule", (U64, V3, V3, F32), "bvh_query_capsule(id, start, dir, radius): the boxes the ray "
                                                  "inflated by radius touches (dir = p1 - p0 and max_dist 1 for a "
                                                  "segment)")):
    for _root in ((), (I32,)):
        add_builtin(_name, _params + _root, bvh_query_t, f"lw::{_name}", header=HEADER, group="Geometry",
                    differentiable=False, doc=_doc + _ROOT)
for _extra in ((), (F32,)):
    add_builtin("bvh_query_next", (InOut(bvh_query_t), Out(T.int32), *_extra), T.bool_, "lw::bvh_query_next",
                header=HEADER, group="Geometry", differentiable=False,
                doc="bvh_query_next(query, index, max_dist=inf): the next box's index into `index`; False at the "
                    "end (max_dist bounds ray and capsule queries, in multiples of |dir|)")
add_builtin("bvh_get_group_root", (U64, I32), T.int32, "lw::bvh_get_group_root", header=HEADER, group="Geometry",
            differentiable=False, doc="bvh_get_group_root(id, group): the root node of a group's subtree (-1: none)")


def is_cubql_available() -> bool:
    """Whether the cuBQL BVH builder is there: never here ("cubql" builds with SAH on host memory)."""
    return False


export_name("is_cubql_available", is_cubql_available)
