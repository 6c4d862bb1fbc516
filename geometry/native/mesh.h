// loomwork.geometry: triangle mesh queries (wp.Mesh): closest and furthest points with inside/outside
// signs, rays, face boxes, and evaluation on faces. Included after loomwork.h by modules that use them.
#pragma once

#include "bvh.h"

namespace lw {

// What a Mesh's id points to (below the generation in its top 16 bits).
struct mesh_t {
    uint32_t tag;
    int32_t num_points;
    int32_t num_tris;
    int32_t has_winding;      // moments are there (support_winding_number)
    uint64_t bvh;             // the id of the tree over the triangles' boxes
    uint64_t points;          // bvh_vec3*
    uint64_t velocities;      // bvh_vec3* or 0
    uint64_t indices;         // int32_t*, 3 per triangle
    uint64_t moments;         // float*, 16 per tree node (bvh_build.cpp: lw_winding_moments)
    uint64_t points_grad;     // bvh_vec3* or 0: where gradients of points read through the mesh go
    uint64_t velocities_grad; // bvh_vec3* or 0: the same for velocities
    uint64_t leaf_corners;    // bvh_vec3*, 3 per tree item position: the corners of triangle order[j], stored in
                              // leaf order so that a leaf's triangles are read from one place
    float avg_edge;           // mean edge length (the sign_normal epsilon is relative to it)
    int32_t pad;
    uint64_t nodes4;          // bvh4_node_t* or 0: the tree 4 wide, for CPU rays (host memory only)
    uint64_t tri_blocks;      // tri4_block_t*: the 4-wide tree's leaves (with nodes4)
};

struct mesh_query_point_t {
    bool result;
    float sign;
    int32_t face;
    float u, v;
};

struct mesh_query_ray_t {
    bool result;
    float sign;
    int32_t face;
    float t, u, v;
    bvh_vec3 normal;
};

// Adjoints of query results add up field by field (the float fields; result and face carry none).
LW_FUNC mesh_query_point_t add(const mesh_query_point_t& a, const mesh_query_point_t& b) {
    mesh_query_point_t r = a;
    r.sign += b.sign;
    r.u += b.u;
    r.v += b.v;
    return r;
}
LW_FUNC mesh_query_ray_t add(const mesh_query_ray_t& a, const mesh_query_ray_t& b) {
    mesh_query_ray_t r = a;
    r.sign += b.sign;
    r.t += b.t;
    r.u += b.u;
    r.v += b.v;
    r.normal = add(a.normal, b.normal);
    return r;
}

LW_FUNC bvh_vec3 mesh_v3(float x, float y, float z) {
    bvh_vec3 r;
    r.c[0] = x;
    r.c[1] = y;
    r.c[2] = z;
    return r;
}

struct mesh_view {
    const mesh_t* m;
    const bvh_t* t;
    const bvh_vec3* points;
    const int32_t* indices;
};

// The mesh and its tree an id names; false for a freed or empty mesh.
LW_FUNC bool mesh_open(uint64_t id, mesh_view& v) {
    v.m = handle_get<mesh_t>(id);
    if (v.m == 0) return false;
    v.t = handle_get<bvh_t>(v.m->bvh);
    v.points = (const bvh_vec3*)v.m->points;
    v.indices = (const int32_t*)v.m->indices;
    return v.t != 0 && v.t->num_nodes > 0;
}

LW_FUNC void mesh_tri(const mesh_view& v, int32_t f, bvh_vec3& a, bvh_vec3& b, bvh_vec3& c) {
    a = v.points[v.indices[3 * f]];
    b = v.points[v.indices[3 * f + 1]];
    c = v.points[v.indices[3 * f + 2]];
}

// The corners of the triangle at tree item position j (that is, of face order[j]).
LW_FUNC void mesh_tri_at(const mesh_view& v, int32_t j, bvh_vec3& a, bvh_vec3& b, bvh_vec3& c) {
    const bvh_vec3* t = (const bvh_vec3*)v.m->leaf_corners + 3 * j;
    a = t[0];
    b = t[1];
    c = t[2];
}

// ---------------------------------------------------------------------------------------------
// closest and furthest points

// Which feature of a triangle a closest point lies on (its gradient differs on each).
enum { TRI_FACE = 0, TRI_EDGE_AB = 1, TRI_EDGE_BC = 2, TRI_EDGE_CA = 3, TRI_A = 4, TRI_B = 5, TRI_C = 6 };

// The point of triangle abc closest to p as weights (wa, wb) of a and b (c gets 1 - wa - wb), and its feature.
LW_FUNC int tri_closest(bvh_vec3 a, bvh_vec3 b, bvh_vec3 c, bvh_vec3 p, float& wa, float& wb) {
    bvh_vec3 ab = sub(b, a), ac = sub(c, a), ap = sub(p, a);
    float d1 = dot(ab, ap), d2 = dot(ac, ap);
    if (d1 <= 0.0f && d2 <= 0.0f) { wa = 1.0f; wb = 0.0f; return TRI_A; }
    bvh_vec3 bp = sub(p, b);
    float d3 = dot(ab, bp), d4 = dot(ac, bp);
    if (d3 >= 0.0f && d4 <= d3) { wa = 0.0f; wb = 1.0f; return TRI_B; }
    float vc = d1 * d4 - d3 * d2;
    if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) {
        float s = d1 / (d1 - d3);
        wa = 1.0f - s; wb = s; return TRI_EDGE_AB;
    }
    bvh_vec3 cp = sub(p, c);
    float d5 = dot(ab, cp), d6 = dot(ac, cp);
    if (d6 >= 0.0f && d5 <= d6) { wa = 0.0f; wb = 0.0f; return TRI_C; }
    float vb = d5 * d2 - d1 * d6;
    if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) {
        float s = d2 / (d2 - d6);
        wa = 1.0f - s; wb = 0.0f; return TRI_EDGE_CA;
    }
    float va = d3 * d6 - d5 * d4;
    if (va <= 0.0f && (d4 - d3) >= 0.0f && (d5 - d6) >= 0.0f) {
        float s = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        wa = 0.0f; wb = 1.0f - s; return TRI_EDGE_BC;
    }
    float den = 1.0f / (va + vb + vc);
    float sv = vb * den, sw = vc * den;
    wa = 1.0f - sv - sw; wb = sv; return TRI_FACE;
}

// Triangles whose area is negligible next to their longest edge take no part in point queries.
LW_FUNC bool tri_degenerate(bvh_vec3 a, bvh_vec3 b, bvh_vec3 c) {
    bvh_vec3 ab = sub(b, a), ac = sub(c, a), bc = sub(c, b);
    float e2 = max(max(dot(ab, ab), dot(ac, ac)), dot(bc, bc));
    float n2 = length_sq(cross(ab, ac));
    return !(n2 > 1e-12f * e2 * e2);
}

LW_FUNC bvh_vec3 tri_point(bvh_vec3 a, bvh_vec3 b, bvh_vec3 c, float wa, float wb) {
    return add(add(mul(a, wa), mul(b, wb)), mul(c, 1.0f - wa - wb));
}

// The face nearest p strictly within max_dist, with the barycentric weights of its closest point.
// The triangles of binary leaf n against point p: one closer than sqrt(best) updates best and the result.
LW_FUNC bool mesh_closest_leaf(const mesh_view& v, const bvh_node_t& n, bvh_vec3 p, float& best, int32_t& face,
                               float& u, float& w, int& feature) {
    const int32_t* order = (const int32_t*)v.t->order;
    bool found = false;
    for (int32_t j = n.a; j < n.a - n.b; ++j) {
        bvh_vec3 a, b, c;
        mesh_tri_at(v, j, a, b, c);
        if (tri_degenerate(a, b, c)) continue;
        float wa, wb;
        int feat = tri_closest(a, b, c, p, wa, wb);
        float d2 = length_sq(sub(p, tri_point(a, b, c, wa, wb)));
        if (d2 < best) {
            best = d2;
            face = order[j];
            u = wa;
            w = wb;
            feature = feat;
            found = true;
        }
    }
    return found;
}

