// loomwork.geometry host library: BVH construction (binned SAH or centroid median, on the runtime's
// thread pool), refits, and the per-mesh data its queries read (triangle bounds, winding-number moments).
// Built on first use like loomwork.utils; Python owns every buffer, these routines only fill them.
// The node layout is bvh.h's (flat, device-neutral): keep the two in step.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <vector>

typedef void (*lw_range_fn)(const void* blob, long long begin, long long end);
typedef void (*lw_parallel_for_fn)(lw_range_fn fn, const void* blob, long long n, long long grain);
typedef int (*lw_threads_fn)();

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

lw_parallel_for_fn g_parallel_for = nullptr;
lw_threads_fn g_threads_fn = nullptr;  // the pool size now (wp.config.cpu_threads may change it)

int threads() { return g_threads_fn ? g_threads_fn() : 1; }

template <typename F> void tramp(const void* blob, long long b, long long e) { (*(const F*)blob)(b, e); }

template <typename F> void parallel_for(long long n, long long grain, const F& f) {
    if (g_parallel_for == nullptr || n <= grain) {
        f(0LL, n);
        return;
    }
    g_parallel_for(&tramp<F>, &f, n, grain);
}

// bvh.h's bvh_node_t: an inner node's children are `a` and `b`; a leaf holds items [a, a - b - 1)...
// encoded as b = -count (so b < 0 marks a leaf) and a = the first slot in the item order.
struct Node {
    float lo[3];
    int32_t a;
    float hi[3];
    int32_t b;
};

// Levels below a group's root (the whole tree without groups): bvh.h's traversal stacks hold these plus
// the levels of up to 2^31 groups above them.
const int kMaxDepth = 31;
const int kBins = 32;

// plain comparisons: fminf/fmaxf are library calls (NaN rules) and inputs are checked finite
inline float fmin_(float a, float b) { return a < b ? a : b; }
inline float fmax_(float a, float b) { return a > b ? a : b; }

struct Box {
    float lo[3], hi[3];
    void clear() {
        for (int k = 0; k < 3; ++k) lo[k] = INFINITY, hi[k] = -INFINITY;
    }
    void grow(const float* l, const float* h) {
        for (int k = 0; k < 3; ++k) lo[k] = fmin_(lo[k], l[k]), hi[k] = fmax_(hi[k], h[k]);
    }
    void grow(const Box& o) { grow(o.lo, o.hi); }
    float area() const {
        float d[3];
        for (int k = 0; k < 3; ++k) d[k] = fmax_(hi[k] - lo[k], 0.0f);
        return d[0] * d[1] + d[1] * d[2] + d[2] * d[0];
    }
};

// An item while building: its box and index, partitioned in place (one cache line holds two).
struct Prim {
    float lo[3];
    int32_t id;
    float hi[3];
    int32_t pad;
    float c(int k) const { return lo[k] + hi[k]; }  // twice the centroid: only comparisons need it
};

struct Builder {
    std::vector<Prim> prims;
    Node* nodes;              // 2n - 1 slots; a range [s, e) rooted at slot p fills slots [p, p + 2(e - s) - 1)
    const int32_t* group_of;  // per item, for grouped trees (null: one group)
    int leaf_size;
    bool sah;
    int32_t* group_roots;  // per group, in sorted order: the slot of its subtree's root

    void bounds(int s, int e, Box& box, Box& cbox) const {
        box.clear();
        cbox.clear();
        for (int i = s; i < e; ++i) {
            const Prim& p = prims[i];
            box.grow(p.lo, p.hi);
            float c[3] = {p.c(0), p.c(1), p.c(2)};
            cbox.grow(c, c);
        }
    }

