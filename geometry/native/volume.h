// loomwork.geometry: sparse volumes (wp.Volume) read and written in NanoVDB's memory layout: a grid
// header, a root table of 4096^3 tiles, upper (32^3) and lower (16^3) internal nodes, and 8^3 leaves.
// Node offsets that depend on the value type come from the descriptor (geometry/volume.py computes
// them). Included after loomwork.h by modules that use them.
#pragma once

#include "bvh.h"

namespace lw {

// What a Volume's id points to.
struct volume_t {
    uint32_t tag;
    uint32_t grid_type;        // NanoVDB GridType of the grid
    uint64_t grid;             // the grid's bytes, GridData first
    uint64_t root;             // its RootData
    uint32_t root_tiles;       // entries of the root table
    uint32_t root_size;        // bytes from the root to its first tile
    uint32_t root_tile_size;
    uint32_t root_tile_value;  // where a root tile keeps its value
    uint32_t root_background;  // where the root keeps the background value
    uint32_t upper_table;      // where each internal node and leaf keeps its table
    uint32_t lower_table;
    uint32_t leaf_table;
    uint32_t table_stride;     // bytes per internal table entry (a child offset or a tile value)
    uint32_t value_size;       // bytes per leaf value (0 in index grids)
    uint32_t index_kind;       // 0: a value grid, 1: Index (every leaf voxel), 2: OnIndex (active voxels)
    int32_t voxel_count;       // the indexable voxels of an index grid
};

template <typename V> struct volume_grid_type { static const uint32_t value = 0; };
template <> struct volume_grid_type<float> { static const uint32_t value = 1; };
template <> struct volume_grid_type<double> { static const uint32_t value = 2; };
template <> struct volume_grid_type<int32_t> { static const uint32_t value = 4; };
template <> struct volume_grid_type<int64_t> { static const uint32_t value = 5; };
template <> struct volume_grid_type<vec_t<3, float>> { static const uint32_t value = 6; };
template <> struct volume_grid_type<vec_t<3, double>> { static const uint32_t value = 7; };
template <> struct volume_grid_type<uint32_t> { static const uint32_t value = 10; };
template <> struct volume_grid_type<vec_t<4, float>> { static const uint32_t value = 17; };
template <> struct volume_grid_type<vec_t<4, double>> { static const uint32_t value = 18; };

// A value's components, the type interpolation accumulates them in, and the type of its gradient
// (a vec3 for a scalar, an N x 3 Jacobian for an N-vector).
template <typename V> struct volume_acc { typedef double type; };  // integers interpolate in double
template <> struct volume_acc<float> { typedef float type; };
template <typename V> struct volume_val {
    typedef V S;
    typedef typename volume_acc<V>::type A;
    static const int N = 1;
    typedef vec_t<3, V> G;
    LW_FUNC static S& at(V& v, int) { return v; }
    LW_FUNC static const S& at(const V& v, int) { return v; }
    LW_FUNC static S& gat(G& g, int, int d) { return g.c[d]; }
    LW_FUNC static const S& gat(const G& g, int, int d) { return g.c[d]; }
};
template <int L, typename T> struct volume_val<vec_t<L, T>> {
    typedef T S;
    typedef T A;
    static const int N = L;
    typedef mat_t<L, 3, T> G;
    LW_FUNC static S& at(vec_t<L, T>& v, int c) { return v.c[c]; }
    LW_FUNC static const S& at(const vec_t<L, T>& v, int c) { return v.c[c]; }
    LW_FUNC static S& gat(G& g, int c, int d) { return g.c[c * 3 + d]; }
    LW_FUNC static const S& gat(const G& g, int c, int d) { return g.c[c * 3 + d]; }
};

LW_FUNC const volume_t* volume_get(uint64_t id) { return handle_get<volume_t>(id); }

LW_FUNC void volume_copy(void* to, const void* from, uint32_t n) {
    for (uint32_t b = 0; b < n; ++b) ((uint8_t*)to)[b] = ((const uint8_t*)from)[b];
}
template <typename V> LW_FUNC V volume_zero() {  // scalars and vectors
    V r;
    for (uint32_t b = 0; b < sizeof(V); ++b) ((uint8_t*)&r)[b] = 0;
    return r;
}

LW_FUNC bool volume_mask_bit(const uint8_t* mask, uint32_t n) {
    return (((const uint64_t*)mask)[n >> 6] >> (n & 63)) & 1u;
}

// The address of the value voxel (i, j, k) resolves to: its leaf's entry, the value of the tile that
// covers it, or the background. `leaf` receives the leaf (0 for a tile or the background).
LW_FUNC const uint8_t* volume_find(const volume_t& v, int32_t i, int32_t j, int32_t k, const uint8_t*& leaf) {
    leaf = 0;
    const uint8_t* root = (const uint8_t*)v.root;
    const uint32_t x = (uint32_t)i, y = (uint32_t)j, z = (uint32_t)k;
    const uint64_t key = (uint64_t)(z >> 12) | ((uint64_t)(y >> 12) << 21) | ((uint64_t)(x >> 12) << 42);
    const uint8_t* tile = root + v.root_size;
    for (uint32_t t = 0; t < v.root_tiles; ++t, tile += v.root_tile_size) {
        if (*(const uint64_t*)tile != key) continue;
        const int64_t child = *(const int64_t*)(tile + 8);
        if (child == 0) return tile + v.root_tile_value;
        const uint8_t* upper = root + child;
        uint32_t n = (((x & 4095) >> 7) << 10) | (((y & 4095) >> 7) << 5) | ((z & 4095) >> 7);
        const uint8_t* entry = upper + v.upper_table + (uint64_t)n * v.table_stride;
        if (!volume_mask_bit(upper + 4128, n)) return entry;
        const uint8_t* lower = upper + *(const int64_t*)entry;
        n = (((x & 127) >> 3) << 8) | (((y & 127) >> 3) << 4) | ((z & 127) >> 3);
        entry = lower + v.lower_table + (uint64_t)n * v.table_stride;
        if (!volume_mask_bit(lower + 544, n)) return entry;
        leaf = lower + *(const int64_t*)entry;
        n = ((x & 7) << 6) | ((y & 7) << 3) | (z & 7);
        return leaf + v.leaf_table + (uint64_t)n * v.value_size;
    }
    return root + v.root_background;
}

// The 1-based value index of voxel (i, j, k) in an index grid (0: none, the background).
LW_FUNC uint64_t volume_index_of(const volume_t& v, int32_t i, int32_t j, int32_t k) {
    const uint8_t* leaf;
    const uint8_t* a = volume_find(v, i, j, k, leaf);
    if (leaf == 0) return *(const uint64_t*)a;
    const uint32_t n = (((uint32_t)i & 7) << 6) | (((uint32_t)j & 7) << 3) | ((uint32_t)k & 7);
    const uint64_t offset = *(const uint64_t*)(leaf + 80);
    if (v.index_kind == 1) return offset + n;
    const uint64_t word = ((const uint64_t*)(leaf + 16))[n >> 6], bit = (uint64_t)1 << (n & 63);
    if (!(word & bit)) return 0;
    uint64_t sum = (uint64_t)bit_count(word & (bit - 1));
    if (n >= 64) sum += (*(const uint64_t*)(leaf + 88) >> (9 * ((n >> 6) - 1))) & 511u;
    return offset + sum;
}

template <typename V> LW_FUNC V volume_read(const volume_t* v, int32_t i, int32_t j, int32_t k) {
    V out = volume_zero<V>();
    if (v == 0 || v->grid_type != volume_grid_type<V>::value) return out;
    const uint8_t* leaf;
    volume_copy(&out, volume_find(*v, i, j, k, leaf), sizeof(V));
    return out;
}

// a float coordinate's cell, clamped to the int32 range (NaN in cell 0)
LW_FUNC int32_t volume_cell(float x) {
    if (!(x == x)) return 0;
    if (x <= -2147483648.0f) return -2147483647 - 1;
    return x >= 2147483647.0f ? 2147483647 : (int32_t)x;
}

// What sampling reads at a voxel: the grid's own values, or an array indexed by an index grid.
template <typename V> struct volume_values {
    const volume_t* v;
    LW_FUNC V operator()(int32_t i, int32_t j, int32_t k) const { return volume_read<V>(v, i, j, k); }
};
template <typename V> struct volume_indexed {
    const volume_t* v;
    const array_t<V>* data;
    V background;
    LW_FUNC int64_t slot(int32_t i, int32_t j, int32_t k) const {
        if (v == 0 || v->index_kind == 0) return -1;
        const int64_t s = (int64_t)volume_index_of(*v, i, j, k) - 1;
        return s < (int64_t)data->shape[0] ? s : -1;
    }
    LW_FUNC V operator()(int32_t i, int32_t j, int32_t k) const {
        const int64_t s = slot(i, j, k);
        return s >= 0 ? at(*data, s) : background;
    }
};

// Trilinear interpolation: the corner values around uvw (the cell on the positive side of integer
// planes), the fractional position, and the weights' derivatives.
template <typename V> struct volume_cell_t {
    int32_t base[3];
    float f[3];
    LW_FUNC void init(const vec_t<3, float>& uvw) {
        for (int d = 0; d < 3; ++d) {
            const float fl = floor(uvw.c[d]);
            base[d] = volume_cell(fl);
            f[d] = (uvw.c[d] == uvw.c[d]) ? uvw.c[d] - fl : 0.0f;
        }
    }
    // corner q = 4 di + 2 dj + dk: its weight, and the weight's derivative along axis d
    LW_FUNC float w(int q, int d) const { return ((q >> (2 - d)) & 1) ? f[d] : 1.0f - f[d]; }
    LW_FUNC float dw(int q, int d) const { return ((q >> (2 - d)) & 1) ? 1.0f : -1.0f; }
    LW_FUNC float weight(int q) const { return w(q, 0) * w(q, 1) * w(q, 2); }
    LW_FUNC float dweight(int q, int d) const {
        float r = 1.0f;
        for (int e = 0; e < 3; ++e) r *= (e == d) ? dw(q, e) : w(q, e);
        return r;
    }
    LW_FUNC float ddweight(int q, int a, int b) const {  // a != b; the same axis twice gives 0
        float r = 1.0f;
        for (int e = 0; e < 3; ++e) r *= (e == a || e == b) ? dw(q, e) : w(q, e);
        return r;
    }
    LW_FUNC int32_t at(int q, int d) const { return base[d] + ((q >> (2 - d)) & 1); }
};

LW_FUNC int32_t volume_round(float x) { return volume_cell(x < 0.0f ? -floor(0.5f - x) : floor(x + 0.5f)); }

// The sampled value and, when `grad` is given, its gradient with respect to uvw.
template <typename V, typename R>
LW_FUNC V volume_sample_with(const R& read, vec_t<3, float> uvw, int32_t mode, typename volume_val<V>::G* grad) {
    typedef volume_val<V> VV;
    typedef typename VV::A A;
    if (grad) *grad = volume_zero<typename VV::G>();
    if (mode == 0) return read(volume_round(uvw.c[0]), volume_round(uvw.c[1]), volume_round(uvw.c[2]));
    volume_cell_t<V> cell;
    cell.init(uvw);
    A acc[VV::N], dacc[VV::N][3];
    for (int c = 0; c < VV::N; ++c) {
        acc[c] = A(0);
        for (int d = 0; d < 3; ++d) dacc[c][d] = A(0);
    }
    for (int q = 0; q < 8; ++q) {
        const V corner = read(cell.at(q, 0), cell.at(q, 1), cell.at(q, 2));
        const float wq = cell.weight(q);
        for (int c = 0; c < VV::N; ++c) {
            const A x = A(VV::at(corner, c));
            acc[c] += A(wq) * x;
            if (grad)
                for (int d = 0; d < 3; ++d) dacc[c][d] += A(cell.dweight(q, d)) * x;
        }
    }
    V out;
    for (int c = 0; c < VV::N; ++c) {
        VV::at(out, c) = (typename VV::S)acc[c];
        if (grad)
            for (int d = 0; d < 3; ++d) VV::gat(*grad, c, d) = (typename VV::S)dacc[c][d];
    }
    return out;
}

// Reverse mode of sampling: adj_uvw from the adjoint of the value (and of the gradient, through the
// interpolant's second derivatives), and each corner's adjoint weight for `corner_adj(i, j, k, q, w_value)`.
template <typename V, typename R, typename C>
LW_FUNC void adj_volume_sample_with(const R& read, vec_t<3, float> uvw, int32_t mode, vec_t<3, float>& adj_uvw,
                                    const V& adj_value, const typename volume_val<V>::G* adj_grad,
                                    const C& corner_adj) {
    typedef volume_val<V> VV;
    if (mode == 0) {
        corner_adj(volume_round(uvw.c[0]), volume_round(uvw.c[1]), volume_round(uvw.c[2]), adj_value, 1.0f);
        return;
    }
    volume_cell_t<V> cell;
    cell.init(uvw);
    for (int q = 0; q < 8; ++q) {
        const int32_t i = cell.at(q, 0), j = cell.at(q, 1), k = cell.at(q, 2);
        const V corner = read(i, j, k);
        for (int c = 0; c < VV::N; ++c) {
            const float x = (float)VV::at(corner, c), a = (float)VV::at(adj_value, c);
            for (int d = 0; d < 3; ++d) {
                adj_uvw.c[d] += cell.dweight(q, d) * x * a;
                if (adj_grad)
                    for (int e = 0; e < 3; ++e)
                        if (e != d) adj_uvw.c[e] += cell.ddweight(q, d, e) * x * (float)VV::gat(*adj_grad, c, d);
            }
        }
        // the corner's own adjoint: the weight times adj_value, plus the weight's derivatives times adj_grad
        V wa;
        for (int c = 0; c < VV::N; ++c) {
            float s = cell.weight(q) * (float)VV::at(adj_value, c);
            if (adj_grad)
                for (int d = 0; d < 3; ++d)
                    s += cell.dweight(q, d) * (float)VV::gat(*adj_grad, c, d);
            VV::at(wa, c) = (typename VV::S)s;
        }
        corner_adj(i, j, k, wa, 1.0f);
    }
}

struct volume_no_corner_adj {
    template <typename V> LW_FUNC void operator()(int32_t, int32_t, int32_t, const V&, float) const {}
};
template <typename V> struct volume_index_corner_adj {
    const volume_indexed<V>* src;
    V* adj_background;
    LW_FUNC void operator()(int32_t i, int32_t j, int32_t k, const V& a, float) const {
        typedef volume_val<V> VV;
        const int64_t s = src->slot(i, j, k);
        if (s < 0) {
            for (int c = 0; c < VV::N; ++c) VV::at(*adj_background, c) += VV::at(a, c);
        } else if (src->data->grad) {
            V* g = (V*)((char*)grad_ptr(*src->data) + s * src->data->strides[0]);
            for (int c = 0; c < VV::N; ++c) atomic_add(&VV::at(*g, c), VV::at(a, c));
        }
    }
};

// -- the builtins, one set per value type ----------------------------------------------------------

#define LW_VOLUME_TYPED(NAME, V)                                                                              \
    LW_FUNC V volume_sample_##NAME(uint64_t id, vec_t<3, float> uvw, int32_t mode) {                           \
        volume_values<V> r = {volume_get(id)};                                                                  \
        return volume_sample_with<V>(r, uvw, mode, (volume_val<V>::G*)0);                                       \
    }                                                                                                           \
    LW_FUNC void adj_volume_sample_##NAME(uint64_t id, vec_t<3, float> uvw, int32_t mode, uint64_t&,            \
                                          vec_t<3, float>& adj_uvw, int32_t&, const V& adj_ret) {               \
        volume_values<V> r = {volume_get(id)};                                                                  \
        adj_volume_sample_with<V>(r, uvw, mode, adj_uvw, adj_ret, (const volume_val<V>::G*)0,                   \
                                  volume_no_corner_adj());                                                      \
    }                                                                                                           \
    LW_FUNC V volume_sample_grad_##NAME(uint64_t id, vec_t<3, float> uvw, int32_t mode, volume_val<V>::G& g) {  \
        volume_values<V> r = {volume_get(id)};                                                                  \
        return volume_sample_with<V>(r, uvw, mode, &g);                                                         \
    }                                                                                                           \
    template <typename RA>                                                                                      \
    LW_FUNC void adj_volume_sample_grad_##NAME(uint64_t id, vec_t<3, float> uvw, int32_t mode, uint64_t&,       \
                                               vec_t<3, float>& adj_uvw, int32_t&, const RA& a) {               \
        volume_values<V> r = {volume_get(id)};                                                                  \
        adj_volume_sample_with<V>(r, uvw, mode, adj_uvw, a.f0, &a.f1, volume_no_corner_adj());                  \
    }                                                                                                           \
    LW_FUNC V volume_lookup_##NAME(uint64_t id, int32_t i, int32_t j, int32_t k) {                              \
        return volume_read<V>(volume_get(id), i, j, k);                                                         \
    }