LW_FUNC bool mesh_closest(const mesh_view& v, bvh_vec3 p, float max_dist, int32_t& face, float& u, float& w,
                          int& feature) {
    const bvh_node_t* nodes = (const bvh_node_t*)v.t->nodes;
    float best = max_dist >= 1.8e19f ? 3.0e38f : max_dist * max_dist;
    bool found = false;
    int32_t stack[BVH_STACK];
    float dist[BVH_STACK];
    int count = 1;
    stack[0] = 0;
    dist[0] = bvh_box_dist_sq(nodes[0].lo, nodes[0].hi, p);
    while (count > 0) {
        --count;
        if (dist[count] >= best) continue;
        const bvh_node_t& n = nodes[stack[count]];
        if (bvh_is_leaf(n)) {
            found |= mesh_closest_leaf(v, n, p, best, face, u, w, feature);
            continue;
        }
        float da = bvh_box_dist_sq(nodes[n.a].lo, nodes[n.a].hi, p);
        float db = bvh_box_dist_sq(nodes[n.b].lo, nodes[n.b].hi, p);
        int32_t near_node = n.a, far_node = n.b;
        if (db < da) {
            float t = da; da = db; db = t;
            near_node = n.b; far_node = n.a;
        }
        if (db < best) { stack[count] = far_node; dist[count++] = db; }
        if (da < best) { stack[count] = near_node; dist[count++] = da; }
    }
    return found;
}

LW_FUNC float bvh_box_far_dist_sq(const float* lo, const float* hi, const bvh_vec3& p) {
    float d2 = 0.0f;
    for (int k = 0; k < 3; ++k) {
        float d = max(abs(p.c[k] - lo[k]), abs(hi[k] - p.c[k]));
        d2 += d * d;
    }
    return d2;
}

// The face with the point farthest from p, strictly beyond min_dist (that point is one of its vertices).
LW_FUNC bool mesh_furthest(const mesh_view& v, bvh_vec3 p, float min_dist, int32_t& face, float& u, float& w) {
    const bvh_node_t* nodes = (const bvh_node_t*)v.t->nodes;
    const int32_t* order = (const int32_t*)v.t->order;
    float best = min_dist > 0.0f ? min_dist * min_dist : -1.0f;
    bool found = false;
    int32_t stack[BVH_STACK];
    int count = 1;
    stack[0] = 0;
    while (count > 0) {
        const bvh_node_t& n = nodes[stack[--count]];
        if (bvh_box_far_dist_sq(n.lo, n.hi, p) <= best) continue;
        if (!bvh_is_leaf(n)) {
            stack[count++] = n.a;
            stack[count++] = n.b;
            continue;
        }
        for (int32_t j = n.a; j < n.a - n.b; ++j) {
            int32_t f = order[j];
            bvh_vec3 t[3];
            mesh_tri_at(v, j, t[0], t[1], t[2]);
            if (tri_degenerate(t[0], t[1], t[2])) continue;
            for (int k = 0; k < 3; ++k) {
                float d2 = length_sq(sub(p, t[k]));
                if (d2 > best) {
                    best = d2;
                    face = f;
                    u = k == 0 ? 1.0f : 0.0f;
                    w = k == 1 ? 1.0f : 0.0f;
                    found = true;
                }
            }
        }
    }
    return found;
}

// ---------------------------------------------------------------------------------------------
// rays

// A ray set up for watertight triangle tests (Woop, Benthin and Wald 2013): the axis it runs most along
// becomes z, and a shear makes it the z axis, so a ray through an edge or a vertex shared by triangles
// hits at least one of them.
struct ray_shear {
    int kx, ky, kz;
    float sx, sy, sz;
};

LW_FUNC ray_shear ray_shear_of(bvh_vec3 d) {
    ray_shear r;
    float ax = abs(d.c[0]), ay = abs(d.c[1]), az = abs(d.c[2]);
    r.kz = ax > ay ? (ax > az ? 0 : 2) : (ay > az ? 1 : 2);
    r.kx = r.kz == 2 ? 0 : r.kz + 1;
    r.ky = r.kx == 2 ? 0 : r.kx + 1;
    if (d.c[r.kz] < 0.0f) {
        int k = r.kx;
        r.kx = r.ky;
        r.ky = k;
    }
    r.sz = 1.0f / d.c[r.kz];
    r.sx = d.c[r.kx] * r.sz;
    r.sy = d.c[r.ky] * r.sz;
    return r;
}

// Ray o + t d (sheared as r) against triangle abc, either side: t, and the weights of a and b at the hit.
LW_FUNC bool tri_ray(bvh_vec3 a, bvh_vec3 b, bvh_vec3 c, bvh_vec3 o, const ray_shear& r, float& t, float& wa,
                     float& wb) {
    bvh_vec3 A = sub(a, o), B = sub(b, o), C = sub(c, o);
    float ax = A.c[r.kx] - r.sx * A.c[r.kz], ay = A.c[r.ky] - r.sy * A.c[r.kz];
    float bx = B.c[r.kx] - r.sx * B.c[r.kz], by = B.c[r.ky] - r.sy * B.c[r.kz];
    float cx = C.c[r.kx] - r.sx * C.c[r.kz], cy = C.c[r.ky] - r.sy * C.c[r.kz];
    // the edge functions in double: products of floats are exact there, so a contracted (fused) multiply-add
    // rounds like the plain one, and the two triangles of an edge see exactly opposite values
    float u = (float)((double)cx * by - (double)cy * bx);
    float v = (float)((double)ax * cy - (double)ay * cx);
    float w = (float)((double)bx * ay - (double)by * ax);
    if ((u < 0.0f || v < 0.0f || w < 0.0f) && (u > 0.0f || v > 0.0f || w > 0.0f)) return false;
    float det = u + v + w;
    if (det == 0.0f) return false;
    float inv = 1.0f / det;
    t = (u * A.c[r.kz] + v * B.c[r.kz] + w * C.c[r.kz]) * r.sz * inv;
    wa = u * inv;
    wb = v * inv;
    return true;
}

// A ray set up for box tests: each axis's near and far planes picked by the direction's sign (offsets into
// a node's floats: lo at 0..2, hi at 4..6). Axes the ray runs parallel to go through bvh_slab instead.
struct ray_boxes {
    bvh_vec3 o, rcp;
    int near[3], far[3];
    bool parallel;
};

LW_FUNC ray_boxes ray_boxes_of(bvh_vec3 o, bvh_vec3 d) {
    ray_boxes r;
    r.o = o;
    r.rcp = bvh_safe_rcp(d);
    r.parallel = false;
    for (int k = 0; k < 3; ++k) {
        bool neg = r.rcp.c[k] < 0.0f;
        r.near[k] = neg ? 4 + k : k;
        r.far[k] = neg ? k : 4 + k;
        r.parallel = r.parallel || d.c[k] == 0.0f;
    }
    return r;
}

// The ray's interval [t0, t1] in node n's box, clipped to t >= 0 (empty when t0 > t1); t1 is widened by a
// few ulps (Ize 2013) so rounding never culls a box the ray grazes.
LW_FUNC void ray_box(const bvh_node_t& n, const ray_boxes& r, float& t0, float& t1) {
    if (r.parallel) {
        bvh_slab(n.lo, n.hi, 0.0f, r.o, r.rcp, t0, t1);
        t0 = bvh_max(t0, 0.0f);
        return;
    }
    const float* f = (const float*)&n;
    float x0 = (f[r.near[0]] - r.o.c[0]) * r.rcp.c[0], x1 = (f[r.far[0]] - r.o.c[0]) * r.rcp.c[0];
    float y0 = (f[r.near[1]] - r.o.c[1]) * r.rcp.c[1], y1 = (f[r.far[1]] - r.o.c[1]) * r.rcp.c[1];
    float z0 = (f[r.near[2]] - r.o.c[2]) * r.rcp.c[2], z1 = (f[r.far[2]] - r.o.c[2]) * r.rcp.c[2];
    t0 = bvh_max(bvh_max(x0, y0), bvh_max(z0, 0.0f));
    t1 = bvh_min(bvh_min(x1, y1), z1) * 1.0000004f;
}