    // Move the items with key(p) true to the front of [s, e); their centroid bounds into cl, the rest's into cr.
    template <typename K> int partition(int s, int e, const K& key, Box& cl, Box& cr) {
        cl.clear();
        cr.clear();
        int i = s, j = e - 1;
        while (i <= j) {
            float c[3] = {prims[i].c(0), prims[i].c(1), prims[i].c(2)};
            if (key(prims[i])) {
                cl.grow(c, c);
                ++i;
            } else {
                cr.grow(c, c);
                std::swap(prims[i], prims[j--]);
            }
        }
        return i;
    }

    // Split [s, e) (box and centroid bounds given): the partition point, with the children's bounds, or s
    // for a leaf.
    int split(int s, int e, int depth, const Box& cbox, int group_begin, int group_end, Box child[2],
              Box ccen[2]) {
        int n = e - s;
        if (group_of != nullptr && group_end - group_begin > 1) {
            // one group per subtree: split between groups, half of the groups on each side
            int32_t key = group_keys[(group_begin + group_end) / 2];
            int m = (int)(std::lower_bound(prims.begin() + s, prims.begin() + e, key,
                                           [&](const Prim& p, int32_t k) { return group_of[p.id] < k; }) -
                          prims.begin());
            bounds(s, m, child[0], ccen[0]);
            bounds(m, e, child[1], ccen[1]);
            return m;
        }
        if (n <= leaf_size) return s;
        int axis = 0;
        float ext[3];
        for (int k = 0; k < 3; ++k) ext[k] = cbox.hi[k] - cbox.lo[k];
        if (ext[1] > ext[axis]) axis = 1;
        if (ext[2] > ext[axis]) axis = 2;
        // deep trees (skewed inputs) fall back to count medians, which halve the range each level
        int need = 0;
        for (int m = n; m > leaf_size; m = (m + 1) / 2) ++need;
        if (sah && depth + need < kMaxDepth && ext[axis] > 0.0f && n > 2) {
            int m = binned_sah(s, e, cbox, child, ccen);
            if (m > s && m < e) return m;
        }
        int mid = s + n / 2;
        if (ext[axis] > 0.0f)
            std::nth_element(prims.begin() + s, prims.begin() + mid, prims.begin() + e,
                             [&](const Prim& x, const Prim& y) { return x.c(axis) < y.c(axis); });
        bounds(s, mid, child[0], ccen[0]);
        bounds(mid, e, child[1], ccen[1]);
        return mid;
    }

    int binned_sah(int s, int e, const Box& cbox, Box child[2], Box ccen[2]) {
        // small ranges get fewer bins: the sweeps below cost as much as the items otherwise
        const int nb = std::min(kBins, std::max(4, e - s));
        Box bins[3][kBins];
        int counts[3][kBins] = {{0}};
        float lo[3], scale[3];
        for (int k = 0; k < 3; ++k) {
            float ext = cbox.hi[k] - cbox.lo[k];
            lo[k] = cbox.lo[k];
            scale[k] = ext > 0.0f ? nb / ext : 0.0f;
            for (int b = 0; b < nb; ++b) bins[k][b].clear();
        }
        for (int i = s; i < e; ++i) {  // one pass over the items bins them along all three axes
            const Prim& p = prims[i];
            for (int k = 0; k < 3; ++k) {
                int b = std::min(nb - 1, (int)((p.c(k) - lo[k]) * scale[k]));
                counts[k][b]++;
                bins[k][b].grow(p.lo, p.hi);
            }
        }
        float best_cost = INFINITY;
        int best_axis = -1, best_bin = 0;
        for (int k = 0; k < 3; ++k) {
            if (!(scale[k] > 0.0f)) continue;
            float right_area[kBins];
            int right_count[kBins];
            Box acc;
            acc.clear();
            int cnt = 0;
            for (int b = nb - 1; b > 0; --b) {
                acc.grow(bins[k][b]);
                cnt += counts[k][b];
                right_area[b] = acc.area();
                right_count[b] = cnt;
            }
            acc.clear();
            cnt = 0;
            for (int b = 0; b < nb - 1; ++b) {
                acc.grow(bins[k][b]);
                cnt += counts[k][b];
                if (cnt == 0 || right_count[b + 1] == 0) continue;
                float cost = acc.area() * cnt + right_area[b + 1] * right_count[b + 1];
                if (cost < best_cost) best_cost = cost, best_axis = k, best_bin = b;
            }
        }
        if (best_axis < 0) return s;
        child[0].clear();
        child[1].clear();
        for (int b = 0; b < nb; ++b) child[b > best_bin].grow(bins[best_axis][b]);
        const int k = best_axis;
        return partition(s, e, [&](const Prim& p) {
            return std::min(nb - 1, (int)((p.c(k) - lo[k]) * scale[k])) <= best_bin;
        }, ccen[0], ccen[1]);
    }