typedef vec_t<3, float> volume_vec3f;
typedef vec_t<3, double> volume_vec3d;
typedef vec_t<4, float> volume_vec4f;
typedef vec_t<4, double> volume_vec4d;
LW_VOLUME_TYPED(float32, float)
LW_VOLUME_TYPED(float64, double)
LW_VOLUME_TYPED(int32, int32_t)
LW_VOLUME_TYPED(int64, int64_t)
LW_VOLUME_TYPED(uint32, uint32_t)
LW_VOLUME_TYPED(vec3f, volume_vec3f)
LW_VOLUME_TYPED(vec3d, volume_vec3d)
LW_VOLUME_TYPED(vec4f, volume_vec4f)
LW_VOLUME_TYPED(vec4d, volume_vec4d)
#undef LW_VOLUME_TYPED
// Warp's volume_sample_i(id, uvw): the closest voxel
LW_FUNC int32_t volume_sample_closest_int32(uint64_t id, vec_t<3, float> uvw) { return volume_sample_int32(id, uvw, 0); }

// Store into a voxel that has leaf storage in a grid of V (anywhere else: nothing happens).
template <typename V> LW_FUNC void volume_store(uint64_t id, int32_t i, int32_t j, int32_t k, V value) {
    const volume_t* v = volume_get(id);
    if (v == 0 || v->grid_type != volume_grid_type<V>::value) return;
    const uint8_t* leaf;
    const uint8_t* a = volume_find(*v, i, j, k, leaf);
    if (leaf != 0) volume_copy((void*)a, &value, sizeof(V));
}

