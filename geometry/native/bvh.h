// loomwork.geometry: bounding volume hierarchies (wp.Bvh, and the tree under every wp.Mesh). Included
// after loomwork.h by modules that use them. Trees are built on the host (bvh_build.cpp) into a flat node
// array that reads the same on every device: no pointers inside nodes, only indices.
#pragma once

namespace lw {

typedef vec_t<3, float> bvh_vec3;

// One node: an inner node's children are nodes `a` and `b`; a leaf (b < 0) holds the items at positions
// [a, a - b) of the tree's item order.
struct bvh_node_t {
    float lo[3];
    int32_t a;
    float hi[3];
    int32_t b;
};

// Traversal stacks: trees are at most 31 levels deep below a group's root (bvh_build.cpp), with at most
// 31 levels of groups above those roots.
const int BVH_STACK = 64;

// What a Bvh's id points to. Its head reads like Warp's host BVH header, so tools that inspect a tree
// through the id (node bounds, parents, item order, depth, node count) find what they expect.
struct bvh_t {
    uint64_t nodes;        // bvh_node_t* (also where Warp's header has its node lower bounds)
    uint64_t node_uppers;  // nodes + 16 bytes
    uint64_t parents;      // int32_t*: each node's parent, -1 for the root
    uint64_t unused;
    uint64_t order;        // int32_t*: the item at each leaf position
    int32_t max_depth;     // levels below a group's root (the root, without groups)
    int32_t max_nodes;
    int32_t num_nodes;
    uint32_t tag;          // nonzero while the tree is alive
    int32_t num_items;
    int32_t num_groups;
    uint64_t item_lowers;  // bvh_vec3*: each item's box
    uint64_t item_uppers;
    uint64_t group_keys;   // int32_t*: the distinct group ids, sorted
    uint64_t group_roots;  // int32_t*: the root node of each group's subtree
};

// The descriptor an id names, or null for a freed one. Descriptors stay mapped after their objects are
// freed (geometry/common.py), so a stale id reads a cleared tag instead of freed memory.
template <typename D> LW_FUNC const D* handle_get(uint64_t id) {
    const D* d = (const D*)id;
    if (d == 0 || d->tag == 0) return 0;
    return d;
}

LW_FUNC bool bvh_is_leaf(const bvh_node_t& n) { return n.b < 0; }

// min / max for the traversal loops: plain compares (one minss / maxss) without the NaN rule of the kernel
// builtins in loomwork.h, whose extra compare and branch cost a third of a ray's time. A NaN first operand
// gives the second, a NaN second operand itself.
LW_FUNC float bvh_min(float a, float b) { return a < b ? a : b; }
LW_FUNC float bvh_max(float a, float b) { return a > b ? a : b; }

// 1 / d per axis (infinite for a zero component: bvh_slab treats those axes apart)
LW_FUNC bvh_vec3 bvh_safe_rcp(bvh_vec3 d) {
    bvh_vec3 r;
    for (int k = 0; k < 3; ++k) r.c[k] = 1.0f / d.c[k];
    return r;
}

// The ray's parameter interval [tmin, tmax] inside the box [lo - pad, hi + pad] (empty when tmin > tmax).
// An axis the ray runs parallel to admits every t when the origin lies within its slab (faces included),
// none otherwise.
LW_FUNC void bvh_slab(const float* lo, const float* hi, float pad, const bvh_vec3& o, const bvh_vec3& rcp, float& tmin,
                      float& tmax) {
    tmin = -3.0e38f;
    tmax = 3.0e38f;
    for (int k = 0; k < 3; ++k) {
        float a = lo[k] - pad - o.c[k], b = hi[k] + pad - o.c[k], r = rcp.c[k];
        if (r > 3.0e38f || r < -3.0e38f) {
            if (a > 0.0f || b < 0.0f) tmin = 3.0e38f, tmax = -3.0e38f;
            continue;
        }
        float t1 = a * r, t2 = b * r;
        tmin = bvh_max(tmin, bvh_min(t1, t2));
        tmax = bvh_min(tmax, bvh_max(t1, t2));
    }
}

LW_FUNC float bvh_box_dist_sq(const float* lo, const float* hi, const bvh_vec3& p) {
    float d2 = 0.0f;
    for (int k = 0; k < 3; ++k) {
        float d = bvh_max(0.0f, bvh_max(lo[k] - p.c[k], p.c[k] - hi[k]));  // a NaN point stays NaN (culled)
        d2 += d * d;
    }
    return d2;
}

LW_FUNC int32_t bvh_root(const bvh_t& b, int32_t root) {
    return root < 0 ? 0 : (root < b.num_nodes ? root : -1);
}

// The root node of a group's subtree; -1 (the whole tree) when the tree has no such group.
LW_FUNC int32_t bvh_get_group_root(uint64_t id, int32_t group) {
    const bvh_t* b = handle_get<bvh_t>(id);
    if (b == 0 || b->num_groups == 0) return -1;
    const int32_t* keys = (const int32_t*)b->group_keys;
    int32_t lo = 0, hi = b->num_groups;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (keys[mid] < group) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->num_groups && keys[lo] == group ? ((const int32_t*)b->group_roots)[lo] : -1;
}

// ---------------------------------------------------------------------------------------------
// iterator queries: wp.bvh_query_aabb / ray / sphere / capsule, then `while wp.bvh_query_next(q, i):`

enum { BVH_QUERY_AABB = 0, BVH_QUERY_RAY = 1, BVH_QUERY_SPHERE = 2, BVH_QUERY_CAPSULE = 3 };

struct bvh_query_t {
    uint64_t id;
    uint64_t owner;              // the mesh of a mesh face query (0: a plain tree query)
    int32_t kind;
    int32_t count;               // entries on the stack
    int32_t leaf_pos, leaf_end;  // the items of the current leaf not visited yet
    bvh_vec3 a, b;               // box lower/upper, or ray/capsule origin and direction, or sphere center
    bvh_vec3 rcp;                // 1 / direction
    float radius;
    int32_t stack[BVH_STACK];
};

// What a mesh's face query iterates with (the same traversal over the mesh's tree of triangle boxes).
struct mesh_query_aabb_t : bvh_query_t {};

LW_FUNC bvh_query_t bvh_query_start(uint64_t id, int32_t kind, bvh_vec3 a, bvh_vec3 b, float radius, int32_t root) {
    bvh_query_t q;
    q.id = id;
    q.owner = 0;
    q.kind = kind;
    q.count = 0;
    q.leaf_pos = q.leaf_end = 0;
    q.a = a;
    q.b = b;
    q.rcp = bvh_safe_rcp(b);
    q.radius = radius > 0.0f ? radius : 0.0f;
    const bvh_t* t = handle_get<bvh_t>(id);
    if (t != 0 && t->num_nodes > 0) {
        int32_t r = bvh_root(*t, root);
        if (r >= 0) q.stack[q.count++] = r;
    }
    return q;
}

LW_FUNC bvh_query_t bvh_query_aabb(uint64_t id, bvh_vec3 lo, bvh_vec3 hi, int32_t root) {
    return bvh_query_start(id, BVH_QUERY_AABB, lo, hi, 0.0f, root);
}
LW_FUNC bvh_query_t bvh_query_aabb(uint64_t id, bvh_vec3 lo, bvh_vec3 hi) { return bvh_query_aabb(id, lo, hi, -1); }
LW_FUNC bvh_query_t bvh_query_ray(uint64_t id, bvh_vec3 start, bvh_vec3 dir, int32_t root) {
    return bvh_query_start(id, BVH_QUERY_RAY, start, dir, 0.0f, root);
}
LW_FUNC bvh_query_t bvh_query_ray(uint64_t id, bvh_vec3 start, bvh_vec3 dir) { return bvh_query_ray(id, start, dir, -1); }
LW_FUNC bvh_query_t bvh_query_sphere(uint64_t id, bvh_vec3 center, float radius, int32_t root) {
    return bvh_query_start(id, BVH_QUERY_SPHERE, center, center, radius, root);
}
LW_FUNC bvh_query_t bvh_query_sphere(uint64_t id, bvh_vec3 center, float radius) {
    return bvh_query_sphere(id, center, radius, -1);
}
LW_FUNC bvh_query_t bvh_query_capsule(uint64_t id, bvh_vec3 start, bvh_vec3 dir, float radius, int32_t root) {
    return bvh_query_start(id, BVH_QUERY_CAPSULE, start, dir, radius, root);
}
LW_FUNC bvh_query_t bvh_query_capsule(uint64_t id, bvh_vec3 start, bvh_vec3 dir, float radius) {
    return bvh_query_capsule(id, start, dir, radius, -1);
}

// Whether the query's shape touches the box [lo, hi] (rays and capsules: within [0, max_dist] along them).
LW_FUNC bool bvh_query_overlaps(const bvh_query_t& q, const float* lo, const float* hi, float max_dist) {
    switch (q.kind) {
        case BVH_QUERY_AABB:
            for (int k = 0; k < 3; ++k)
                if (lo[k] > q.b.c[k] || hi[k] < q.a.c[k]) return false;
            return true;
        case BVH_QUERY_SPHERE:
            return bvh_box_dist_sq(lo, hi, q.a) <= q.radius * q.radius;
        default: {
            float tmin, tmax;
            bvh_slab(lo, hi, q.radius, q.a, q.rcp, tmin, tmax);
            if (q.kind == BVH_QUERY_RAY) return tmax >= 0.0f && tmax >= tmin && tmin <= max_dist;
            return bvh_max(tmin, 0.0f) <= bvh_min(tmax, max_dist);
        }
    }
}

// The next item of the tree whose box the query touches: its index into the boxes the tree was built
// from. False when none is left (index is left alone).
LW_FUNC bool bvh_query_next(bvh_query_t& q, int32_t& index, float max_dist) {
    const bvh_t* t = handle_get<bvh_t>(q.id);
    if (t == 0) return false;
    const bvh_node_t* nodes = (const bvh_node_t*)t->nodes;
    const int32_t* order = (const int32_t*)t->order;
    const float* lowers = (const float*)t->item_lowers;
    const float* uppers = (const float*)t->item_uppers;
    for (;;) {
        while (q.leaf_pos < q.leaf_end) {
            int32_t item = order[q.leaf_pos++];
            if (bvh_query_overlaps(q, lowers + 3 * item, uppers + 3 * item, max_dist)) {
                index = item;
                return true;
            }
        }
        if (q.count == 0) return false;
        const bvh_node_t& n = nodes[q.stack[--q.count]];
        if (!bvh_query_overlaps(q, n.lo, n.hi, max_dist)) continue;
        if (bvh_is_leaf(n)) {
            q.leaf_pos = n.a;
            q.leaf_end = n.a - n.b;
        } else {
            q.stack[q.count++] = n.b;
            q.stack[q.count++] = n.a;
        }
    }
}
LW_FUNC bool bvh_query_next(bvh_query_t& q, int32_t& index) { return bvh_query_next(q, index, 3.0e38f); }

// block queries (wp.tile_bvh_query_aabb / _ray, then `while wp.tile_query_valid(q): wp.tile_bvh_query_next(q)`):
// a block of one lane (the CPU's) takes one result a step; `valid` turns 0 after a step that found none
struct bvh_query_tiled_t {
    bvh_query_t q;
    int32_t valid;
};
LW_FUNC bvh_query_tiled_t tile_bvh_query_aabb(uint64_t id, bvh_vec3 lo, bvh_vec3 hi) {
    return bvh_query_tiled_t{bvh_query_aabb(id, lo, hi), 1};
}
LW_FUNC bvh_query_tiled_t tile_bvh_query_ray(uint64_t id, bvh_vec3 start, bvh_vec3 dir) {
    return bvh_query_tiled_t{bvh_query_ray(id, start, dir), 1};
}
LW_FUNC tile_t<int32_t, 1, 1> tile_bvh_query_next(bvh_query_tiled_t& q) {
    tile_t<int32_t, 1, 1> r;
    int32_t i = -1;
    if (!(q.valid && bvh_query_next(q.q, i))) {
        i = -1;
        q.valid = 0;
    }
    r.c[0] = i;
    return r;
}
LW_FUNC bool tile_query_valid(const bvh_query_tiled_t& q) { return q.valid != 0; }

}  // namespace lw