    // group keys in sorted order, for grouped builds: filled by the caller
    std::vector<int32_t> group_keys;
    std::vector<int32_t> group_starts;  // the first position of each group
    int group_index_of_pos(int pos) const {
        return (int)(std::upper_bound(group_starts.begin(), group_starts.end(), pos) - group_starts.begin()) - 1;
    }

    struct Task {
        int s, e, slot, depth;
        Box box, cbox;
    };

    // Build [s, e) (its box and centroid bounds given) into its slots; ranges of at most `spawn_above` items
    // are handed back as tasks instead.
    void build(int s, int e, int slot, int depth, const Box& box, const Box& cbox, int spawn_above,
               std::vector<Task>* spawned, int& max_depth) {
        Node& nd = nodes[slot];
        for (int k = 0; k < 3; ++k) nd.lo[k] = box.lo[k], nd.hi[k] = box.hi[k];
        int g0 = 0, g1 = 1;
        if (group_of != nullptr) {
            g0 = group_index_of_pos(s);
            g1 = group_index_of_pos(e - 1) + 1;
            if (g1 - g0 == 1 && group_roots[g0] < 0) {  // the shallowest node of one group: its root
                group_roots[g0] = slot;
                depth = 0;  // depths count from a group's root
            }
        }
        if (depth > max_depth) max_depth = depth;
        Box child[2], ccen[2];
        int m = split(s, e, depth, cbox, g0, g1, child, ccen);
        if (m <= s || m >= e) {
            nd.a = s;
            nd.b = -(e - s);
            return;
        }
        nd.a = slot + 1;
        nd.b = slot + 2 * (m - s);
        for (int part = 0; part < 2; ++part) {
            int cs = part ? m : s, ce = part ? e : m, cslot = part ? nd.b : nd.a;
            if (spawned != nullptr && ce - cs <= spawn_above)
                spawned->push_back({cs, ce, cslot, depth + 1, child[part], ccen[part]});
            else
                build(cs, ce, cslot, depth + 1, child[part], ccen[part], spawn_above, spawned, max_depth);
        }
    }
};

// Renumber the used slots in increasing order (parents stay before their children) and drop the holes;
// `index` receives each slot's new number, `parents` each node's parent (-1 for the root).
int compact(Node* nodes, int slots, const std::vector<uint8_t>& used, std::vector<int32_t>& index, int32_t* parents) {
    index.assign(slots, -1);
    int count = 0;
    for (int i = 0; i < slots; ++i)
        if (used[i]) index[i] = count++;
    parents[0] = -1;
    for (int i = 0; i < slots; ++i) {
        if (!used[i]) continue;
        Node nd = nodes[i];
        if (nd.b >= 0) {
            nd.a = index[nd.a], nd.b = index[nd.b];
            parents[nd.a] = parents[nd.b] = index[i];
        }
        nodes[index[i]] = nd;
    }
    return count;
}

void mark_used(const Node* nodes, int root, std::vector<uint8_t>& used) {
    std::vector<int> stack{root};
    while (!stack.empty()) {
        int i = stack.back();
        stack.pop_back();
        used[i] = 1;
        if (nodes[i].b >= 0) stack.push_back(nodes[i].a), stack.push_back(nodes[i].b);
    }
}

}  // namespace