// The triangles of binary leaf n against the ray: a nearer hit than `best` updates it and the hit.
LW_FUNC bool mesh_ray_leaf(const mesh_view& v, const bvh_node_t& n, bvh_vec3 o, const ray_shear& shear, float& best,
                           float& t_hit, int32_t& face, float& u, float& w) {
    const int32_t* order = (const int32_t*)v.t->order;
    bool found = false;
    for (int32_t j = n.a; j < n.a - n.b; ++j) {
        bvh_vec3 a, b, c;
        mesh_tri_at(v, j, a, b, c);
        float t, wa, wb;
        if (tri_ray(a, b, c, o, shear, t, wa, wb) && t >= 0.0f && t < best) {
            best = t;
            t_hit = t;
            face = order[j];
            u = wa;
            w = wb;
            found = true;
        }
    }
    return found;
}

#if !defined(__CUDACC__)
// The tree 4 wide (bvh_build.cpp: lw_bvh4_collapse): slot k of a node has its box in lane k of lo / hi (per
// axis) and child[k] >= 0 (a node), < 0 (~ the binary leaf), or INT32_MIN (unused, with an empty box).
struct bvh4_node_t {
    float lo[3][4], hi[3][4];
    int32_t child[4], src[4];
};

// Up to four triangles of a leaf (item positions first...first + count - 1) with their corners by axis in
// SIMD lanes (unused lanes: a degenerate triangle); `more`: the leaf goes on in the next block.
struct tri4_block_t {
    float a[3][4], b[3][4], c[3][4];
    int32_t first, count, more, pad;
};

typedef float bvh_f4 __attribute__((vector_size(16)));
typedef int32_t bvh_i4 __attribute__((vector_size(16)));

inline bvh_f4 bvh4_splat(float x) { return bvh_f4{x, x, x, x}; }

// Push the hit slots of a 4-wide node (their keys in `key`) onto a traversal stack, farthest first, so the
// nearest is popped next.
template <typename M> inline void bvh4_push(const bvh4_node_t& q, const M& hit, const bvh_f4& key, int32_t* stack,
                                            float* keys, int& count) {
    int32_t ids[4];
    float ks[4];
    int m = 0;
    for (int k = 0; k < 4; ++k) {
        if (!hit[k]) continue;
        int i = m++;
        for (; i > 0 && ks[i - 1] < key[k]; --i) ids[i] = ids[i - 1], ks[i] = ks[i - 1];
        ids[i] = q.child[k];
        ks[i] = key[k];
    }
    for (int i = 0; i < m; ++i) {
        stack[count] = ids[i];
        keys[count++] = ks[i];
    }
}

inline bvh_f4 bvh4_abs(bvh_f4 x) { return x < 0.0f ? -x : x; }

// A leaf's triangle blocks (from `b` while `more`) against the ray, four triangles per SIMD step: tri_ray's
// test with the edge functions in float, and tri_ray itself for a block where a sign is uncertain in float
// (an edge function too close to 0 for its rounding), so the decisions are tri_ray's. A nearer hit than
// `best` updates it and the hit.
inline bool mesh_ray_blocks(const mesh_view& v, const tri4_block_t* b, bvh_vec3 o, const bvh_f4* ox,
                            const ray_shear& r, float& best, float& t_hit, int32_t& face, float& u, float& w) {
    const int32_t* order = (const int32_t*)v.t->order;
    const bvh_f4 sx = bvh4_splat(r.sx), sy = bvh4_splat(r.sy), certain = bvh4_splat(1.0e-6f);
    const bvh_i4 lane = {0, 1, 2, 3};
    bool found = false;
    for (;; ++b) {
        bvh_f4 A[3], B[3], C[3];
        for (int k = 0; k < 3; ++k) {
            A[k] = *(const bvh_f4*)b->a[k] - ox[k];
            B[k] = *(const bvh_f4*)b->b[k] - ox[k];
            C[k] = *(const bvh_f4*)b->c[k] - ox[k];
        }
        bvh_f4 ax = A[r.kx] - sx * A[r.kz], ay = A[r.ky] - sy * A[r.kz];
        bvh_f4 bx = B[r.kx] - sx * B[r.kz], by = B[r.ky] - sy * B[r.kz];
        bvh_f4 cx = C[r.kx] - sx * C[r.kz], cy = C[r.ky] - sy * C[r.kz];
        bvh_f4 u1 = cx * by, u2 = cy * bx, v1 = ax * cy, v2 = ay * cx, w1 = bx * ay, w2 = by * ax;
        bvh_f4 eu = u1 - u2, ev = v1 - v2, ew = w1 - w2;
        bvh_i4 used = lane < b->count;
        bvh_i4 sure = (bvh4_abs(eu) > certain * (bvh4_abs(u1) + bvh4_abs(u2))) &
                      (bvh4_abs(ev) > certain * (bvh4_abs(v1) + bvh4_abs(v2))) &
                      (bvh4_abs(ew) > certain * (bvh4_abs(w1) + bvh4_abs(w2)));
        bool fallback = false;
        for (int l = 0; l < 4; ++l) fallback |= used[l] && !sure[l];
        if (fallback) {
            for (int l = 0; l < b->count; ++l) {
                bvh_vec3 a, bb, c;
                mesh_tri_at(v, b->first + l, a, bb, c);
                float t, wa, wb;
                if (tri_ray(a, bb, c, o, r, t, wa, wb) && t >= 0.0f && t < best) {
                    best = t;
                    t_hit = t;
                    face = order[b->first + l];
                    u = wa;
                    w = wb;
                    found = true;
                }
            }
        } else {
            bvh_i4 outside = ((eu < 0.0f) | (ev < 0.0f) | (ew < 0.0f)) & ((eu > 0.0f) | (ev > 0.0f) | (ew > 0.0f));
            bvh_f4 det = eu + ev + ew;
            bvh_f4 inv = 1.0f / det;
            bvh_f4 t = (eu * A[r.kz] + ev * B[r.kz] + ew * C[r.kz]) * r.sz * inv;
            bvh_i4 hit = used & ~outside & (det != 0.0f) & (t >= 0.0f) & (t < best);
            for (int l = 0; l < 4; ++l) {
                if (!hit[l] || !(t[l] < best)) continue;
                best = t[l];
                t_hit = t[l];
                face = order[b->first + l];
                u = eu[l] * inv[l];
                w = ev[l] * inv[l];
                found = true;
            }
        }
        if (!b->more) break;
    }
    return found;
}