// index grids: a voxel's 0-based index (-1: none), and values sampled from an array by it
LW_FUNC int32_t volume_lookup_index(uint64_t id, int32_t i, int32_t j, int32_t k) {
    const volume_t* v = volume_get(id);
    if (v == 0 || v->index_kind == 0) return -1;
    return (int32_t)((int64_t)volume_index_of(*v, i, j, k) - 1);
}
LW_FUNC int32_t volume_voxel_count(uint64_t id) {
    const volume_t* v = volume_get(id);
    return v ? v->voxel_count : 0;
}
template <typename V>
LW_FUNC V volume_sample_index(uint64_t id, vec_t<3, float> uvw, int32_t mode, const array_t<V>& data, V background) {
    volume_indexed<V> r = {volume_get(id), &data, background};
    return volume_sample_with<V>(r, uvw, mode, (typename volume_val<V>::G*)0);
}
template <typename V>
LW_FUNC void adj_volume_sample_index(uint64_t id, vec_t<3, float> uvw, int32_t mode, const array_t<V>& data,
                                     V background, uint64_t&, vec_t<3, float>& adj_uvw, int32_t&, V& adj_background,
                                     const V& adj_ret) {
    volume_indexed<V> r = {volume_get(id), &data, background};
    volume_index_corner_adj<V> c = {&r, &adj_background};
    adj_volume_sample_with<V>(r, uvw, mode, adj_uvw, adj_ret, (const typename volume_val<V>::G*)0, c);
}
template <typename V, typename G>
LW_FUNC V volume_sample_grad_index(uint64_t id, vec_t<3, float> uvw, int32_t mode, const array_t<V>& data,
                                   V background, G& grad) {
    volume_indexed<V> r = {volume_get(id), &data, background};
    return volume_sample_with<V>(r, uvw, mode, &grad);
}
template <typename V, typename RA>
LW_FUNC void adj_volume_sample_grad_index(uint64_t id, vec_t<3, float> uvw, int32_t mode, const array_t<V>& data,
                                          V background, uint64_t&, vec_t<3, float>& adj_uvw, int32_t&,
                                          V& adj_background, const RA& a) {
    volume_indexed<V> r = {volume_get(id), &data, background};
    volume_index_corner_adj<V> c = {&r, &adj_background};
    adj_volume_sample_with<V>(r, uvw, mode, adj_uvw, a.f0, &a.f1, c);
}