EXPORT void lw_geometry_init(lw_parallel_for_fn pf, lw_threads_fn threads_) {
    g_parallel_for = pf;
    g_threads_fn = threads_;
}

// Build a tree over n > 0 boxes into `nodes` (2n - 1 slots), `parents` (as many) and `order` (n items: the
// leaf order).
// groups (null: none) assigns each box a group; group_keys / group_roots (n entries) receive the sorted
// distinct keys and their subtrees' roots, num_groups their count. Returns the node count; max_depth is set to
// the most levels below a group's root (at most kMaxDepth).
EXPORT int lw_bvh_build(const float* lowers, const float* uppers, int n, const int32_t* groups, int median,
                        int leaf_size, void* nodes_out, int32_t* parents, int32_t* order, int32_t* group_keys, int32_t* group_roots,
                        int32_t* num_groups, int32_t* max_depth_out) {
    Builder bd;
    bd.nodes = (Node*)nodes_out;
    bd.group_of = groups;
    bd.leaf_size = leaf_size < 1 ? 1 : leaf_size;
    bd.sah = !median;
    bd.group_roots = group_roots;
    bd.prims.resize(n);
    parallel_for(n, 4096, [&](long long b, long long e) {
        for (long long i = b; i < e; ++i) {
            Prim& p = bd.prims[i];
            for (int k = 0; k < 3; ++k) p.lo[k] = lowers[3 * i + k], p.hi[k] = uppers[3 * i + k];
            p.id = (int32_t)i;
        }
    });
    *num_groups = 0;
    if (groups != nullptr) {
        std::stable_sort(bd.prims.begin(), bd.prims.end(),
                         [&](const Prim& x, const Prim& y) { return groups[x.id] < groups[y.id]; });
        for (int i = 0; i < n; ++i)
            if (i == 0 || groups[bd.prims[i].id] != groups[bd.prims[i - 1].id]) {
                bd.group_keys.push_back(groups[bd.prims[i].id]);
                bd.group_starts.push_back(i);
            }
        *num_groups = (int32_t)bd.group_keys.size();
        for (size_t g = 0; g < bd.group_keys.size(); ++g) group_keys[g] = bd.group_keys[g], group_roots[g] = -1;
    }
    // the top of the tree on this thread, then its subtrees in parallel (each fills its own slot range)
    int depth_top = 0;
    std::vector<Builder::Task> tasks;
    int t = threads();
    int spawn_above = t > 1 && n > 4096 ? std::max(1024, n / (8 * t)) : n;
    Box box, cbox;
    bd.bounds(0, n, box, cbox);
    bd.build(0, n, 0, 0, box, cbox, spawn_above, spawn_above >= n ? nullptr : &tasks, depth_top);
    std::vector<int> depths(tasks.size(), 0);
    parallel_for((long long)tasks.size(), 1, [&](long long b, long long e) {
        for (long long t = b; t < e; ++t) {
            const Builder::Task& k = tasks[t];
            bd.build(k.s, k.e, k.slot, k.depth, k.box, k.cbox, n, nullptr, depths[t]);
        }
    });
    int max_depth = depth_top;
    for (int d : depths) max_depth = std::max(max_depth, d);
    *max_depth_out = max_depth;
    int slots = 2 * n - 1;
    std::vector<uint8_t> used(slots, 0);
    mark_used(bd.nodes, 0, used);
    std::vector<int32_t> index;
    int count = compact(bd.nodes, slots, used, index, parents);
    for (int32_t g = 0; g < *num_groups; ++g) group_roots[g] = group_roots[g] >= 0 ? index[group_roots[g]] : -1;
    for (int i = 0; i < n; ++i) order[i] = bd.prims[i].id;
    return count;
}