// mesh_ray over the whole mesh on the CPU: four boxes per step in SIMD lanes, nearest first.
inline bool mesh_ray4(const mesh_view& v, bvh_vec3 o, bvh_vec3 d, float max_t, float& t_hit, int32_t& face,
                      float& u, float& w) {
    const bvh4_node_t* nodes4 = (const bvh4_node_t*)v.m->nodes4;
    const tri4_block_t* blocks = (const tri4_block_t*)v.m->tri_blocks;
    for (int k = 0; k < 3; ++k)
        if (o.c[k] != o.c[k] || d.c[k] != d.c[k]) return false;  // NaN: no hit (and no walk through every box)
    ray_shear shear = ray_shear_of(d);
    // per axis: the origin, 1 / d (infinite where d is 0) and the offsets of the near and far planes in a
    // node's floats (lo at 0, hi at 12). A ray parallel to a slab gets -inf / +inf from it when it runs
    // inside, +inf / -inf outside, and NaN (0 * inf) on a face: the min / max below drop NaNs, which keeps
    // faces inside, as bvh_slab does.
    bvh_f4 ox[3], rx[3];
    int near[3], far[3];
    for (int k = 0; k < 3; ++k) {
        float r = 1.0f / d.c[k];
        ox[k] = bvh4_splat(o.c[k]);
        rx[k] = bvh4_splat(r);
        near[k] = r < 0.0f ? 12 + 4 * k : 4 * k;
        far[k] = r < 0.0f ? 4 * k : 12 + 4 * k;
    }
    float best = max_t;
    bool found = false;
    int32_t stack[4 * BVH_STACK];
    float enter[4 * BVH_STACK];
    int count = 1;
    stack[0] = 0;
    enter[0] = 0.0f;
    while (count > 0) {
        --count;
        if (enter[count] >= best) continue;
        int32_t c = stack[count];
        if (c < 0) {
            found |= mesh_ray_blocks(v, blocks + ~c, o, ox, shear, best, t_hit, face, u, w);
            continue;
        }
        const float* q = (const float*)&nodes4[c];
        bvh_f4 t0 = bvh4_splat(0.0f), t1 = bvh4_splat(3.0e38f);
        for (int k = 0; k < 3; ++k) {
            bvh_f4 a = (*(const bvh_f4*)(q + near[k]) - ox[k]) * rx[k];
            bvh_f4 b = (*(const bvh_f4*)(q + far[k]) - ox[k]) * rx[k];
            t0 = a > t0 ? a : t0;
            t1 = b < t1 ? b : t1;
        }
        // widened by a few ulps (Ize 2013) so rounding never culls a box the ray grazes
        bvh4_push(nodes4[c], (t0 <= t1 * 1.0000004f) & (t0 < bvh4_splat(best)), t0, stack, enter, count);
    }
    return found;
}
#endif

// The nearest hit with 0 <= t < max_t (from subtree `root`, -1: the whole mesh).
LW_FUNC bool mesh_ray(const mesh_view& v, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root, float& t_hit,
                      int32_t& face, float& u, float& w) {
#if !defined(__CUDACC__)
    if (root < 0 && v.m->nodes4) return mesh_ray4(v, o, d, max_t, t_hit, face, u, w);
#endif
    int32_t r = bvh_root(*v.t, root);
    if (r < 0) return false;
    const bvh_node_t* nodes = (const bvh_node_t*)v.t->nodes;
    ray_boxes rb = ray_boxes_of(o, d);
    ray_shear shear = ray_shear_of(d);
    float best = max_t;
    bool found = false;
    int32_t stack[BVH_STACK];
    float enter[BVH_STACK];
    int count = 1;
    stack[0] = r;
    enter[0] = 0.0f;
    while (count > 0) {
        --count;
        if (enter[count] >= best) continue;
        const bvh_node_t& n = nodes[stack[count]];
        if (bvh_is_leaf(n)) {
            found |= mesh_ray_leaf(v, n, o, shear, best, t_hit, face, u, w);
            continue;
        }
        float ta0, ta1, tb0, tb1;
        ray_box(nodes[n.a], rb, ta0, ta1);
        ray_box(nodes[n.b], rb, tb0, tb1);
        bool ha = ta0 <= ta1 && ta0 < best, hb = tb0 <= tb1 && tb0 < best;
        if (ha && hb) {
            bool a_first = ta0 <= tb0;
            stack[count] = a_first ? n.b : n.a;
            enter[count++] = a_first ? tb0 : ta0;
            stack[count] = a_first ? n.a : n.b;
            enter[count++] = a_first ? ta0 : tb0;
        } else if (ha || hb) {
            stack[count] = ha ? n.a : n.b;
            enter[count++] = ha ? ta0 : tb0;
        }
    }
    return found;
}

// How many faces the ray crosses at t >= 0 (subtree `root`, -1: the whole mesh).
LW_FUNC int32_t mesh_ray_count(const mesh_view& v, bvh_vec3 o, bvh_vec3 d, int32_t root) {
    int32_t r = bvh_root(*v.t, root);
    if (r < 0) return 0;
    const bvh_node_t* nodes = (const bvh_node_t*)v.t->nodes;
    const int32_t* order = (const int32_t*)v.t->order;
    ray_boxes rb = ray_boxes_of(o, d);
    ray_shear shear = ray_shear_of(d);
    int32_t hits = 0, stack[BVH_STACK], count = 1;
    stack[0] = r;
    while (count > 0) {
        const bvh_node_t& n = nodes[stack[--count]];
        float t0, t1;
        ray_box(n, rb, t0, t1);
        if (!(t1 >= t0)) continue;
        if (!bvh_is_leaf(n)) {
            stack[count++] = n.b;
            stack[count++] = n.a;
            continue;
        }
        for (int32_t j = n.a; j < n.a - n.b; ++j) {
            bvh_vec3 a, b, c;
            mesh_tri_at(v, j, a, b, c);
            float t, wa, wb;
            if (tri_ray(a, b, c, o, shear, t, wa, wb) && t >= 0.0f) ++hits;
        }
    }
    return hits;
}

LW_FUNC bvh_vec3 mesh_face_normal(const mesh_view& v, int32_t f) {
    bvh_vec3 a, b, c;
    mesh_tri(v, f, a, b, c);
    bvh_vec3 n = cross(sub(b, a), sub(c, a));
    float l = length(n);
    return l > 0.0f ? mul(n, 1.0f / l) : n;
}

// ---------------------------------------------------------------------------------------------
// inside / outside

// Three axis-aligned rays vote: a ray whose nearest hit is on a face's back side says inside.
LW_FUNC float mesh_sign_rays(const mesh_view& v, bvh_vec3 p) {
    int inside = 0;
    for (int k = 0; k < 3; ++k) {
        bvh_vec3 d = mesh_v3(k == 0 ? 1.0f : 0.0f, k == 1 ? 1.0f : 0.0f, k == 2 ? 1.0f : 0.0f);
        float t, wa, wb;
        int32_t f;
        if (mesh_ray(v, p, d, 3.0e38f, -1, t, f, wa, wb) && dot(mesh_face_normal(v, f), d) > 0.0f) ++inside;
    }
    return inside >= 2 ? -1.0f : 1.0f;
}

// Rays around (1, 1, 1) perturbed by a fixed random sequence: inside when at least half cross an odd count.
LW_FUNC float mesh_sign_parity(const mesh_view& v, bvh_vec3 p, int32_t n_sample, float scale) {
    if (n_sample <= 0) return -1.0f;
    uint32_t state = 0x9e3779b9u;
    int odd = 0;
    for (int s = 0; s < n_sample; ++s) {
        bvh_vec3 d;
        for (int k = 0; k < 3; ++k) {
            state = state * 1664525u + 1013904223u;
            float r = (float)(state >> 8) * (1.0f / 16777216.0f);
            d.c[k] = 1.0f + scale * (2.0f * r - 1.0f);
        }
        if (mesh_ray_count(v, p, d, -1) & 1) ++odd;
    }
    return 2 * odd >= n_sample ? -1.0f : 1.0f;
}