// -- index <-> world ------------------------------------------------------------------------------
// The grid's map: world = M ijk + t (M row-major), index = M^-1 (world - t); float and double copies.

template <typename T> LW_FUNC const T* volume_map(const volume_t* v, int part) {
    // part 0: M, 1: M^-1, 2: t
    const uint32_t base = sizeof(T) == 4 ? 296 : 384;
    return (const T*)((const uint8_t*)v->grid + base + part * 9 * sizeof(T));
}
template <typename T> LW_FUNC vec_t<3, T> volume_apply(const volume_t* v, int part, vec_t<3, T> p, bool translate,
                                                      bool transpose) {
    vec_t<3, T> r = volume_zero<vec_t<3, T>>();
    if (v == 0) return r;
    const T* m = volume_map<T>(v, part);
    const T* t = volume_map<T>(v, 2);
    if (translate && part == 1)
        for (int d = 0; d < 3; ++d) p.c[d] -= t[d];
    for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) r.c[a] += (transpose ? m[b * 3 + a] : m[a * 3 + b]) * p.c[b];
    if (translate && part == 0)
        for (int d = 0; d < 3; ++d) r.c[d] += t[d];
    return r;
}

#define LW_VOLUME_MAP(NAME, PART, TRANSLATE)                                                                   \
    template <typename T> LW_FUNC vec_t<3, T> NAME(uint64_t id, vec_t<3, T> p) {                               \
        return volume_apply<T>(volume_get(id), PART, p, TRANSLATE, false);                                      \
    }                                                                                                           \
    template <typename T>                                                                                       \
    LW_FUNC void adj_##NAME(uint64_t id, vec_t<3, T> p, uint64_t&, vec_t<3, T>& adj_p, const vec_t<3, T>& adj_ret) { \
        const vec_t<3, T> g = volume_apply<T>(volume_get(id), PART, adj_ret, false, true);                      \
        for (int d = 0; d < 3; ++d) adj_p.c[d] += g.c[d];                                                       \
    }
LW_VOLUME_MAP(volume_index_to_world, 0, true)
LW_VOLUME_MAP(volume_world_to_index, 1, true)
LW_VOLUME_MAP(volume_index_to_world_dir, 0, false)
LW_VOLUME_MAP(volume_world_to_index_dir, 1, false)
#undef LW_VOLUME_MAP

}  // namespace lw