// Refit every node to the current item boxes (children come after their parents: sweep backwards).
EXPORT void lw_bvh_refit(void* nodes_, int num_nodes, const int32_t* order, const float* lowers,
                         const float* uppers) {
    Node* nodes = (Node*)nodes_;
    for (int i = num_nodes - 1; i >= 0; --i) {
        Node& nd = nodes[i];
        Box box;
        box.clear();
        if (nd.b < 0) {
            for (int j = nd.a; j < nd.a - nd.b; ++j) box.grow(lowers + 3 * (size_t)order[j], uppers + 3 * (size_t)order[j]);
        } else {
            box.grow(nodes[nd.a].lo, nodes[nd.a].hi);
            box.grow(nodes[nd.b].lo, nodes[nd.b].hi);
        }
        for (int k = 0; k < 3; ++k) nd.lo[k] = box.lo[k], nd.hi[k] = box.hi[k];
    }
}

// The bounds of each triangle (lowers/uppers: 3 floats per triangle) and its perimeter.
EXPORT void lw_triangle_bounds(const float* points, const int32_t* indices, int num_tris, float* lowers,
                               float* uppers, float* perimeters) {
    parallel_for(num_tris, 4096, [&](long long b, long long e) {
        for (long long t = b; t < e; ++t) {
            const float* p[3] = {points + 3 * (size_t)indices[3 * t], points + 3 * (size_t)indices[3 * t + 1],
                                 points + 3 * (size_t)indices[3 * t + 2]};
            float len = 0.0f;
            for (int v = 0; v < 3; ++v) {
                float d2 = 0.0f;
                for (int k = 0; k < 3; ++k) d2 += (p[(v + 1) % 3][k] - p[v][k]) * (p[(v + 1) % 3][k] - p[v][k]);
                len += sqrtf(d2);
            }
            perimeters[t] = len;
            for (int k = 0; k < 3; ++k) {
                lowers[3 * t + k] = fmin_(p[0][k], fmin_(p[1][k], p[2][k]));
                uppers[3 * t + k] = fmax_(p[0][k], fmax_(p[1][k], p[2][k]));
            }
        }
    });
}