// The angle-weighted pseudo-normal at a vertex (edge_end < 0) or the pseudo-normal of an edge: the faces
// around it, found with a small box query at the point q on it, weighted by their angle at the vertex
// (each face sharing the edge counts once).
LW_FUNC bvh_vec3 mesh_feature_normal(const mesh_view& v, bvh_vec3 q, float reach, int32_t vertex, int32_t edge_end) {
    bvh_vec3 n = zero<bvh_vec3>(), pad = mesh_v3(reach, reach, reach);
    bvh_query_t it = bvh_query_start(v.m->bvh, BVH_QUERY_AABB, sub(q, pad), add(q, pad), 0.0f, -1);
    int32_t f;
    while (bvh_query_next(it, f)) {
        int k = 0;
        while (k < 3 && v.indices[3 * f + k] != vertex) ++k;
        if (k == 3) continue;
        bvh_vec3 x[3];
        mesh_tri(v, f, x[0], x[1], x[2]);
        bvh_vec3 fn = cross(sub(x[1], x[0]), sub(x[2], x[0]));
        float l = length(fn);
        if (l <= 0.0f) continue;
        fn = mul(fn, 1.0f / l);
        if (edge_end >= 0) {
            if (v.indices[3 * f + (k + 1) % 3] == edge_end || v.indices[3 * f + (k + 2) % 3] == edge_end)
                n = add(n, fn);
            continue;
        }
        bvh_vec3 e1 = sub(x[(k + 1) % 3], x[k]), e2 = sub(x[(k + 2) % 3], x[k]);
        float d = length(e1) * length(e2);
        float angle = d > 0.0f ? acos(clamp(dot(e1, e2) / d, -1.0f, 1.0f)) : 0.0f;
        n = add(n, mul(fn, angle));
    }
    return n;
}

// The pseudo-normal of the closest point's feature (face, edge or vertex; within epsilon of the mesh's
// mean edge length counts as on it) decides: p behind it is inside.
LW_FUNC float mesh_sign_normal(const mesh_view& v, bvh_vec3 p, int32_t f, float wa, float wb, float epsilon) {
    bvh_vec3 a, b, c;
    mesh_tri(v, f, a, b, c);
    bvh_vec3 q = tri_point(a, b, c, wa, wb);
    float wc = 1.0f - wa - wb;
    float tol = epsilon * v.m->avg_edge;
    // distances of q from the edges' lines, through the weights (w_k * height_k)
    bvh_vec3 nrm = cross(sub(b, a), sub(c, a));
    float twice_area = length(nrm);
    float la = length(sub(c, b)), lb = length(sub(a, c)), lc = length(sub(b, a));
    bool on_bc = la > 0.0f && wa * twice_area / la <= tol;
    bool on_ca = lb > 0.0f && wb * twice_area / lb <= tol;
    bool on_ab = lc > 0.0f && wc * twice_area / lc <= tol;
    const int32_t* ix = v.indices + 3 * f;
    float reach = 2.0f * tol + 1e-6f * v.m->avg_edge;
    bvh_vec3 n = nrm;
    if (on_ab && on_ca) n = mesh_feature_normal(v, a, reach, ix[0], -1);
    else if (on_ab && on_bc) n = mesh_feature_normal(v, b, reach, ix[1], -1);
    else if (on_bc && on_ca) n = mesh_feature_normal(v, c, reach, ix[2], -1);
    else if (on_ab) n = mesh_feature_normal(v, q, reach, ix[0], ix[1]);
    else if (on_bc) n = mesh_feature_normal(v, q, reach, ix[1], ix[2]);
    else if (on_ca) n = mesh_feature_normal(v, q, reach, ix[2], ix[0]);
    return dot(sub(p, q), n) < 0.0f ? -1.0f : 1.0f;
}

// The solid angle of triangle abc seen from p (Van Oosterom and Strackee), over 4 pi.
LW_FUNC float tri_winding(bvh_vec3 a, bvh_vec3 b, bvh_vec3 c, bvh_vec3 p) {
    bvh_vec3 x = sub(a, p), y = sub(b, p), z = sub(c, p);
    float lx = length(x), ly = length(y), lz = length(z);
    float num = dot(x, cross(y, z));
    float den = lx * ly * lz + dot(x, y) * lz + dot(y, z) * lx + dot(z, x) * ly;
    return atan2(num, den) * (0.5f / 3.14159265358979f);
}

// The generalized winding number at p (fast winding numbers: distant subtrees by their dipole moments
// up to second order, near ones triangle by triangle).
LW_FUNC float mesh_winding_number(const mesh_view& v, bvh_vec3 p, float accuracy) {
    const bvh_node_t* nodes = (const bvh_node_t*)v.t->nodes;
    const int32_t* order = (const int32_t*)v.t->order;
    const float* mom = (const float*)v.m->moments;
    float w = 0.0f;
    int32_t stack[BVH_STACK];
    int count = 1;
    stack[0] = 0;
    while (count > 0) {
        int32_t i = stack[--count];
        const float* m = mom + 16 * i;
        bvh_vec3 x = mesh_v3(m[0] - p.c[0], m[1] - p.c[1], m[2] - p.c[2]);
        float r2 = length_sq(x);
        if (r2 > accuracy * accuracy * m[15] * m[15] && r2 > 0.0f) {
            float ir = 1.0f / sqrt(r2), ir3 = ir * ir * ir, ir5 = ir3 * ir * ir;
            float first = (x.c[0] * m[3] + x.c[1] * m[4] + x.c[2] * m[5]) * ir3;
            float second = 0.0f;
            for (int r = 0; r < 3; ++r)
                for (int q = 0; q < 3; ++q)
                    second += ((r == q ? ir3 : 0.0f) - 3.0f * x.c[r] * x.c[q] * ir5) * m[6 + 3 * r + q];
            w += (first + second) * (0.25f / 3.14159265358979f);
            continue;
        }
        const bvh_node_t& n = nodes[i];
        if (!bvh_is_leaf(n)) {
            stack[count++] = n.a;
            stack[count++] = n.b;
            continue;
        }
        for (int32_t j = n.a; j < n.a - n.b; ++j) {
            bvh_vec3 a, b, c;
            mesh_tri_at(v, j, a, b, c);
            w += tri_winding(a, b, c, p);
        }
    }
    return w;
}

// ---------------------------------------------------------------------------------------------
// the builtins: query structs, and the out-parameter forms Warp keeps

enum { SIGN_NONE = 0, SIGN_RAYS = 1, SIGN_NORMAL = 2, SIGN_PARITY = 3, SIGN_WINDING = 4 };

LW_FUNC mesh_query_point_t mesh_point_query(uint64_t id, bvh_vec3 p, float max_dist, int mode, float a, float b,
                                            int32_t n) {
    mesh_query_point_t q{};
    q.face = -1;
    mesh_view v;
    int feature;
    if (!mesh_open(id, v) || !mesh_closest(v, p, max_dist, q.face, q.u, q.v, feature)) {
        q.sign = 1.0f;
        return q;
    }
    q.result = true;
    if (mode == SIGN_NONE) q.sign = 0.0f;
    else if (mode == SIGN_NORMAL) q.sign = mesh_sign_normal(v, p, q.face, q.u, q.v, a);
    else if (mode == SIGN_PARITY) q.sign = mesh_sign_parity(v, p, n, a);
    else if (mode == SIGN_WINDING && v.m->has_winding) q.sign = mesh_winding_number(v, p, a) > b ? -1.0f : 1.0f;
    else q.sign = mesh_sign_rays(v, p);
    return q;
}

LW_FUNC mesh_query_point_t mesh_query_point(uint64_t id, bvh_vec3 p, float max_dist) {
    return mesh_point_query(id, p, max_dist, SIGN_RAYS, 0.0f, 0.0f, 0);
}
LW_FUNC mesh_query_point_t mesh_query_point_no_sign(uint64_t id, bvh_vec3 p, float max_dist) {
    return mesh_point_query(id, p, max_dist, SIGN_NONE, 0.0f, 0.0f, 0);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float max_dist, float epsilon) {
    return mesh_point_query(id, p, max_dist, SIGN_NORMAL, epsilon, 0.0f, 0);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float max_dist) {
    return mesh_query_point_sign_normal(id, p, max_dist, 1e-3f);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float max_dist, int32_t n_sample,
                                                         float scale) {
    return mesh_point_query(id, p, max_dist, SIGN_PARITY, scale, 0.0f, n_sample);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float max_dist) {
    return mesh_query_point_sign_parity(id, p, max_dist, 1, 0.1f);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float max_dist,
                                                                 float accuracy, float threshold) {
    return mesh_point_query(id, p, max_dist, SIGN_WINDING, accuracy, threshold, 0);
}
LW_FUNC mesh_query_point_t mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float max_dist) {
    return mesh_query_point_sign_winding_number(id, p, max_dist, 2.0f, 0.5f);
}
LW_FUNC mesh_query_point_t mesh_query_furthest_point_no_sign(uint64_t id, bvh_vec3 p, float min_dist) {
    mesh_query_point_t q{};
    q.face = -1;
    mesh_view v;
    q.result = mesh_open(id, v) && mesh_furthest(v, p, min_dist, q.face, q.u, q.v);
    return q;
}