// Per node, the moments the fast winding number approximates a subtree with (Barill et al. 2018):
// the area-weighted centroid, the sum of area-weighted normals (dipole), the second-order term
// (sum of area * (centroid_t - centroid) outer normal_t, 9 floats) and the radius that bounds every
// triangle vertex of the subtree around the centroid. `moments` holds 16 floats per node.
EXPORT void lw_winding_moments(const void* nodes_, int num_nodes, const int32_t* order, const float* points,
                               const int32_t* indices, float* moments) {
    const Node* nodes = (const Node*)nodes_;
    std::vector<double> area(num_nodes), cen(3 * (size_t)num_nodes);
    auto tri = [&](int32_t t, int v) { return points + 3 * (size_t)indices[3 * t + v]; };
    auto tri_data = [&](int32_t t, double* c, double* an, double& a) {
        const float *p0 = tri(t, 0), *p1 = tri(t, 1), *p2 = tri(t, 2);
        double e1[3], e2[3];
        for (int k = 0; k < 3; ++k) e1[k] = p1[k] - p0[k], e2[k] = p2[k] - p0[k], c[k] = (p0[k] + p1[k] + p2[k]) / 3.0;
        an[0] = 0.5 * (e1[1] * e2[2] - e1[2] * e2[1]);
        an[1] = 0.5 * (e1[2] * e2[0] - e1[0] * e2[2]);
        an[2] = 0.5 * (e1[0] * e2[1] - e1[1] * e2[0]);
        a = sqrt(an[0] * an[0] + an[1] * an[1] + an[2] * an[2]);
    };
    // bottom-up: areas and area-weighted centroids
    for (int i = num_nodes - 1; i >= 0; --i) {
        const Node& nd = nodes[i];
        double a = 0.0, c[3] = {0, 0, 0};
        if (nd.b < 0) {
            for (int j = nd.a; j < nd.a - nd.b; ++j) {
                double tc[3], an[3], ta;
                tri_data(order[j], tc, an, ta);
                a += ta;
                for (int k = 0; k < 3; ++k) c[k] += ta * tc[k];
            }
        } else {
            for (int ch : {nd.a, nd.b}) {
                a += area[ch];
                for (int k = 0; k < 3; ++k) c[k] += area[ch] * cen[3 * (size_t)ch + k];
            }
        }
        area[i] = a;
        for (int k = 0; k < 3; ++k) cen[3 * (size_t)i + k] = a > 0.0 ? c[k] / a : 0.5 * (nd.lo[k] + nd.hi[k]);
    }
    // per node: its triangles (each node's leaves, found by walking its subtree)
    parallel_for(num_nodes, 256, [&](long long b, long long e) {
        std::vector<int> stack;
        for (long long i = b; i < e; ++i) {
            const double* c = &cen[3 * (size_t)i];
            double n[3] = {0, 0, 0}, m2[9] = {0}, r2 = 0.0;
            stack.assign(1, (int)i);
            while (!stack.empty()) {
                const Node& nd = nodes[stack.back()];
                stack.pop_back();
                if (nd.b >= 0) {
                    stack.push_back(nd.a);
                    stack.push_back(nd.b);
                    continue;
                }
                for (int j = nd.a; j < nd.a - nd.b; ++j) {
                    double tc[3], an[3], ta;
                    tri_data(order[j], tc, an, ta);
                    for (int k = 0; k < 3; ++k) n[k] += an[k];
                    for (int r = 0; r < 3; ++r)
                        for (int q = 0; q < 3; ++q) m2[3 * r + q] += (tc[r] - c[r]) * an[q];
                    for (int v = 0; v < 3; ++v) {
                        const float* p = tri(order[j], v);
                        double d2 = 0.0;
                        for (int k = 0; k < 3; ++k) d2 += (p[k] - c[k]) * (p[k] - c[k]);
                        r2 = std::max(r2, d2);
                    }
                }
            }
            float* out = moments + 16 * (size_t)i;
            for (int k = 0; k < 3; ++k) out[k] = (float)c[k], out[3 + k] = (float)n[k];
            for (int k = 0; k < 9; ++k) out[6 + k] = (float)m2[k];
            out[15] = (float)sqrt(r2);
        }
    });
}

// The corners of triangle order[j] at out[9 j ...]: the leaf-ordered copy mesh.h's leaf loops read.
EXPORT void lw_leaf_corners(const float* points, const int32_t* indices, const int32_t* order, int n, float* out) {
    parallel_for(n, 4096, [&](long long b, long long e) {
        for (long long j = b; j < e; ++j)
            for (int v = 0; v < 3; ++v)
                memcpy(out + 9 * j + 3 * v, points + 3 * (size_t)indices[3 * (size_t)order[j] + v], 3 * sizeof(float));
    });
}

// ---- 4-wide trees for the CPU's ray traversal (mesh.h: bvh4_node_t) ----
// Each 4-wide node takes the place of up to three binary inner nodes: the binary node's children, opened
// largest surface first while fewer than four. Slot k's box is binary node src[k]'s; child[k] is the 4-wide
// node under it, or ~src[k] for a binary leaf. Unused slots have empty boxes (lo > hi), src -1 and child
// INT32_MIN.