// out-parameter forms: the struct's fields into the caller's variables
LW_FUNC bool mesh_point_out(const mesh_query_point_t& q, float& inside, int32_t& face, float& u, float& v) {
    if (q.result) inside = q.sign, face = q.face, u = q.u, v = q.v;
    return q.result;
}
LW_FUNC bool mesh_query_point(uint64_t id, bvh_vec3 p, float max_dist, float& inside, int32_t& face, float& u,
                              float& v) {
    return mesh_point_out(mesh_query_point(id, p, max_dist), inside, face, u, v);
}
LW_FUNC bool mesh_query_point_no_sign(uint64_t id, bvh_vec3 p, float max_dist, int32_t& face, float& u, float& v) {
    float s;
    return mesh_point_out(mesh_query_point_no_sign(id, p, max_dist), s, face, u, v);
}
LW_FUNC bool mesh_query_furthest_point_no_sign(uint64_t id, bvh_vec3 p, float min_dist, int32_t& face, float& u,
                                               float& v) {
    float s;
    return mesh_point_out(mesh_query_furthest_point_no_sign(id, p, min_dist), s, face, u, v);
}
LW_FUNC bool mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float max_dist, float& inside, int32_t& face,
                                          float& u, float& v, float epsilon) {
    return mesh_point_out(mesh_query_point_sign_normal(id, p, max_dist, epsilon), inside, face, u, v);
}
LW_FUNC bool mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float max_dist, float& inside, int32_t& face,
                                          float& u, float& v) {
    return mesh_query_point_sign_normal(id, p, max_dist, inside, face, u, v, 1e-3f);
}
LW_FUNC bool mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float max_dist, float& inside,
                                                  int32_t& face, float& u, float& v, float accuracy, float threshold) {
    return mesh_point_out(mesh_query_point_sign_winding_number(id, p, max_dist, accuracy, threshold), inside, face,
                          u, v);
}
LW_FUNC bool mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float max_dist, float& inside,
                                                  int32_t& face, float& u, float& v) {
    return mesh_query_point_sign_winding_number(id, p, max_dist, inside, face, u, v, 2.0f, 0.5f);
}
LW_FUNC bool mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float max_dist, float& inside, int32_t& face,
                                          float& u, float& v, int32_t n_sample, float scale) {
    return mesh_point_out(mesh_query_point_sign_parity(id, p, max_dist, n_sample, scale), inside, face, u, v);
}
LW_FUNC bool mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float max_dist, float& inside, int32_t& face,
                                          float& u, float& v) {
    return mesh_query_point_sign_parity(id, p, max_dist, inside, face, u, v, 1, 0.1f);
}

LW_FUNC mesh_query_ray_t mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root) {
    mesh_query_ray_t q{};
    q.face = -1;
    mesh_view v;
    if (!mesh_open(id, v) || !mesh_ray(v, o, d, max_t, root, q.t, q.face, q.u, q.v)) return q;
    q.result = true;
    q.normal = mesh_face_normal(v, q.face);
    q.sign = dot(q.normal, d) < 0.0f ? 1.0f : -1.0f;
    return q;
}
LW_FUNC mesh_query_ray_t mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t) {
    return mesh_query_ray(id, o, d, max_t, -1);
}
LW_FUNC bool mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, float& t, float& u, float& v,
                            float& sign, bvh_vec3& normal, int32_t& face, int32_t root) {
    mesh_query_ray_t q = mesh_query_ray(id, o, d, max_t, root);
    if (q.result) t = q.t, u = q.u, v = q.v, sign = q.sign, normal = q.normal, face = q.face;
    return q.result;
}
LW_FUNC bool mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, float& t, float& u, float& v,
                            float& sign, bvh_vec3& normal, int32_t& face) {
    return mesh_query_ray(id, o, d, max_t, t, u, v, sign, normal, face, -1);
}
LW_FUNC bool mesh_query_ray_anyhit(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root) {
    return mesh_query_ray(id, o, d, max_t, root).result;
}
LW_FUNC bool mesh_query_ray_anyhit(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t) {
    return mesh_query_ray_anyhit(id, o, d, max_t, -1);
}
LW_FUNC int32_t mesh_query_ray_count_intersections(uint64_t id, bvh_vec3 o, bvh_vec3 d, int32_t root) {
    mesh_view v;
    return mesh_open(id, v) ? mesh_ray_count(v, o, d, root) : 0;
}
LW_FUNC int32_t mesh_query_ray_count_intersections(uint64_t id, bvh_vec3 o, bvh_vec3 d) {
    return mesh_query_ray_count_intersections(id, o, d, -1);
}

// faces whose boxes overlap [lo, hi], or that come within radius of a center: iterate with mesh_query_next
LW_FUNC mesh_query_aabb_t mesh_face_query(uint64_t id, int32_t kind, bvh_vec3 a, bvh_vec3 b, float radius) {
    const mesh_t* m = handle_get<mesh_t>(id);
    mesh_query_aabb_t q;
    (bvh_query_t&)q = bvh_query_start(m != 0 ? m->bvh : 0, kind, a, b, radius, -1);
    q.owner = id;
    return q;
}
LW_FUNC mesh_query_aabb_t mesh_query_aabb(uint64_t id, bvh_vec3 lo, bvh_vec3 hi) {
    return mesh_face_query(id, BVH_QUERY_AABB, lo, hi, 0.0f);
}
LW_FUNC mesh_query_aabb_t mesh_query_sphere(uint64_t id, bvh_vec3 center, float radius) {
    return mesh_face_query(id, BVH_QUERY_SPHERE, center, center, radius);
}
// The next face: box queries report the faces whose boxes overlap, sphere queries the faces themselves
// within the radius (their boxes are only the candidates).
LW_FUNC bool mesh_query_next(mesh_query_aabb_t& q, int32_t& index) {
    mesh_view v;
    bool exact = q.kind == BVH_QUERY_SPHERE && mesh_open(q.owner, v);
    int32_t f;
    while (bvh_query_next(q, f)) {
        if (exact) {
            bvh_vec3 a, b, c;
            mesh_tri(v, f, a, b, c);
            float wa, wb;
            tri_closest(a, b, c, q.a, wa, wb);
            if (length_sq(sub(q.a, tri_point(a, b, c, wa, wb))) > q.radius * q.radius) continue;
        }
        index = f;
        return true;
    }
    return false;
}

// a block query of a mesh's faces (see bvh.h's bvh_query_tiled_t)
struct mesh_query_aabb_tiled_t {
    mesh_query_aabb_t q;
    int32_t valid;
};
LW_FUNC mesh_query_aabb_tiled_t tile_mesh_query_aabb(uint64_t id, bvh_vec3 lo, bvh_vec3 hi) {
    return mesh_query_aabb_tiled_t{mesh_query_aabb(id, lo, hi), 1};
}
LW_FUNC tile_t<int32_t, 1, 1> tile_mesh_query_aabb_next(mesh_query_aabb_tiled_t& q) {
    tile_t<int32_t, 1, 1> r;
    int32_t i = -1;
    if (!(q.valid && mesh_query_next(q.q, i))) {
        i = -1;
        q.valid = 0;
    }
    r.c[0] = i;
    return r;
}
LW_FUNC bool tile_query_valid(const mesh_query_aabb_tiled_t& q) { return q.valid != 0; }

// wp.mesh_get(id): the mesh's arrays, read in kernels as mesh.points[i], mesh.indices[3 * f + k], ...
struct mesh_arrays_t {
    array_t<bvh_vec3> points;
    array_t<bvh_vec3> velocities;
    array_t<int32_t> indices;
    int32_t num_points, num_tris;
};

template <typename T> LW_FUNC array_t<T> mesh_array(uint64_t data, uint64_t grad, int32_t n) {
    array_t<T> a{};
    a.data = (T*)data;
    a.grad = (T*)grad;
    a.shape[0] = data ? n : 0;
    a.strides[0] = sizeof(T);
    a.ndim = data ? 1 : 0;
    return a;
}

LW_FUNC mesh_arrays_t mesh_get(uint64_t id) {
    mesh_arrays_t r{};
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0) return r;
    r.points = mesh_array<bvh_vec3>(m->points, m->points_grad, m->num_points);
    r.velocities = mesh_array<bvh_vec3>(m->velocities, m->velocities_grad, m->num_points);
    r.indices = mesh_array<int32_t>(m->indices, 0, 3 * m->num_tris);
    r.num_points = m->num_points;
    r.num_tris = m->num_tris;
    return r;
}

LW_FUNC uint64_t mesh_get_bvh(uint64_t id) {
    const mesh_t* m = handle_get<mesh_t>(id);
    return m != 0 ? m->bvh : 0;
}
LW_FUNC int32_t mesh_get_group_root(uint64_t id, int32_t group) { return bvh_get_group_root(mesh_get_bvh(id), group); }

// ---------------------------------------------------------------------------------------------
// evaluation on faces (out-of-range faces and indices give zeros)

LW_FUNC bool mesh_face_ok(const mesh_t* m, int32_t f) { return m != 0 && f >= 0 && f < m->num_tris; }

LW_FUNC bvh_vec3 mesh_eval_corners(const mesh_t* m, const bvh_vec3* data, int32_t f, float u, float v) {
    if (!mesh_face_ok(m, f) || data == 0) return zero<bvh_vec3>();
    const int32_t* idx = (const int32_t*)m->indices;
    return tri_point(data[idx[3 * f]], data[idx[3 * f + 1]], data[idx[3 * f + 2]], u, v);
}
// Add a gradient into grad[i] (threads may share points).
LW_FUNC void mesh_grad_add(uint64_t grad, int32_t i, const bvh_vec3& g) {
    float* p = (float*)((bvh_vec3*)grad + i);
    for (int k = 0; k < 3; ++k) atomic_add(p + k, g.c[k]);
}
LW_FUNC void adj_mesh_eval_corners(const mesh_t* m, const bvh_vec3* data, uint64_t grad, int32_t f, float u,
                                   float v, float& adj_u, float& adj_v, const bvh_vec3& adj_ret) {
    if (!mesh_face_ok(m, f) || data == 0) return;
    const int32_t* idx = (const int32_t*)m->indices;
    bvh_vec3 c = data[idx[3 * f + 2]];
    adj_u += dot(adj_ret, sub(data[idx[3 * f]], c));
    adj_v += dot(adj_ret, sub(data[idx[3 * f + 1]], c));
    if (grad) {  // d/d(corner): u, v and 1 - u - v
        mesh_grad_add(grad, idx[3 * f], mul(adj_ret, u));
        mesh_grad_add(grad, idx[3 * f + 1], mul(adj_ret, v));
        mesh_grad_add(grad, idx[3 * f + 2], mul(adj_ret, 1.0f - u - v));
    }
}
LW_FUNC bvh_vec3 mesh_eval_position(uint64_t id, int32_t f, float u, float v) {
    const mesh_t* m = handle_get<mesh_t>(id);
    return mesh_eval_corners(m, m ? (const bvh_vec3*)m->points : 0, f, u, v);
}
LW_FUNC void adj_mesh_eval_position(uint64_t id, int32_t f, float u, float v, uint64_t&, int32_t&, float& adj_u,
                                    float& adj_v, const bvh_vec3& adj_ret) {
    const mesh_t* m = handle_get<mesh_t>(id);
    adj_mesh_eval_corners(m, m ? (const bvh_vec3*)m->points : 0, m ? m->points_grad : 0, f, u, v, adj_u, adj_v,
                          adj_ret);
}
LW_FUNC bvh_vec3 mesh_eval_velocity(uint64_t id, int32_t f, float u, float v) {
    const mesh_t* m = handle_get<mesh_t>(id);
    return mesh_eval_corners(m, m ? (const bvh_vec3*)m->velocities : 0, f, u, v);
}
LW_FUNC void adj_mesh_eval_velocity(uint64_t id, int32_t f, float u, float v, uint64_t&, int32_t&, float& adj_u,
                                    float& adj_v, const bvh_vec3& adj_ret) {
    const mesh_t* m = handle_get<mesh_t>(id);
    adj_mesh_eval_corners(m, m ? (const bvh_vec3*)m->velocities : 0, m ? m->velocities_grad : 0, f, u, v, adj_u,
                          adj_v, adj_ret);
}
LW_FUNC bvh_vec3 mesh_eval_face_normal(uint64_t id, int32_t f) {
    mesh_view v;
    v.m = handle_get<mesh_t>(id);
    if (!mesh_face_ok(v.m, f)) return zero<bvh_vec3>();
    v.points = (const bvh_vec3*)v.m->points;
    v.indices = (const int32_t*)v.m->indices;
    return mesh_face_normal(v, f);
}
LW_FUNC bvh_vec3 mesh_get_point(uint64_t id, int32_t i) {
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0 || i < 0 || i >= 3 * m->num_tris) return zero<bvh_vec3>();
    return ((const bvh_vec3*)m->points)[((const int32_t*)m->indices)[i]];
}
LW_FUNC bvh_vec3 mesh_get_velocity(uint64_t id, int32_t i) {
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0 || m->velocities == 0 || i < 0 || i >= 3 * m->num_tris) return zero<bvh_vec3>();
    return ((const bvh_vec3*)m->velocities)[((const int32_t*)m->indices)[i]];
}
LW_FUNC void adj_mesh_get_point(uint64_t id, int32_t i, uint64_t&, int32_t&, const bvh_vec3& adj_ret) {
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0 || m->points_grad == 0 || i < 0 || i >= 3 * m->num_tris) return;
    mesh_grad_add(m->points_grad, ((const int32_t*)m->indices)[i], adj_ret);
}
LW_FUNC void adj_mesh_get_velocity(uint64_t id, int32_t i, uint64_t&, int32_t&, const bvh_vec3& adj_ret) {
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0 || m->velocities_grad == 0 || i < 0 || i >= 3 * m->num_tris) return;
    mesh_grad_add(m->velocities_grad, ((const int32_t*)m->indices)[i], adj_ret);
}
LW_FUNC int32_t mesh_get_index(uint64_t id, int32_t i) {
    const mesh_t* m = handle_get<mesh_t>(id);
    if (m == 0 || i < 0 || i >= 3 * m->num_tris) return -1;
    return ((const int32_t*)m->indices)[i];
}

// ---------------------------------------------------------------------------------------------
// adjoints: the closest point's barycentric weights move with p (on a face, an edge; not at a vertex)