namespace {

struct Node4 {
    float lo[3][4], hi[3][4];
    int32_t child[4], src[4];
};

// mesh.h's tri4_block_t: up to four triangles of one leaf (consecutive item positions from `first`) with their
// corners by axis in SIMD lanes; `more`: the leaf goes on in the next block.
struct TriBlock {
    float a[3][4], b[3][4], c[3][4];
    int32_t first, count, more, pad;
};

inline float half_area(const Node& n) {
    float dx = n.hi[0] - n.lo[0], dy = n.hi[1] - n.lo[1], dz = n.hi[2] - n.lo[2];
    return dx * dy + dy * dz + dz * dx;
}

void set_slot(Node4& q, int k, const Node* nodes, int32_t src) {
    for (int c = 0; c < 3; ++c) {
        q.lo[c][k] = src >= 0 ? nodes[src].lo[c] : INFINITY;
        q.hi[c][k] = src >= 0 ? nodes[src].hi[c] : -INFINITY;
    }
    q.src[k] = src;
}

int32_t leaf_blocks(const Node& leaf, TriBlock* blocks, int32_t& nblocks) {
    int32_t start = nblocks;
    for (int32_t j = leaf.a, end = leaf.a - leaf.b; j < end; j += 4) {
        TriBlock& t = blocks[nblocks++];
        t.first = j;
        t.count = end - j < 4 ? end - j : 4;
        t.more = j + 4 < end;
    }
    return start;
}

int32_t collapse(const Node* nodes, int32_t node, Node4* out, int32_t& count, TriBlock* blocks, int32_t& nblocks) {
    int32_t at = count++;
    int32_t kids[4] = {nodes[node].a, nodes[node].b, -1, -1};
    int n = 2;
    while (n < 4) {
        int pick = -1;
        for (int k = 0; k < n; ++k)
            if (nodes[kids[k]].b >= 0 && (pick < 0 || half_area(nodes[kids[k]]) > half_area(nodes[kids[pick]])))
                pick = k;
        if (pick < 0) break;
        int32_t opened = kids[pick];
        kids[pick] = nodes[opened].a;
        kids[n++] = nodes[opened].b;
    }
    for (int k = 0; k < 4; ++k) {
        set_slot(out[at], k, nodes, kids[k]);
        out[at].child[k] = INT32_MIN;
    }
    for (int k = 0; k < n; ++k)
        out[at].child[k] = nodes[kids[k]].b < 0 ? ~leaf_blocks(nodes[kids[k]], blocks, nblocks)
                                                : collapse(nodes, kids[k], out, count, blocks, nblocks);
    return at;
}

}  // namespace

// The 4-wide tree of a binary tree whose root (node 0) is an inner node, into `out` (room for one node per
// binary inner node), its leaves as triangle blocks (room for one per item; `lw_tri_blocks` fills their
// corners); returns its node count (0 when the root is a leaf: traverse the binary tree) and sets *nblocks.
EXPORT int lw_bvh4_collapse(const void* nodes_, int num_nodes, void* out, void* blocks, int32_t* nblocks) {
    const Node* nodes = (const Node*)nodes_;
    *nblocks = 0;
    if (num_nodes < 1 || nodes[0].b < 0) return 0;
    int32_t count = 0;
    collapse(nodes, 0, (Node4*)out, count, (TriBlock*)blocks, *nblocks);
    return count;
}

// The triangle blocks' corners from the leaf-ordered corners (lw_leaf_corners); unused lanes get a
// degenerate triangle at the origin.
EXPORT void lw_tri_blocks(const float* corners, void* blocks_, int nblocks) {
    TriBlock* blocks = (TriBlock*)blocks_;
    parallel_for(nblocks, 4096, [&](long long b, long long e) {
        for (long long i = b; i < e; ++i) {
            TriBlock& t = blocks[i];
            for (int l = 0; l < 4; ++l)
                for (int k = 0; k < 3; ++k) {
                    const float* tri = corners + 9 * (size_t)(t.first + l);
                    bool used = l < t.count;
                    t.a[k][l] = used ? tri[k] : 0.0f;
                    t.b[k][l] = used ? tri[3 + k] : 0.0f;
                    t.c[k][l] = used ? tri[6 + k] : 0.0f;
                }
        }
    });
}

// The 4-wide tree's boxes again from its binary tree's (after a refit of that).
EXPORT void lw_bvh4_refit(const void* nodes_, void* out_, int count) {
    const Node* nodes = (const Node*)nodes_;
    Node4* out = (Node4*)out_;
    for (int i = 0; i < count; ++i)
        for (int k = 0; k < 4; ++k) set_slot(out[i], k, nodes, out[i].src[k]);
}