LW_FUNC void adj_closest_weights(const mesh_view& v, bvh_vec3 p, int32_t f, int feature, float adj_u, float adj_w,
                                 bvh_vec3& adj_p) {
    bvh_vec3 t[3];
    mesh_tri(v, f, t[0], t[1], t[2]);
    bvh_vec3 ga = zero<bvh_vec3>(), gb = zero<bvh_vec3>();  // gradients of the weights of a and b
    if (feature == TRI_FACE) {
        bvh_vec3 n = cross(sub(t[1], t[0]), sub(t[2], t[0]));
        float n2 = length_sq(n);
        if (n2 <= 0.0f) return;
        ga = mul(cross(n, sub(t[2], t[1])), 1.0f / n2);  // n / |n| x (c - b) / |n|
        gb = mul(cross(n, sub(t[0], t[2])), 1.0f / n2);
    } else if (feature >= TRI_EDGE_AB && feature <= TRI_EDGE_CA) {
        int i = feature == TRI_EDGE_AB ? 0 : (feature == TRI_EDGE_BC ? 1 : 2), j = (i + 1) % 3;
        bvh_vec3 e = sub(t[j], t[i]);
        float e2 = length_sq(e);
        if (e2 <= 0.0f) return;
        bvh_vec3 g = mul(e, 1.0f / e2);  // d(weight of vertex j)/dp; vertex i's is its negative
        if (j == 0) ga = g; else if (j == 1) gb = g;
        if (i == 0) ga = neg(g); else if (i == 1) gb = neg(g);
    } else {
        return;
    }
    adj_p = add(adj_p, add(mul(ga, adj_u), mul(gb, adj_w)));
}

// d(u, v)/dp of a closest-point query (the sign and the face do not vary smoothly)
LW_FUNC void adj_mesh_closest(uint64_t id, bvh_vec3 p, float max_dist, float adj_u, float adj_v, bvh_vec3& adj_p) {
    mesh_view v;
    int32_t f = -1;
    float u, w;
    int feature;
    if (mesh_open(id, v) && mesh_closest(v, p, max_dist, f, u, w, feature))
        adj_closest_weights(v, p, f, feature, adj_u, adj_v, adj_p);
}
// out-parameter forms: their outputs are in-out (a miss leaves the caller's variables alone), so the adjoint
// takes the inputs, the in-out values, the adjoints of both, then the record of the outputs' adjoints
// (f0 the result; f1.. inside, face, u, v, or face, u, v without a sign)
#define LW_IO4 float, int32_t, float, float
#define LW_ADJ_IO4 float&, int32_t&, float&, float&
template <typename R>
LW_FUNC void adj_mesh_query_point(uint64_t id, bvh_vec3 p, float m, LW_IO4, uint64_t&, bvh_vec3& adj_p, float&,
                                  LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_no_sign(uint64_t id, bvh_vec3 p, float m, int32_t, float, float, uint64_t&,
                                          bvh_vec3& adj_p, float&, int32_t&, float&, float&, const R& a) {
    adj_mesh_closest(id, p, m, a.f2, a.f3, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float m, LW_IO4, uint64_t&, bvh_vec3& adj_p,
                                              float&, LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float m, float, LW_IO4, uint64_t&,
                                              bvh_vec3& adj_p, float&, float&, LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float m, LW_IO4, uint64_t&,
                                                      bvh_vec3& adj_p, float&, LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float m, float, float, LW_IO4,
                                                      uint64_t&, bvh_vec3& adj_p, float&, float&, float&, LW_ADJ_IO4,
                                                      const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float m, LW_IO4, uint64_t&, bvh_vec3& adj_p,
                                              float&, LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
template <typename R>
LW_FUNC void adj_mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float m, int32_t, float, LW_IO4, uint64_t&,
                                              bvh_vec3& adj_p, float&, int32_t&, float&, LW_ADJ_IO4, const R& a) {
    adj_mesh_closest(id, p, m, a.f3, a.f4, adj_p);
}
#undef LW_IO4
#undef LW_ADJ_IO4

// struct forms: the adjoint record is the query struct itself (its u and v)
typedef mesh_query_point_t mqp_t;
LW_FUNC void adj_mesh_query_point(uint64_t id, bvh_vec3 p, float m, uint64_t&, bvh_vec3& adj_p, float&, const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_no_sign(uint64_t id, bvh_vec3 p, float m, uint64_t&, bvh_vec3& adj_p, float&,
                                          const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float m, uint64_t&, bvh_vec3& adj_p, float&,
                                              const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_normal(uint64_t id, bvh_vec3 p, float m, float, uint64_t&, bvh_vec3& adj_p,
                                              float&, float&, const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float m, uint64_t&, bvh_vec3& adj_p, float&,
                                              const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_parity(uint64_t id, bvh_vec3 p, float m, int32_t, float, uint64_t&,
                                              bvh_vec3& adj_p, float&, int32_t&, float&, const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float m, uint64_t&, bvh_vec3& adj_p,
                                                      float&, const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}
LW_FUNC void adj_mesh_query_point_sign_winding_number(uint64_t id, bvh_vec3 p, float m, float, float, uint64_t&,
                                                      bvh_vec3& adj_p, float&, float&, float&, const mqp_t& a) {
    adj_mesh_closest(id, p, m, a.u, a.v, adj_p);
}

// ray hits: t and the hit's weights move with the origin and direction
LW_FUNC void adj_ray_hit(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root, float adj_t, float adj_u,
                         float adj_v, bvh_vec3& adj_o, bvh_vec3& adj_d) {
    mesh_view v;
    float t, wa, wb;
    int32_t f;
    if (!mesh_open(id, v) || !mesh_ray(v, o, d, max_t, root, t, f, wa, wb)) return;
    bvh_vec3 a, b, c;
    mesh_tri(v, f, a, b, c);
    bvh_vec3 n = cross(sub(b, a), sub(c, a));
    float nd = dot(n, d), n2 = length_sq(n);
    if (nd == 0.0f || n2 == 0.0f) return;
    // x = o + t d on the plane: dt/do = -n / (n.d), dt/dd = t dt/do; the weights are linear in x
    bvh_vec3 ga = mul(cross(n, sub(c, b)), 1.0f / n2), gb = mul(cross(n, sub(a, c)), 1.0f / n2);
    bvh_vec3 gx = add(mul(ga, adj_u), mul(gb, adj_v));  // d(loss)/dx through the weights
    float gt = adj_t + dot(gx, d);                        // d(loss)/dt, directly and through x
    bvh_vec3 dt_do = mul(n, -1.0f / nd);
    adj_o = add(adj_o, add(gx, mul(dt_do, gt)));
    adj_d = add(adj_d, add(mul(gx, t), mul(dt_do, gt * t)));
}
// out-parameter forms: in-out (t, u, v, sign, normal, face) after the inputs; the record holds their
// adjoints after the result's
#define LW_IO6 float, float, float, float, bvh_vec3, int32_t
#define LW_ADJ_IO6 float&, float&, float&, float&, bvh_vec3&, int32_t&
template <typename R>
LW_FUNC void adj_mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root, LW_IO6, uint64_t&,
                                bvh_vec3& adj_o, bvh_vec3& adj_d, float&, int32_t&, LW_ADJ_IO6, const R& a) {
    adj_ray_hit(id, o, d, max_t, root, a.f1, a.f2, a.f3, adj_o, adj_d);
}
template <typename R>
LW_FUNC void adj_mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, LW_IO6, uint64_t&, bvh_vec3& adj_o,
                                bvh_vec3& adj_d, float&, LW_ADJ_IO6, const R& a) {
    adj_ray_hit(id, o, d, max_t, -1, a.f1, a.f2, a.f3, adj_o, adj_d);
}
#undef LW_IO6
#undef LW_ADJ_IO6
LW_FUNC void adj_mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, int32_t root, uint64_t&,
                                bvh_vec3& adj_o, bvh_vec3& adj_d, float&, int32_t&, const mesh_query_ray_t& a) {
    adj_ray_hit(id, o, d, max_t, root, a.t, a.u, a.v, adj_o, adj_d);
}
LW_FUNC void adj_mesh_query_ray(uint64_t id, bvh_vec3 o, bvh_vec3 d, float max_t, uint64_t&, bvh_vec3& adj_o,
                                bvh_vec3& adj_d, float&, const mesh_query_ray_t& a) {
    adj_ray_hit(id, o, d, max_t, -1, a.t, a.u, a.v, adj_o, adj_d);
}

}  // namespace lw
