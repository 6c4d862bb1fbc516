// Tiles: block-wide values of a compile-time shape (wp.tile_* builtins). Included inside namespace lw by
// loomwork.h. On the CPU a block runs as one task and every tile operation is a loop over the tile's
// elements that the compiler turns into SIMD code; tile_matmul has a register-blocked kernel for float32.
// A tile is a value: assignment copies, as Warp's register tiles do. With wp.config.enable_cpu_blocks the
// block's lanes run together (lanes.h): the operations that depend on the lane (wp.tile, untile, the random
// tiles, tile_from_thread, partial blocks' reductions) ask lanes.h which lane runs.

// -- the type ------------------------------------------------------------------------------------

template <typename T, int R, int D0, int D1 = 1, int D2 = 1, int D3 = 1> struct tile_t {
    using value_type = T;
    static constexpr int rank = R;
    static constexpr int d0 = D0, d1 = D1, d2 = D2, d3 = D3;
    static constexpr int size = D0 * D1 * D2 * D3;
    alignas(64) T c[size > 0 ? size : 1];
};

template <typename X> struct tile_bare { using type = X; };
template <typename X> struct tile_bare<X&> { using type = typename tile_bare<X>::type; };
template <typename X> struct tile_bare<X&&> { using type = typename tile_bare<X>::type; };
template <typename X> struct tile_bare<const X> { using type = typename tile_bare<X>::type; };
template <typename T> struct tile_is_f32 { static constexpr bool value = false; };
template <> struct tile_is_f32<float> { static constexpr bool value = true; };
#if !LW_CUDA
typedef float tile_f8 __attribute__((vector_size(32)));
LW_FUNC tile_f8 tile_ld8(const float* p) { tile_f8 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
LW_FUNC void tile_st8(float* p, tile_f8 v) { __builtin_memcpy(p, &v, sizeof(v)); }
// c + a * b rounded once, the GEMM kernels' step (builds use -ffp-contract=off, so a fused step is spelled out)
LW_FUNC tile_f8 tile_fma(float a, tile_f8 b, tile_f8 c) {
#if defined(__FMA__)
    return __builtin_ia32_vfmaddps256(a - tile_f8{}, b, c);
#else
    return c + a * b;
#endif
}
#if defined(__AVX512F__)
typedef float tile_f16 __attribute__((vector_size(64)));
LW_FUNC tile_f16 tile_ld16(const float* p) { tile_f16 v; __builtin_memcpy(&v, p, sizeof(v)); return v; }
LW_FUNC void tile_st16(float* p, tile_f16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
LW_FUNC tile_f16 tile_fma(float a, tile_f16 b, tile_f16 c) {
    return __builtin_ia32_vfmaddps512_mask(a - tile_f16{}, b, c, (unsigned short)0xffff, 4);
}
#endif
#endif

template <typename X> struct is_tile { static constexpr bool value = false; };
template <typename T, int R, int A, int B, int C, int D> struct is_tile<tile_t<T, R, A, B, C, D>> {
    static constexpr bool value = true;
};

// element i of a tile, or the value itself for a scalar (a constant operand broadcast over the tile)
template <typename X> LW_FUNC decltype(auto) tile_el(X&& x, int i) {
    if constexpr (is_tile<typename tile_bare<X>::type>::value) {
        return (x.c[i]);
    } else {
        return (x);
    }
}

template <typename T, int R, int A, int B, int C, int D>
LW_FUNC void acc(tile_t<T, R, A, B, C, D>& a, const tile_t<T, R, A, B, C, D>& b) {
    for (int i = 0; i < tile_t<T, R, A, B, C, D>::size; ++i) a.c[i] = add(a.c[i], b.c[i]);
}

// the flat index of coordinates, and the coordinates of a flat index (row-major)
template <typename Tl> LW_FUNC void tile_coords(int i, int* x) {
    x[3] = i % Tl::d3; i /= Tl::d3;
    x[2] = i % Tl::d2; i /= Tl::d2;
    x[1] = i % Tl::d1; i /= Tl::d1;
    x[0] = i;
}
// a tile's coordinates as the leading `rank` ones (a rank-2 tile keeps its coordinates in x[0], x[1])
template <typename Tl> LW_FUNC void tile_coords_ranked(int i, int* x) {
    int y[4];
    tile_coords<Tl>(i, y);
    for (int d = 0; d < 4; ++d) x[d] = 0;
    for (int d = 0; d < Tl::rank; ++d) x[d] = y[d];
}
template <typename Tl> LW_FUNC int tile_dim(int d) {
    return d == 0 ? Tl::d0 : d == 1 ? Tl::d1 : d == 2 ? Tl::d2 : Tl::d3;
}

// -- construction --------------------------------------------------------------------------------

template <typename Tl> LW_FUNC Tl tile_full(typename Tl::value_type v) {
    Tl r;
    for (int i = 0; i < Tl::size; ++i) r.c[i] = v;
    return r;
}
template <typename Tl> LW_FUNC void adj_tile_full(typename Tl::value_type v, typename Tl::value_type& adj_v, const Tl& adj) {
    for (int i = 0; i < Tl::size; ++i) acc(adj_v, adj.c[i]);
}
template <typename Tl> LW_FUNC Tl tile_arange(typename Tl::value_type start, typename Tl::value_type step) {
    Tl r;
    for (int i = 0; i < Tl::size; ++i) r.c[i] = typename Tl::value_type(start + typename Tl::value_type(i) * step);
    return r;
}
// wp.tile(x): each lane's value as element `lane` of a tile of the block (a vector's components down
// column `lane`). Outside a block of lanes there is one lane; with lanes (kernels/codegen.py) each lane writes
// its own element into the block's tile d, in turn (tile_of_lane: d with this lane's part replaced).
template <typename Tl, typename X> LW_FUNC void tile_put_lane(Tl& r, const X& x, int lane) {
    if constexpr (Tl::rank == 2) {
        for (int i = 0; i < Tl::d0; ++i) r.c[i * Tl::d1 + lane] = x.c[i];
    } else {
        r.c[lane] = x;
    }
}
template <typename Tl, typename X> LW_FUNC Tl tile_of(X x) {
    Tl r;
    tile_put_lane(r, x, 0);
    return r;
}
template <typename Tl, typename X> LW_FUNC Tl tile_of_lane(const Tl& d, X x) {
    Tl r = d;
    tile_put_lane(r, x, blk_lane());
    return r;
}
// element `lane` (column `lane` for a vector's tile) of a tile, as a value of type X
template <typename X, typename Tl> LW_FUNC X tile_get_lane(const Tl& t, int lane) {
    X r{};
    if constexpr (Tl::rank == 2) {
        for (int i = 0; i < Tl::d0; ++i) r.c[i] = t.c[i * Tl::d1 + lane];
    } else {
        r = t.c[lane];
    }
    return r;
}
// whether flat element i of a tile made by wp.tile() is lane `lane`'s
template <typename Tl> LW_FUNC bool tile_in_lane(int i, int lane) {
    return (Tl::rank == 2 ? i % Tl::d1 : i) == lane;
}
template <typename Tl, typename X> LW_FUNC void adj_tile_of(X x, X& adj_x, const Tl& adj) {
    acc(adj_x, tile_get_lane<X>(adj, 0));
}
template <typename Tl, typename X> LW_FUNC void adj_tile_of_lane(const Tl& d, X x, Tl& adj_d, X& adj_x, const Tl& adj) {
    const int lane = blk_lane();
    acc(adj_x, tile_get_lane<X>(adj, lane));
    for (int i = 0; i < Tl::size; ++i)
        if (!tile_in_lane<Tl>(i, lane)) acc(adj_d.c[i], adj.c[i]);
}
// wp.untile(t): this lane's element (lane 0 outside a block of lanes)
template <typename X, typename Tl> LW_FUNC X untile(const Tl& t) { return tile_get_lane<X>(t, blk_lane()); }
template <typename X, typename Tl> LW_FUNC void adj_untile(const Tl& t, Tl& adj_t, X adj) {
    const int lane = blk_lane();
    if constexpr (Tl::rank == 2) {
        for (int i = 0; i < Tl::d0; ++i) acc(adj_t.c[i * Tl::d1 + lane], adj.c[i]);
    } else {
        acc(adj_t.c[lane], adj);
    }
}

// -- memory: load, store, atomic add (elements outside the array read as zero and are not written) --

template <int N, typename T> LW_FUNC bool tile_in(const array_t<T>& a, const int64_t* x) {
    for (int d = 0; d < N; ++d)
        if (x[d] < 0 || x[d] >= a.shape[d]) return false;
    return true;
}
template <int N, typename T> LW_FUNC T& tile_at(const array_t<T>& a, const int64_t* x) {
    char* p = (char*)a.data;
    for (int d = 0; d < N; ++d) p += x[d] * a.strides[d];
    return *(T*)p;
}
template <int N, typename T> LW_FUNC T& tile_grad_at(const array_t<T>& a, const int64_t* x) {
    char* p = (char*)grad_ptr(a);
    for (int d = 0; d < N; ++d) p += x[d] * a.strides[d];
    return *(T*)p;
}

// visit(flat tile index, array coordinates) for each element of a tile of type Tl placed at offset `o` in
// an N-dimensional array: the tile's axes map onto the array's last Tl::rank axes (the leading ones are
// fixed by the offset)
template <typename Tl, int N, typename F> LW_FUNC void tile_visit(const int64_t* o, F&& visit) {
    int64_t x[4];
    for (int i = 0; i < Tl::size; ++i) {
        int c[4];
        tile_coords_ranked<Tl>(i, c);
        for (int d = 0; d < N; ++d) x[d] = o[d];
        for (int d = 0; d < Tl::rank; ++d) x[N - Tl::rank + d] += c[d];
        visit(i, x);
    }
}

#if !LW_CUDA
// Tiled loops walk an array tile by tile, along one axis or the other; rows of a wide array lie in different
// pages, out of the hardware prefetcher's reach. Loading a 2-D tile asks for the cache lines of its two
// successors (the next tile to the right and the one below, where they lie in the array) so that they arrive
// while the block computes on this one.
template <typename Tl, typename T> LW_FUNC void tile_prefetch_next(const array_t<T>& a, int64_t r0, int64_t c0) {
    constexpr int row_bytes = Tl::d1 * (int)sizeof(T);
    if (row_bytes < 64) return;
    const char* base = (const char*)a.data;
    if (c0 + 2 * Tl::d1 <= a.shape[1])
        for (int i = 0; i < Tl::d0; ++i)
            for (int b = 0; b < row_bytes; b += 64)
                __builtin_prefetch(base + (r0 + i) * a.strides[0] + (c0 + Tl::d1) * (int64_t)sizeof(T) + b, 0, 2);
    if (r0 + 2 * Tl::d0 <= a.shape[0])
        for (int i = Tl::d0; i < 2 * Tl::d0; ++i)
            for (int b = 0; b < row_bytes; b += 64)
                __builtin_prefetch(base + (r0 + i) * a.strides[0] + c0 * (int64_t)sizeof(T) + b, 0, 2);
}
#endif

template <typename Tl, int N, typename T, typename... O> LW_FUNC Tl tile_load(const array_t<T>& a, O... off) {
    const int64_t o[4] = {(int64_t)off...};
    Tl r;
    if constexpr (N == 2 && Tl::rank == 2) {  // rows at a time: contiguous copies the compiler vectorizes
        if (o[0] >= 0 && o[1] >= 0 && o[0] + Tl::d0 <= a.shape[0] && o[1] + Tl::d1 <= a.shape[1] &&
            a.strides[1] == (int64_t)sizeof(T)) {
#if !LW_CUDA
            tile_prefetch_next<Tl>(a, o[0], o[1]);
#endif
            for (int i = 0; i < Tl::d0; ++i) {
                const T* src = (const T*)((const char*)a.data + (o[0] + i) * a.strides[0]) + o[1];
                for (int j = 0; j < Tl::d1; ++j) r.c[i * Tl::d1 + j] = src[j];
            }
            return r;
        }
    }
    if constexpr (N == 1 && Tl::rank == 1) {
        if (o[0] >= 0 && o[0] + Tl::d0 <= a.shape[0] && a.strides[0] == (int64_t)sizeof(T)) {
            const T* src = a.data + o[0];
            for (int i = 0; i < Tl::d0; ++i) r.c[i] = src[i];
            return r;
        }
    }
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) { r.c[i] = tile_in<N>(a, x) ? tile_at<N>(a, x) : T{}; });
    return r;
}
template <typename Tl, int N, typename T, typename... O> LW_FUNC void adj_tile_load_impl(const array_t<T>& a,
                                                                                          const Tl& adj, O... off) {
    if (!a.grad) return;
    const int64_t o[4] = {(int64_t)off...};
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) {
        if (tile_in<N>(a, x)) atomic_add(&tile_grad_at<N>(a, x), adj.c[i]);
    });
}
// adjoint calling convention: (array, offsets..., adj_offsets&..., adj_ret)
template <typename Tl, int N, typename T> LW_FUNC void adj_tile_load(const array_t<T>& a, const Tl& adj) {
    adj_tile_load_impl<Tl, N>(a, adj);
}
template <typename Tl, int N, typename T> LW_FUNC void adj_tile_load(const array_t<T>& a, int32_t o0, int32_t&,
                                                                      const Tl& adj) {
    adj_tile_load_impl<Tl, N>(a, adj, o0);
}
template <typename Tl, int N, typename T> LW_FUNC void adj_tile_load(const array_t<T>& a, int32_t o0, int32_t o1,
                                                                      int32_t&, int32_t&, const Tl& adj) {
    adj_tile_load_impl<Tl, N>(a, adj, o0, o1);
}
template <typename Tl, int N, typename T> LW_FUNC void adj_tile_load(const array_t<T>& a, int32_t o0, int32_t o1,
                                                                      int32_t o2, int32_t&, int32_t&, int32_t&,
                                                                      const Tl& adj) {
    adj_tile_load_impl<Tl, N>(a, adj, o0, o1, o2);
}
template <typename Tl, int N, typename T> LW_FUNC void adj_tile_load(const array_t<T>& a, int32_t o0, int32_t o1,
                                                                      int32_t o2, int32_t o3, int32_t&, int32_t&,
                                                                      int32_t&, int32_t&, const Tl& adj) {
    adj_tile_load_impl<Tl, N>(a, adj, o0, o1, o2, o3);
}

template <int N, typename T, typename Tl, typename... O> LW_FUNC void tile_store(const array_t<T>& a, const Tl& t,
                                                                                 O... off) {
    const int64_t o[4] = {(int64_t)off...};
    if constexpr (N == 2 && Tl::rank == 2) {
        if (o[0] >= 0 && o[1] >= 0 && o[0] + Tl::d0 <= a.shape[0] && o[1] + Tl::d1 <= a.shape[1] &&
            a.strides[1] == (int64_t)sizeof(T)) {
            for (int i = 0; i < Tl::d0; ++i) {
                T* dst = (T*)((char*)a.data + (o[0] + i) * a.strides[0]) + o[1];
                for (int j = 0; j < Tl::d1; ++j) dst[j] = t.c[i * Tl::d1 + j];
            }
            return;
        }
    }
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) {
        if (tile_in<N>(a, x)) tile_at<N>(a, x) = t.c[i];
    });
}
// the adjoint of a store (or an atomic add) reads the array's gradient over the tile's region
template <int N, typename T, typename Tl, typename... O> LW_FUNC void tile_region_grad(const array_t<T>& a, Tl& adj_t,
                                                                                       O... off) {
    if (!a.grad) return;
    const int64_t o[4] = {(int64_t)off...};
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) {
        if (tile_in<N>(a, x)) acc(adj_t.c[i], tile_grad_at<N>(a, x));
    });
}
// the adjoint of a store: the tile takes the region's gradient, which is then zeroed, as an element store's is:
// the values the store replaced did not reach the output through the region (kept for retain_grad arrays)
template <int N, typename T, typename Tl, typename... O> LW_FUNC void tile_region_take_grad(const array_t<T>& a,
                                                                                            Tl& adj_t, O... off) {
    tile_region_grad<N>(a, adj_t, off...);
    if (!a.grad || retains_grad(a)) return;
    const int64_t o[4] = {(int64_t)off...};
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) {
        if (tile_in<N>(a, x)) tile_grad_at<N>(a, x) = T{};
    });
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_store(const array_t<T>& a, const Tl& t, Tl& adj_t) {
    tile_region_take_grad<N>(a, adj_t);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_store(const array_t<T>& a, const Tl& t, int32_t o0,
                                                                       Tl& adj_t, int32_t&) {
    tile_region_take_grad<N>(a, adj_t, o0);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_store(const array_t<T>& a, const Tl& t, int32_t o0,
                                                                       int32_t o1, Tl& adj_t, int32_t&, int32_t&) {
    tile_region_take_grad<N>(a, adj_t, o0, o1);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_store(const array_t<T>& a, const Tl& t, int32_t o0,
                                                                       int32_t o1, int32_t o2, Tl& adj_t, int32_t&,
                                                                       int32_t&, int32_t&) {
    tile_region_take_grad<N>(a, adj_t, o0, o1, o2);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_store(const array_t<T>& a, const Tl& t, int32_t o0,
                                                                       int32_t o1, int32_t o2, int32_t o3, Tl& adj_t,
                                                                       int32_t&, int32_t&, int32_t&, int32_t&) {
    tile_region_take_grad<N>(a, adj_t, o0, o1, o2, o3);
}

// atomic add of a tile into an array region: returns the previous values
template <int N, typename T, typename Tl, typename... O> LW_FUNC Tl tile_atomic_add(const array_t<T>& a, const Tl& t,
                                                                                    O... off) {
    const int64_t o[4] = {(int64_t)off...};
    Tl r;
    tile_visit<Tl, N>(o, [&](int i, const int64_t* x) {
        r.c[i] = tile_in<N>(a, x) ? atomic_add(&tile_at<N>(a, x), t.c[i]) : T{};
    });
    return r;
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                                 Tl& adj_t) {
    tile_region_grad<N>(a, adj_t);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                                 int32_t o0, Tl& adj_t, int32_t&) {
    tile_region_grad<N>(a, adj_t, o0);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                                 int32_t o0, int32_t o1, Tl& adj_t,
                                                                                 int32_t&, int32_t&) {
    tile_region_grad<N>(a, adj_t, o0, o1);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                                 int32_t o0, int32_t o1, int32_t o2,
                                                                                 Tl& adj_t, int32_t&, int32_t&,
                                                                                 int32_t&) {
    tile_region_grad<N>(a, adj_t, o0, o1, o2);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                                 Tl& adj_t, const Tl& adj) {
    tile_region_grad<N>(a, adj_t);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                            int32_t o0, Tl& adj_t, int32_t&,
                                                                            const Tl& adj) {
    tile_region_grad<N>(a, adj_t, o0);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                            int32_t o0, int32_t o1, Tl& adj_t,
                                                                            int32_t&, int32_t&, const Tl& adj) {
    tile_region_grad<N>(a, adj_t, o0, o1);
}
template <int N, typename T, typename Tl> LW_FUNC void adj_tile_atomic_add_tail(const array_t<T>& a, const Tl& t,
                                                                            int32_t o0, int32_t o1, int32_t o2,
                                                                            Tl& adj_t, int32_t&, int32_t&, int32_t&,
                                                                            const Tl& adj) {
    tile_region_grad<N>(a, adj_t, o0, o1, o2);
}

// adj_tile_atomic_add(array, tile, offsets..., adjoints...[, adj_ret]): without the result's adjoint (the previous values were not used) it is the store's adjoint
template <int N, typename T, typename Tl, typename... R> LW_FUNC void adj_tile_atomic_add(const array_t<T>& a,
                                                                                          const Tl& t, R&&... rest) {
    adj_tile_atomic_add_tail<N>(a, t, rest...);
}

// -- gathers and scatters along one axis through a 1-D tile of indices (tile_load_indexed & co.): tile
// element c sits at o[d] + c[d] on every axis but Axis, and at o[Axis] + idx[c[Axis]] on Axis; elements
// outside the array read as zero and are not written --

template <typename Tl, int Axis, typename Ti, typename F> LW_FUNC void tile_visit_indexed(const Ti& idx,
                                                                                          const int64_t* o, F&& visit) {
    int64_t x[4];
    for (int i = 0; i < Tl::size; ++i) {
        int c[4];
        tile_coords_ranked<Tl>(i, c);
        for (int d = 0; d < Tl::rank; ++d) x[d] = o[d] + (d == Axis ? (int64_t)idx.c[c[d]] : (int64_t)c[d]);
        visit(i, x);
    }
}
template <typename Tl, int Axis, typename T, typename Ti> LW_FUNC Tl tile_load_indexed(const array_t<T>& a,
        const Ti& idx, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    const int64_t o[4] = {o0, o1, o2, o3};
    Tl r;
    tile_visit_indexed<Tl, Axis>(idx, o, [&](int i, const int64_t* x) {
        r.c[i] = tile_in<Tl::rank>(a, x) ? tile_at<Tl::rank>(a, x) : T{};
    });
    return r;
}
template <typename Tl, int Axis, typename T, typename Ti> LW_FUNC void adj_tile_load_indexed(const array_t<T>& a,
        const Ti& idx, int32_t o0, int32_t o1, int32_t o2, int32_t o3, Ti&, int32_t&, int32_t&, int32_t&, int32_t&,
        const Tl& adj) {
    if (!a.grad) return;
    const int64_t o[4] = {o0, o1, o2, o3};
    tile_visit_indexed<Tl, Axis>(idx, o, [&](int i, const int64_t* x) {
        if (tile_in<Tl::rank>(a, x)) atomic_add(&tile_grad_at<Tl::rank>(a, x), adj.c[i]);
    });
}
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC void tile_store_indexed(const array_t<T>& a,
        const Ti& idx, const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    const int64_t o[4] = {o0, o1, o2, o3};
    tile_visit_indexed<Tl, Axis>(idx, o, [&](int i, const int64_t* x) {
        if (tile_in<Tl::rank>(a, x)) tile_at<Tl::rank>(a, x) = t.c[i];
    });
}
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC void tile_indexed_grad(const array_t<T>& a,
        const Ti& idx, Tl& adj_t, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    if (!a.grad) return;
    const int64_t o[4] = {o0, o1, o2, o3};
    tile_visit_indexed<Tl, Axis>(idx, o, [&](int i, const int64_t* x) {
        if (tile_in<Tl::rank>(a, x)) acc(adj_t.c[i], tile_grad_at<Tl::rank>(a, x));
    });
}
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC void adj_tile_store_indexed(const array_t<T>& a,
        const Ti& idx, const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3, Ti&, Tl& adj_t, int32_t&,
        int32_t&, int32_t&, int32_t&) {
    tile_indexed_grad<Axis>(a, idx, adj_t, o0, o1, o2, o3);
}
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC Tl tile_atomic_add_indexed(const array_t<T>& a,
        const Ti& idx, const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    const int64_t o[4] = {o0, o1, o2, o3};
    Tl r;
    tile_visit_indexed<Tl, Axis>(idx, o, [&](int i, const int64_t* x) {
        r.c[i] = tile_in<Tl::rank>(a, x) ? atomic_add(&tile_at<Tl::rank>(a, x), t.c[i]) : T{};
    });
    return r;
}
// without the result's adjoint (the previous values were not used) and with it (they carry none)
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC void adj_tile_atomic_add_indexed(
        const array_t<T>& a, const Ti& idx, const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3, Ti&,
        Tl& adj_t, int32_t&, int32_t&, int32_t&, int32_t&) {
    tile_indexed_grad<Axis>(a, idx, adj_t, o0, o1, o2, o3);
}
template <int Axis, typename T, typename Ti, typename Tl> LW_FUNC void adj_tile_atomic_add_indexed(
        const array_t<T>& a, const Ti& idx, const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3, Ti&,
        Tl& adj_t, int32_t&, int32_t&, int32_t&, int32_t&, const Tl&) {
    tile_indexed_grad<Axis>(a, idx, adj_t, o0, o1, o2, o3);
}

// t[idx, :] (an index tile on axis Axis, full slices elsewhere): a copy of the rows idx picks (negative
// indices count from the end); the adjoint adds each row's gradient back where it came from
template <typename Tr, int Axis, typename Ts> LW_FUNC int tile_gather_source(int i, const int32_t* picks) {
    int c[4];
    tile_coords_ranked<Tr>(i, c);
    int32_t k = picks[c[Axis]];
    c[Axis] = k < 0 ? k + tile_dim<Ts>(Axis) : k;
    int flat = 0;
    for (int d = 0; d < Ts::rank; ++d) flat = flat * tile_dim<Ts>(d) + c[d];
    return flat;
}
template <typename Tr, int Axis, typename Ts, typename Ti> LW_FUNC Tr tile_gather(const Ts& t, const Ti& idx) {
    Tr r;
    for (int i = 0; i < Tr::size; ++i) r.c[i] = t.c[tile_gather_source<Tr, Axis, Ts>(i, idx.c)];
    return r;
}
template <typename Tr, int Axis, typename Ts, typename Ti> LW_FUNC void adj_tile_gather(const Ts& t, const Ti& idx,
                                                                                        Ts& adj_t, Ti&, const Tr& adj) {
    for (int i = 0; i < Tr::size; ++i) acc(adj_t.c[tile_gather_source<Tr, Axis, Ts>(i, idx.c)], adj.c[i]);
}

// -- elementwise: one functor applied over the elements of its tile operands (scalars broadcast) ----

template <typename X, bool IsTile> struct tile_sz { static constexpr int value = 0; };
template <typename X> struct tile_sz<X, true> { static constexpr int value = X::size; };

template <typename Rt, typename F> struct tile_apply_t {
    F f;
    template <typename... A> LW_FUNC Rt operator()(const A&... a) const {
        Rt r;
        for (int i = 0; i < Rt::size; ++i) r.c[i] = f(tile_el(a, i)...);
        return r;
    }
};
template <typename Rt, typename F> LW_FUNC tile_apply_t<Rt, F> tile_apply(F f) { return {f}; }

// the element count of the first tile among types X... (0: none)
template <typename... X> struct tile_first_size { static constexpr int value = 0; };
template <typename X, typename... R> struct tile_first_size<X, R...> {
    static constexpr int value = tile_sz<X, is_tile<X>::value>::value ? tile_sz<X, is_tile<X>::value>::value
                                                                         : tile_first_size<R...>::value;
};

// the adjoint: f(inputs..., adj_inputs&..., adj_ret) per element; a scalar's adjoint sums over the tile
template <typename F> struct tile_apply_adj_t {
    F f;
    template <typename... A> LW_FUNC void operator()(A&&... a) const {
        constexpr int n = tile_first_size<typename tile_bare<A>::type...>::value;
        for (int i = 0; i < n; ++i) f(tile_el(a, i)...);
    }
};
template <typename F> LW_FUNC tile_apply_adj_t<F> tile_apply_adj(F f) { return {f}; }

#define LW_TILE_FN(fn) [](const auto&... lw_x) { return fn(lw_x...); }
#define LW_TILE_ADJ(fn) [](auto&&... lw_x) { fn(lw_x...); }

template <typename Rt, typename Tl> LW_FUNC Rt tile_astype(const Tl& t) {
    Rt r;
    for (int i = 0; i < Rt::size; ++i) r.c[i] = cast<typename Rt::value_type>(t.c[i]);
    return r;
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_astype(const Tl& t, Tl& adj_t, const Rt& adj) {
    for (int i = 0; i < Rt::size; ++i) acc(adj_t.c[i], cast<typename Tl::value_type>(adj.c[i]));
}

// -- shape: extract, view, transpose, broadcast, reshape --------------------------------------

template <typename Tl> LW_FUNC int tile_flat(int i, int j = 0, int k = 0, int l = 0) {
    const int x[4] = {i, j, k, l};
    int f = 0;
    for (int d = 0; d < Tl::rank; ++d) {
        int v = x[d] < 0 ? x[d] + tile_dim<Tl>(d) : x[d];
        v = v < 0 ? 0 : v >= tile_dim<Tl>(d) ? tile_dim<Tl>(d) - 1 : v;
        f = f * tile_dim<Tl>(d) + v;
    }
    return f;
}
template <typename Tl, typename... I> LW_FUNC typename Tl::value_type tile_extract(const Tl& t, I... i) {
    return t.c[tile_flat<Tl>(i...)];
}
template <typename Tl> LW_FUNC void adj_tile_extract(const Tl& t, int32_t i, Tl& adj_t, int32_t&,
                                                     typename Tl::value_type adj) {
    acc(adj_t.c[tile_flat<Tl>(i)], adj);
}
template <typename Tl> LW_FUNC void adj_tile_extract(const Tl& t, int32_t i, int32_t j, Tl& adj_t, int32_t&, int32_t&,
                                                     typename Tl::value_type adj) {
    acc(adj_t.c[tile_flat<Tl>(i, j)], adj);
}
template <typename Tl> LW_FUNC void adj_tile_extract(const Tl& t, int32_t i, int32_t j, int32_t k, Tl& adj_t, int32_t&,
                                                     int32_t&, int32_t&, typename Tl::value_type adj) {
    acc(adj_t.c[tile_flat<Tl>(i, j, k)], adj);
}
template <typename Tl> LW_FUNC void adj_tile_extract(const Tl& t, int32_t i, int32_t j, int32_t k, int32_t l,
                                                     Tl& adj_t, int32_t&, int32_t&, int32_t&, int32_t&,
                                                     typename Tl::value_type adj) {
    acc(adj_t.c[tile_flat<Tl>(i, j, k, l)], adj);
}
// t[i, j] = v: the tile with one element replaced
template <typename Tl, typename... I> LW_FUNC Tl tile_with(const Tl& t, typename Tl::value_type v, I... i) {
    Tl r = t;
    r.c[tile_flat<Tl>(i...)] = v;
    return r;
}

// a sub-tile of type Rt at offset o of t (its leading axes fixed, the rest starting at the offsets;
// elements past t's end read as zero)
template <typename Rt, typename Tl> LW_FUNC void tile_view_map(const int* o, int i, int& src, bool& in) {
    int c[4];
    tile_coords_ranked<Rt>(i, c);
    int x[4] = {o[0], o[1], o[2], o[3]};
    for (int d = 0; d < Rt::rank; ++d) x[Tl::rank - Rt::rank + d] += c[d];
    src = 0;
    in = true;
    for (int d = 0; d < Tl::rank; ++d) {
        if (x[d] < 0 || x[d] >= tile_dim<Tl>(d)) in = false;
        src = src * tile_dim<Tl>(d) + x[d];
    }
}
template <typename Rt, typename Tl, typename... O> LW_FUNC Rt tile_view(const Tl& t, O... off) {
    const int o[4] = {(int)off..., 0};
    Rt r;
    for (int i = 0; i < Rt::size; ++i) {
        int src; bool in;
        tile_view_map<Rt, Tl>(o, i, src, in);
        r.c[i] = in ? t.c[src] : typename Rt::value_type{};
    }
    return r;
}
template <typename Rt, typename Tl, typename... O> LW_FUNC void adj_tile_view_impl(Tl& adj_t, const Rt& adj, O... off) {
    const int o[4] = {(int)off..., 0};
    for (int i = 0; i < Rt::size; ++i) {
        int src; bool in;
        tile_view_map<Rt, Tl>(o, i, src, in);
        if (in) acc(adj_t.c[src], adj.c[i]);
    }
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_view(const Tl& t, Tl& adj_t, const Rt& adj) {
    adj_tile_view_impl<Rt>(adj_t, adj, 0);
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_view(const Tl& t, int32_t o0, Tl& adj_t, int32_t&, const Rt& adj) {
    adj_tile_view_impl<Rt>(adj_t, adj, o0);
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_view(const Tl& t, int32_t o0, int32_t o1, Tl& adj_t, int32_t&,
                                                               int32_t&, const Rt& adj) {
    adj_tile_view_impl<Rt>(adj_t, adj, o0, o1);
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_view(const Tl& t, int32_t o0, int32_t o1, int32_t o2,
                                                               Tl& adj_t, int32_t&, int32_t&, int32_t&, const Rt& adj) {
    adj_tile_view_impl<Rt>(adj_t, adj, o0, o1, o2);
}
// tile_assign(dst, src, offset): dst with src written over its region at offset
template <typename Tl, typename St, typename... O> LW_FUNC Tl tile_assign(const Tl& dst, const St& src, O... off) {
    const int o[4] = {(int)off..., 0};
    Tl r = dst;
    for (int i = 0; i < St::size; ++i) {
        int at; bool in;
        tile_view_map<St, Tl>(o, i, at, in);
        if (in) r.c[at] = src.c[i];
    }
    return r;
}
template <typename Tl, typename St, typename... O> LW_FUNC void adj_tile_assign_impl(Tl& adj_dst, St& adj_src,
                                                                                    const Tl& adj, O... off) {
    const int o[4] = {(int)off..., 0};
    bool covered[Tl::size > 0 ? Tl::size : 1] = {};
    for (int i = 0; i < St::size; ++i) {
        int at; bool in;
        tile_view_map<St, Tl>(o, i, at, in);
        if (in) { acc(adj_src.c[i], adj.c[at]); covered[at] = true; }
    }
    for (int i = 0; i < Tl::size; ++i)
        if (!covered[i]) acc(adj_dst.c[i], adj.c[i]);
}
template <typename Tl, typename St> LW_FUNC void adj_tile_assign(const Tl& d, const St& s, Tl& adj_d, St& adj_s,
                                                                 const Tl& adj) {
    adj_tile_assign_impl(adj_d, adj_s, adj, 0);
}
template <typename Tl, typename St> LW_FUNC void adj_tile_assign(const Tl& d, const St& s, int32_t o0, Tl& adj_d,
                                                                 St& adj_s, int32_t&, const Tl& adj) {
    adj_tile_assign_impl(adj_d, adj_s, adj, o0);
}
template <typename Tl, typename St> LW_FUNC void adj_tile_assign(const Tl& d, const St& s, int32_t o0, int32_t o1,
                                                                 Tl& adj_d, St& adj_s, int32_t&, int32_t&,
                                                                 const Tl& adj) {
    adj_tile_assign_impl(adj_d, adj_s, adj, o0, o1);
}
template <typename Tl, typename St> LW_FUNC void adj_tile_assign(const Tl& d, const St& s, int32_t o0, int32_t o1,
                                                                 int32_t o2, Tl& adj_d, St& adj_s, int32_t&, int32_t&,
                                                                 int32_t&, const Tl& adj) {
    adj_tile_assign_impl(adj_d, adj_s, adj, o0, o1, o2);
}

template <typename Tl> LW_FUNC tile_t<typename Tl::value_type, 2, Tl::d1, Tl::d0> tile_transpose(const Tl& t) {
    tile_t<typename Tl::value_type, 2, Tl::d1, Tl::d0> r;
    for (int i = 0; i < Tl::d0; ++i)
        for (int j = 0; j < Tl::d1; ++j) r.c[j * Tl::d0 + i] = t.c[i * Tl::d1 + j];
    return r;
}
template <typename Tl, typename Rt> LW_FUNC void adj_tile_transpose(const Tl& t, Tl& adj_t, const Rt& adj) {
    for (int i = 0; i < Tl::d0; ++i)
        for (int j = 0; j < Tl::d1; ++j) acc(adj_t.c[i * Tl::d1 + j], adj.c[j * Tl::d0 + i]);
}

// broadcast (NumPy's rules: t's axes align with the last axes of Rt; an axis of length 1 repeats)
template <typename Rt, typename Tl> LW_FUNC int tile_broadcast_src(int i) {
    int c[4];
    tile_coords_ranked<Rt>(i, c);
    int src = 0;
    for (int d = 0; d < Tl::rank; ++d) {
        int n = tile_dim<Tl>(d);
        int x = c[Rt::rank - Tl::rank + d];
        src = src * n + (n == 1 ? 0 : x);
    }
    return src;
}
template <typename Rt, typename Tl> LW_FUNC Rt tile_broadcast(const Tl& t) {
    Rt r;
    for (int i = 0; i < Rt::size; ++i) r.c[i] = t.c[tile_broadcast_src<Rt, Tl>(i)];
    return r;
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_broadcast(const Tl& t, Tl& adj_t, const Rt& adj) {
    for (int i = 0; i < Rt::size; ++i) acc(adj_t.c[tile_broadcast_src<Rt, Tl>(i)], adj.c[i]);
}
// the same elements in another shape (reshape, squeeze): a copy of the flat data
template <typename Rt, typename Tl> LW_FUNC Rt tile_reshape(const Tl& t) {
    Rt r;
    for (int i = 0; i < Rt::size; ++i) r.c[i] = t.c[i];
    return r;
}
template <typename Rt, typename Tl> LW_FUNC void adj_tile_reshape(const Tl& t, Tl& adj_t, const Rt& adj) {
    for (int i = 0; i < Rt::size; ++i) acc(adj_t.c[i], adj.c[i]);
}

// -- reductions and scans --------------------------------------------------------------------

// In a partial block (lanes.h: the last block of a launch whose size the block does not divide), the elements
// that belong to lanes that do not exist take no part in reductions and scans, nor receive their adjoints.

template <typename Tl> LW_FUNC tile_t<typename Tl::value_type, 1, 1> tile_sum(const Tl& t) {
    using T = typename Tl::value_type;
    tile_t<T, 1, 1> r;
    if (const blk_t* b = blk_partial()) {
        T s = T{};
        for (int i = 0; i < Tl::size; ++i)
            if (!blk_absent(b, i)) s = add(s, t.c[i]);
        r.c[0] = s;
        return r;
    }
#if !LW_CUDA
    if constexpr (tile_is_f32<T>::value && Tl::size >= 32) {  // four 8-wide partial sums
        tile_f8 p0 = {}, p1 = {}, p2 = {}, p3 = {};
        int i = 0;
        for (; i + 32 <= Tl::size; i += 32) {
            p0 += tile_ld8(t.c + i); p1 += tile_ld8(t.c + i + 8);
            p2 += tile_ld8(t.c + i + 16); p3 += tile_ld8(t.c + i + 24);
        }
        const tile_f8 p = (p0 + p1) + (p2 + p3);
        float s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        for (; i < Tl::size; ++i) s += t.c[i];
        r.c[0] = s;
        return r;
    }
#endif
    if constexpr (Tl::size >= 32) {  // independent partial sums: the loop vectorizes
        T part[16];
        for (int k = 0; k < 16; ++k) part[k] = T{};
        int i = 0;
        for (; i + 16 <= Tl::size; i += 16)
            for (int k = 0; k < 16; ++k) part[k] = add(part[k], t.c[i + k]);
        T s = T{};
        for (int k = 0; k < 16; ++k) s = add(s, part[k]);
        for (; i < Tl::size; ++i) s = add(s, t.c[i]);
        r.c[0] = s;
    } else {
        T s = T{};
        for (int i = 0; i < Tl::size; ++i) s = add(s, t.c[i]);
        r.c[0] = s;
    }
    return r;
}
template <typename Tl, typename Rt> LW_FUNC void adj_tile_sum(const Tl& t, Tl& adj_t, const Rt& adj) {
    const blk_t* b = blk_partial();
    for (int i = 0; i < Tl::size; ++i)
        if (!blk_absent(b, i)) acc(adj_t.c[i], adj.c[0]);
}
// the reduction along one axis: Rt has the remaining axes (a 1-D tile reduces to shape (1,))
template <typename Rt, int Axis, typename Tl> LW_FUNC void tile_axis_split(int i, int& outer, int& inner) {
    int c[4];
    tile_coords_ranked<Tl>(i, c);
    int o = 0;
    for (int d = 0; d < Tl::rank; ++d)
        if (d != Axis) o = o * tile_dim<Tl>(d) + c[d];
    outer = o;
    inner = c[Axis];
}
template <typename Rt, int Axis, typename Tl> LW_FUNC Rt tile_sum_axis(const Tl& t) {
    Rt r;
    for (int i = 0; i < Rt::size; ++i) r.c[i] = typename Rt::value_type{};
    const blk_t* b = blk_partial();
    for (int i = 0; i < Tl::size; ++i) {
        if (blk_absent(b, i)) continue;
        int o, k;
        tile_axis_split<Rt, Axis, Tl>(i, o, k);
        r.c[o] = add(r.c[o], t.c[i]);
    }
    return r;
}
template <typename Rt, int Axis, typename Tl> LW_FUNC void adj_tile_sum_axis(const Tl& t, Tl& adj_t, const Rt& adj) {
    const blk_t* b = blk_partial();
    for (int i = 0; i < Tl::size; ++i) {
        if (blk_absent(b, i)) continue;
        int o, k;
        tile_axis_split<Rt, Axis, Tl>(i, o, k);
        acc(adj_t.c[i], adj.c[o]);
    }
}
// a reduction with a binary functor (tile_reduce, tile_min, tile_max). Identity: what a reduction of no
// element gives (a partial block's slice that only absent lanes hold): fold_sum 0, fold_prod 1, fold_min the
// largest value, fold_max the smallest; fold_none (a user's function) reports blk_no_identity instead.
enum { fold_none, fold_sum, fold_prod, fold_min, fold_max };
template <typename T> struct tile_int_limits { static constexpr bool integer = false; };
#define LW_TILE_INT(T, LO, HI) \
    template <> struct tile_int_limits<T> { static constexpr bool integer = true; static constexpr T lo = LO, hi = HI; };
LW_TILE_INT(int8_t, -128, 127)
LW_TILE_INT(uint8_t, 0, 255)
LW_TILE_INT(int16_t, -32768, 32767)
LW_TILE_INT(uint16_t, 0, 65535)
LW_TILE_INT(int32_t, -2147483647 - 1, 2147483647)
LW_TILE_INT(uint32_t, 0, 4294967295u)
LW_TILE_INT(int64_t, -9223372036854775807LL - 1, 9223372036854775807LL)
LW_TILE_INT(uint64_t, 0, 18446744073709551615ull)
#undef LW_TILE_INT
template <typename T> LW_FUNC T tile_extreme(bool high) {
    if constexpr (tile_int_limits<T>::integer) return high ? tile_int_limits<T>::hi : tile_int_limits<T>::lo;
    else return T(bit_cast<float>(high ? 0x7f800000u : 0xff800000u));  // +-infinity
}
template <int Id, typename T> LW_FUNC T tile_identity() {
    if constexpr (Id == fold_sum) return T{};
    else if constexpr (Id == fold_prod) return T(1);
    else if constexpr (Id == fold_min || Id == fold_max) return tile_extreme<T>(Id == fold_min);
    blk_fail("tile_reduce: a slice of the tile holds no element of a running lane, and the operator has no "
             "declared identity");
    return T{};
}
template <int Id = fold_none, typename Tl, typename F> LW_FUNC tile_t<typename Tl::value_type, 1, 1> tile_fold(const Tl& t, F f) {
    tile_t<typename Tl::value_type, 1, 1> r;
    const blk_t* b = blk_partial();
    bool first = true;
    typename Tl::value_type s{};
    for (int i = 0; i < Tl::size; ++i) {
        if (blk_absent(b, i)) continue;
        s = first ? t.c[i] : f(s, t.c[i]);
        first = false;
    }
    r.c[0] = first ? tile_identity<Id, typename Tl::value_type>() : s;
    return r;
}
template <typename Rt, int Axis, int Id = fold_none, typename Tl, typename F> LW_FUNC Rt tile_fold_axis(const Tl& t, F f) {
    Rt r;
    bool first[Rt::size];
    for (int i = 0; i < Rt::size; ++i) first[i] = true;
    const blk_t* b = blk_partial();
    for (int i = 0; i < Tl::size; ++i) {
        if (blk_absent(b, i)) continue;
        int o, k;
        tile_axis_split<Rt, Axis, Tl>(i, o, k);
        r.c[o] = first[o] ? t.c[i] : f(r.c[o], t.c[i]);
        first[o] = false;
    }
    for (int i = 0; i < Rt::size; ++i)
        if (first[i]) r.c[i] = tile_identity<Id, typename Rt::value_type>();
    return r;
}
template <typename Tl> LW_FUNC tile_t<typename Tl::value_type, 1, 1> tile_min(const Tl& t) {
    return tile_fold<fold_min>(t, [](auto a, auto b) { return lt(b, a) ? b : a; });
}
template <typename Tl> LW_FUNC tile_t<typename Tl::value_type, 1, 1> tile_max(const Tl& t) {
    return tile_fold<fold_max>(t, [](auto a, auto b) { return lt(a, b) ? b : a; });
}
template <typename Tl> LW_FUNC int tile_arg_best(const Tl& t, bool want_max) {
    const blk_t* b = blk_partial();
    int best = -1;
    for (int i = 0; i < Tl::size; ++i)
        if (!blk_absent(b, i) && (best < 0 || (want_max ? lt(t.c[best], t.c[i]) : lt(t.c[i], t.c[best])))) best = i;
    return best < 0 ? 0 : best;
}
template <typename Tl> LW_FUNC void adj_tile_min(const Tl& t, Tl& adj_t, const tile_t<typename Tl::value_type, 1, 1>& adj) {
    acc(adj_t.c[tile_arg_best(t, false)], adj.c[0]);
}
template <typename Tl> LW_FUNC void adj_tile_max(const Tl& t, Tl& adj_t, const tile_t<typename Tl::value_type, 1, 1>& adj) {
    acc(adj_t.c[tile_arg_best(t, true)], adj.c[0]);
}
template <typename Tl> LW_FUNC tile_t<int32_t, 1, 1> tile_argmin(const Tl& t) {
    tile_t<int32_t, 1, 1> r;
    r.c[0] = tile_arg_best(t, false);
    return r;
}
template <typename Tl> LW_FUNC tile_t<int32_t, 1, 1> tile_argmax(const Tl& t) {
    tile_t<int32_t, 1, 1> r;
    r.c[0] = tile_arg_best(t, true);
    return r;
}
template <typename Tl> LW_FUNC Tl tile_scan_inclusive(const Tl& t) {
    Tl r;
    const blk_t* b = blk_partial();
    typename Tl::value_type s{};
    for (int i = 0; i < Tl::size; ++i) {
        if (!blk_absent(b, i)) s = add(s, t.c[i]);
        r.c[i] = s;
    }
    return r;
}
template <typename Tl> LW_FUNC void adj_tile_scan_inclusive(const Tl& t, Tl& adj_t, const Tl& adj) {
    const blk_t* b = blk_partial();
    typename Tl::value_type s{};
    for (int i = Tl::size - 1; i >= 0; --i) {
        if (blk_absent(b, i)) continue;
        s = add(s, adj.c[i]);
        acc(adj_t.c[i], s);
    }
}
template <typename Tl> LW_FUNC Tl tile_scan_exclusive(const Tl& t) {
    Tl r;
    const blk_t* b = blk_partial();
    typename Tl::value_type s{};
    for (int i = 0; i < Tl::size; ++i) {
        r.c[i] = s;
        if (!blk_absent(b, i)) s = add(s, t.c[i]);
    }
    return r;
}
template <typename Tl> LW_FUNC void adj_tile_scan_exclusive(const Tl& t, Tl& adj_t, const Tl& adj) {
    const blk_t* b = blk_partial();
    typename Tl::value_type s{};
    for (int i = Tl::size - 1; i >= 0; --i) {
        if (blk_absent(b, i)) continue;
        acc(adj_t.c[i], s);
        s = add(s, adj.c[i]);
    }
}
// running extrema with NaN as a missing element (fmax/fmin): NaN only while every element so far is NaN
template <bool Max, typename Tl> LW_FUNC Tl tile_scan_extreme(const Tl& t) {
    Tl r;
    const blk_t* b = blk_partial();
    bool first = true;
    typename Tl::value_type cur{};
    for (int i = 0; i < Tl::size; ++i) {
        const auto x = t.c[i];
        if (!blk_absent(b, i)) {
            const bool better = first || cur != cur || (Max ? lt(cur, x) : lt(x, cur));
            cur = (better && x == x) || first ? x : cur;
            first = false;
        }
        r.c[i] = first ? x : cur;
    }
    return r;
}
template <typename Tl> LW_FUNC Tl tile_scan_max_inclusive(const Tl& t) { return tile_scan_extreme<true>(t); }
template <typename Tl> LW_FUNC Tl tile_scan_min_inclusive(const Tl& t) { return tile_scan_extreme<false>(t); }

// -- matrix products ---------------------------------------------------------------------------

#if !LW_CUDA

// C[M x N] += alpha * A[M x K] B[K x N], row-major, register-blocked 4 x 16 (B's rows are contiguous, so no
// packing: each step broadcasts one element of A against two 8-wide vectors of B's row)
template <int M, int N, int K> LW_FUNC void tile_gemm_f32(const float* A, const float* B, float* C, float alpha) {
    constexpr int M4 = M - M % 4, N16 = N - N % 16;
    for (int j = 0; j < N16; j += 16) {
        for (int i = 0; i < M4; i += 4) {
            tile_f8 c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {}, c30 = {}, c31 = {};
            const float* a = A + i * K;
            for (int k = 0; k < K; ++k) {
                const tile_f8 b0 = tile_ld8(B + k * N + j), b1 = tile_ld8(B + k * N + j + 8);
                const float a0 = a[k], a1 = a[K + k], a2 = a[2 * K + k], a3 = a[3 * K + k];
                c00 = tile_fma(a0, b0, c00); c01 = tile_fma(a0, b1, c01);
                c10 = tile_fma(a1, b0, c10); c11 = tile_fma(a1, b1, c11);
                c20 = tile_fma(a2, b0, c20); c21 = tile_fma(a2, b1, c21);
                c30 = tile_fma(a3, b0, c30); c31 = tile_fma(a3, b1, c31);
            }
            float* c = C + i * N + j;
            tile_st8(c, tile_ld8(c) + alpha * c00); tile_st8(c + 8, tile_ld8(c + 8) + alpha * c01);
            tile_st8(c + N, tile_ld8(c + N) + alpha * c10); tile_st8(c + N + 8, tile_ld8(c + N + 8) + alpha * c11);
            tile_st8(c + 2 * N, tile_ld8(c + 2 * N) + alpha * c20);
            tile_st8(c + 2 * N + 8, tile_ld8(c + 2 * N + 8) + alpha * c21);
            tile_st8(c + 3 * N, tile_ld8(c + 3 * N) + alpha * c30);
            tile_st8(c + 3 * N + 8, tile_ld8(c + 3 * N + 8) + alpha * c31);
        }
        for (int i = M4; i < M; ++i)  // leftover rows
            for (int k = 0; k < K; ++k) {
                const float a = alpha * A[i * K + k];
                for (int jj = j; jj < j + 16; ++jj) C[i * N + jj] += a * B[k * N + jj];
            }
    }
    for (int i = 0; i < M; ++i)  // leftover columns
        for (int k = 0; k < K; ++k) {
            const float a = alpha * A[i * K + k];
            for (int jj = N16; jj < N; ++jj) C[i * N + jj] += a * B[k * N + jj];
        }
}
#endif


#if !LW_CUDA && defined(__AVX512F__)
// The same with 16-wide vectors, register-blocked 8 x 32: 16 accumulators, two loads of B's row and eight
// broadcasts of A feed sixteen fused multiply-adds a step (M a multiple of 8, N of 32)
template <int M, int N, int K> LW_FUNC void tile_gemm_f32_x16(const float* A, const float* B, float* C, float alpha) {
    for (int j = 0; j < N; j += 32)
        for (int i = 0; i < M; i += 8) {
            tile_f16 c0[8] = {}, c1[8] = {};
            const float* a = A + i * K;
            for (int k = 0; k < K; ++k) {
                const tile_f16 b0 = tile_ld16(B + k * N + j), b1 = tile_ld16(B + k * N + j + 16);
#pragma GCC unroll 8
                for (int r = 0; r < 8; ++r) {
                    const float ar = a[r * K + k];
                    c0[r] = tile_fma(ar, b0, c0[r]);
                    c1[r] = tile_fma(ar, b1, c1[r]);
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r) {
                float* c = C + (i + r) * N + j;
                tile_st16(c, tile_ld16(c) + alpha * c0[r]);
                tile_st16(c + 16, tile_ld16(c + 16) + alpha * c1[r]);
            }
        }
}
#endif

// C += alpha * A B for any element type (and float32 through the blocked kernel)
template <int M, int N, int K, typename T> LW_FUNC void tile_gemm(const T* A, const T* B, T* C, T alpha) {
#if !LW_CUDA && defined(__AVX512F__)
    if constexpr (tile_is_f32<T>::value && N % 32 == 0 && M % 8 == 0) {
        tile_gemm_f32_x16<M, N, K>((const float*)A, (const float*)B, (float*)C, (float)alpha);
        return;
    }
#endif
#if !LW_CUDA
    if constexpr (tile_is_f32<T>::value && N >= 16 && M >= 4) {
        tile_gemm_f32<M, N, K>((const float*)A, (const float*)B, (float*)C, (float)alpha);
        return;
    }
#endif
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) {
            const T a = mul(alpha, A[i * K + k]);
            for (int j = 0; j < N; ++j) C[i * N + j] = add(C[i * N + j], mul(a, B[k * N + j]));
        }
}
// the transposed products the adjoint needs: C += A B^T (A: M x K, B: N x K) and C += A^T B (A: K x M, B: K x N)
template <int M, int N, int K, typename T> LW_FUNC void tile_gemm_nt(const T* A, const T* B, T* C, T alpha) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            T s{};
            for (int k = 0; k < K; ++k) s = add(s, mul(A[i * K + k], B[j * K + k]));
            C[i * N + j] = add(C[i * N + j], mul(alpha, s));
        }
}
template <int M, int N, int K, typename T> LW_FUNC void tile_gemm_tn(const T* A, const T* B, T* C, T alpha) {
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < M; ++i) {
            const T a = mul(alpha, A[k * M + i]);
            for (int j = 0; j < N; ++j) C[i * N + j] = add(C[i * N + j], mul(a, B[k * N + j]));
        }
}

template <typename Ta, typename Tb, typename T = typename Ta::value_type>
LW_FUNC tile_t<T, 2, Ta::d0, Tb::d1> tile_matmul(const Ta& a, const Tb& b, T alpha = T(1)) {
    tile_t<T, 2, Ta::d0, Tb::d1> r;
    for (int i = 0; i < Ta::d0 * Tb::d1; ++i) r.c[i] = T{};
    tile_gemm<Ta::d0, Tb::d1, Ta::d1>(a.c, b.c, r.c, alpha);
    return r;
}
template <typename Ta, typename Tb, typename Tc, typename T = typename Ta::value_type>
LW_FUNC void adj_tile_matmul(const Ta& a, const Tb& b, Ta& adj_a, Tb& adj_b, const Tc& adj) {
    tile_gemm_nt<Ta::d0, Ta::d1, Tb::d1>(adj.c, b.c, adj_a.c, T(1));
    tile_gemm_tn<Tb::d0, Tb::d1, Ta::d0>(a.c, adj.c, adj_b.c, T(1));
}
template <typename Ta, typename Tb, typename Tc, typename T = typename Ta::value_type>
LW_FUNC void adj_tile_matmul(const Ta& a, const Tb& b, T alpha, Ta& adj_a, Tb& adj_b, T& adj_alpha, const Tc& adj) {
    tile_gemm_nt<Ta::d0, Ta::d1, Tb::d1>(adj.c, b.c, adj_a.c, alpha);
    tile_gemm_tn<Tb::d0, Tb::d1, Ta::d0>(a.c, adj.c, adj_b.c, alpha);
}
// out = alpha * a b + beta * out (wp.tile_matmul(a, b, out, alpha, beta)); the result may be built in `c` itself
// (`out = tile_matmul_acc(a, b, out, ...)`), then with beta = 1 nothing but the product touches it
template <typename Ta, typename Tb, typename Tc, typename T = typename Ta::value_type>
LW_FUNC Tc tile_matmul_acc(const Ta& a, const Tb& b, const Tc& c, T alpha, T beta) {
    Tc r;
    if (beta == T(0))  // out is not read (it may hold anything)
        for (int i = 0; i < Tc::size; ++i) r.c[i] = T(0);
    else if (&r != &c || beta != T(1))
        for (int i = 0; i < Tc::size; ++i) r.c[i] = mul(beta, c.c[i]);
    tile_gemm<Ta::d0, Tb::d1, Ta::d1>(a.c, b.c, r.c, alpha);
    return r;
}
template <typename Ta, typename Tb, typename Tc, typename T = typename Ta::value_type>
LW_FUNC void adj_tile_matmul_acc(const Ta& a, const Tb& b, const Tc& c, T alpha, T beta, Ta& adj_a, Tb& adj_b,
                                 Tc& adj_c, T&, T&, const Tc& adj) {
    tile_gemm_nt<Ta::d0, Ta::d1, Tb::d1>(adj.c, b.c, adj_a.c, alpha);
    tile_gemm_tn<Tb::d0, Tb::d1, Ta::d0>(a.c, adj.c, adj_b.c, alpha);
    for (int i = 0; i < Tc::size; ++i) acc(adj_c.c[i], mul(beta, adj.c[i]));
}

// -- operators on tiles: elementwise, a scalar operand broadcast ----------------------------------

template <typename X, typename Y> struct tile_pair {};
template <typename T, int R, int A, int B, int C, int D, typename Y> struct tile_pair<tile_t<T, R, A, B, C, D>, Y> {
    template <typename E> using like = tile_t<E, R, A, B, C, D>;
};
template <typename X, typename T, int R, int A, int B, int C, int D> struct tile_pair<X, tile_t<T, R, A, B, C, D>> {
    template <typename E> using like = tile_t<E, R, A, B, C, D>;
};
template <typename T, int R, int A, int B, int C, int D, typename U>
struct tile_pair<tile_t<T, R, A, B, C, D>, tile_t<U, R, A, B, C, D>> {
    template <typename E> using like = tile_t<E, R, A, B, C, D>;
};

#define LW_TILE_BINARY(op)                                                                                 \
    template <typename X, typename Y, typename S = typename tile_pair<X, Y>::template like<int>>           \
    LW_FUNC auto op(const X& a, const Y& b) {                                                               \
        using E = decltype(op(tile_el(a, 0), tile_el(b, 0)));                                               \
        typename tile_pair<X, Y>::template like<E> r;                                                       \
        for (int i = 0; i < S::size; ++i) r.c[i] = op(tile_el(a, i), tile_el(b, i));                        \
        return r;                                                                                           \
    }                                                                                                       \
    template <typename X, typename Y, typename Z, typename S = typename tile_pair<X, Y>::template like<int>> \
    LW_FUNC void adj_##op(const X& a, const Y& b, X& adj_a, Y& adj_b, const Z& adj) {                       \
        for (int i = 0; i < S::size; ++i) adj_##op(tile_el(a, i), tile_el(b, i), tile_el(adj_a, i), tile_el(adj_b, i), adj.c[i]); \
    }
LW_TILE_BINARY(add)
LW_TILE_BINARY(sub)
LW_TILE_BINARY(mul)
LW_TILE_BINARY(div)

#define LW_TILE_UNARY(op)                                                                                  \
    template <typename T, int R, int A, int B, int C, int D>                                                \
    LW_FUNC tile_t<T, R, A, B, C, D> op(const tile_t<T, R, A, B, C, D>& a) {                                \
        tile_t<T, R, A, B, C, D> r;                                                                         \
        for (int i = 0; i < tile_t<T, R, A, B, C, D>::size; ++i) r.c[i] = op(a.c[i]);                      \
        return r;                                                                                           \
    }                                                                                                       \
    template <typename T, int R, int A, int B, int C, int D>                                                \
    LW_FUNC void adj_##op(const tile_t<T, R, A, B, C, D>& a, tile_t<T, R, A, B, C, D>& adj_a,              \
                          const tile_t<T, R, A, B, C, D>& adj) {                                            \
        for (int i = 0; i < tile_t<T, R, A, B, C, D>::size; ++i) adj_##op(a.c[i], adj_a.c[i], adj.c[i]);   \
    }
LW_TILE_UNARY(neg)
LW_TILE_UNARY(pos)

// -- slices: the sub-tile Rt of Tl at per-axis starts o[d] with steps S_d (S_d == 0: axis d is fixed at
// o[d], a negative o[d] counting from its end, and dropped from the result); elements outside Tl read as
// zero and are not written. Views, `t[i]`, `t[a:b, ::2]` and their assignments all go through here.

template <typename Rt, typename Tl, int S0, int S1, int S2, int S3> LW_FUNC bool tile_slice_src(const int* o, int i,
                                                                                                 int& src) {
    const int st[4] = {S0, S1, S2, S3};
    int c[4];
    tile_coords_ranked<Rt>(i, c);
    int k = 0;
    bool in = true;
    src = 0;
    for (int d = 0; d < Tl::rank; ++d) {
        int x = o[d];
        if (st[d] != 0) {
            x += st[d] * c[k++];
        } else if (x < 0) {
            x += tile_dim<Tl>(d);
        }
        if (x < 0 || x >= tile_dim<Tl>(d)) in = false;
        src = src * tile_dim<Tl>(d) + x;
    }
    return in;
}
template <typename Rt, int S0, int S1, int S2, int S3, typename Tl>
LW_FUNC Rt tile_slice(const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    const int o[4] = {o0, o1, o2, o3};
    Rt r;
    for (int i = 0; i < Rt::size; ++i) {
        int src;
        r.c[i] = tile_slice_src<Rt, Tl, S0, S1, S2, S3>(o, i, src) ? t.c[src] : typename Rt::value_type{};
    }
    return r;
}
template <typename Rt, int S0, int S1, int S2, int S3, typename Tl>
LW_FUNC void adj_tile_slice(const Tl& t, int32_t o0, int32_t o1, int32_t o2, int32_t o3, Tl& adj_t, int32_t&,
                            int32_t&, int32_t&, int32_t&, const Rt& adj) {
    const int o[4] = {o0, o1, o2, o3};
    for (int i = 0; i < Rt::size; ++i) {
        int src;
        if (tile_slice_src<Rt, Tl, S0, S1, S2, S3>(o, i, src)) acc(adj_t.c[src], adj.c[i]);
    }
}
// t with the slice replaced by v (the write of a view back into the tile it views)
template <int S0, int S1, int S2, int S3, typename Tl, typename Rt>
LW_FUNC Tl tile_slice_assign(const Tl& t, const Rt& v, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
    const int o[4] = {o0, o1, o2, o3};
    Tl r = t;
    for (int i = 0; i < Rt::size; ++i) {
        int at;
        if (tile_slice_src<Rt, Tl, S0, S1, S2, S3>(o, i, at)) r.c[at] = v.c[i];
    }
    return r;
}
template <int S0, int S1, int S2, int S3, typename Tl, typename Rt>
LW_FUNC void adj_tile_slice_assign(const Tl& t, const Rt& v, int32_t o0, int32_t o1, int32_t o2, int32_t o3,
                                   Tl& adj_t, Rt& adj_v, int32_t&, int32_t&, int32_t&, int32_t&, const Tl& adj) {
    const int o[4] = {o0, o1, o2, o3};
    bool covered[Tl::size > 0 ? Tl::size : 1] = {};
    for (int i = 0; i < Rt::size; ++i) {
        int at;
        if (tile_slice_src<Rt, Tl, S0, S1, S2, S3>(o, i, at) && !covered[at]) {
            acc(adj_v.c[i], adj.c[at]);
            covered[at] = true;
        }
    }
    for (int i = 0; i < Tl::size; ++i)
        if (!covered[i]) acc(adj_t.c[i], adj.c[i]);
}
// t[i, j, ...] = v: t with one element replaced (negative indices count from the end)
template <typename Tl> LW_FUNC int tile_index(int32_t i0, int32_t i1, int32_t i2, int32_t i3) {
    const int x[4] = {i0, i1, i2, i3};
    int f = 0;
    for (int d = 0; d < Tl::rank; ++d) {
        int v = x[d] < 0 ? x[d] + tile_dim<Tl>(d) : x[d];
        v = v < 0 ? 0 : v >= tile_dim<Tl>(d) ? tile_dim<Tl>(d) - 1 : v;
        f = f * tile_dim<Tl>(d) + v;
    }
    return f;
}
template <typename Tl> LW_FUNC Tl tile_set(const Tl& t, typename Tl::value_type v, int32_t i0, int32_t i1, int32_t i2,
                                           int32_t i3) {
    Tl r = t;
    r.c[tile_index<Tl>(i0, i1, i2, i3)] = v;
    return r;
}
template <typename Tl> LW_FUNC void adj_tile_set(const Tl& t, typename Tl::value_type v, int32_t i0, int32_t i1,
                                                 int32_t i2, int32_t i3, Tl& adj_t, typename Tl::value_type& adj_v,
                                                 int32_t&, int32_t&, int32_t&, int32_t&, const Tl& adj) {
    const int at = tile_index<Tl>(i0, i1, i2, i3);
    for (int i = 0; i < Tl::size; ++i)
        if (i != at) acc(adj_t.c[i], adj.c[i]);
    acc(adj_v, adj.c[at]);
}

// -- dot, axpy, diagonal add --------------------------------------------------------------------

// the scalar contraction of two elements: a product, a dot product, a Frobenius product
template <typename T> LW_FUNC T tile_contract(T a, T b) { return mul(a, b); }
template <int N, typename T> LW_FUNC T tile_contract(vec_t<N, T> a, vec_t<N, T> b) { return dot(a, b); }
template <int R, int C, typename T> LW_FUNC T tile_contract(mat_t<R, C, T> a, mat_t<R, C, T> b) { return ddot(a, b); }

template <typename Tl, typename S> LW_FUNC tile_t<S, 1, 1> tile_dot(const Tl& a, const Tl& b) {
    tile_t<S, 1, 1> r;
    S s{};
    for (int i = 0; i < Tl::size; ++i) s = add(s, tile_contract(a.c[i], b.c[i]));
    r.c[0] = s;
    return r;
}
template <typename Tl, typename S> LW_FUNC void adj_tile_dot(const Tl& a, const Tl& b, Tl& adj_a, Tl& adj_b,
                                                             const tile_t<S, 1, 1>& adj) {
    for (int i = 0; i < Tl::size; ++i) {
        acc(adj_a.c[i], mul(adj.c[0], b.c[i]));
        acc(adj_b.c[i], mul(adj.c[0], a.c[i]));
    }
}
// dest + alpha src (wp.tile_axpy writes it into dest)
template <typename S, typename Tl> LW_FUNC Tl tile_axpy(S alpha, const Tl& src, const Tl& dest) {
    Tl r;
    for (int i = 0; i < Tl::size; ++i) r.c[i] = add(dest.c[i], mul(alpha, src.c[i]));
    return r;
}
template <typename S, typename Tl> LW_FUNC void adj_tile_axpy(S alpha, const Tl& src, const Tl& dest, S& adj_alpha,
                                                              Tl& adj_src, Tl& adj_dest, const Tl& adj) {
    for (int i = 0; i < Tl::size; ++i) {
        acc(adj_dest.c[i], adj.c[i]);
        acc(adj_src.c[i], mul(alpha, adj.c[i]));
        adj_alpha = add(adj_alpha, tile_contract(src.c[i], adj.c[i]));
    }
}
template <typename Tl, typename Td> LW_FUNC Tl tile_diag_add(const Tl& a, const Td& d) {
    Tl r = a;
    for (int i = 0; i < Tl::d0; ++i) r.c[i * Tl::d1 + i] = add(r.c[i * Tl::d1 + i], d.c[i]);
    return r;
}
template <typename Tl, typename Td> LW_FUNC void adj_tile_diag_add(const Tl& a, const Td& d, Tl& adj_a, Td& adj_d,
                                                                   const Tl& adj) {
    for (int i = 0; i < Tl::size; ++i) acc(adj_a.c[i], adj.c[i]);
    for (int i = 0; i < Tl::d0; ++i) acc(adj_d.c[i], adj.c[i * Tl::d1 + i]);
}

// -- dense factorizations and triangular solves (row-major N x N; right-hand sides N or N x K) -----

// L z = y (lower: L's lower triangle) or U x = z (upper: U's upper triangle), in place on y's K columns;
// Tr: solve with the transpose of the triangle instead
template <int N, int K, bool Lower, bool Tr, typename T> LW_FUNC void tile_trsv(const T* A, T* y) {
    auto at = [&](int i, int j) { return Tr ? A[j * N + i] : A[i * N + j]; };
    const bool fwd = Lower != Tr;  // the order the unknowns resolve in
    for (int s = 0; s < N; ++s) {
        const int i = fwd ? s : N - 1 - s;
        for (int k = 0; k < K; ++k) {
            T v = y[i * K + k];
            if (fwd) {
                for (int j = 0; j < i; ++j) v = sub(v, mul(at(i, j), y[j * K + k]));
            } else {
                for (int j = i + 1; j < N; ++j) v = sub(v, mul(at(i, j), y[j * K + k]));
            }
            y[i * K + k] = div(v, at(i, i));
        }
    }
}
template <typename Tl> struct tile_cols { static constexpr int value = Tl::rank == 1 ? 1 : Tl::d1; };

template <bool Lower, typename Tm, typename Ty> LW_FUNC Ty tile_tri_solve(const Tm& L, const Ty& y) {
    Ty r = y;
    tile_trsv<Tm::d0, tile_cols<Ty>::value, Lower, false>(L.c, r.c);
    return r;
}
// the adjoint of z = A^-1 y for triangular A: adj_y += A^-T adj_z, adj_A -= (A^-T adj_z) z^T on A's triangle
template <bool Lower, typename Tm, typename Ty> LW_FUNC void adj_tile_tri_solve(const Tm& L, const Ty& y, Tm& adj_L,
                                                                                Ty& adj_y, const Ty& adj) {
    constexpr int N = Tm::d0, K = tile_cols<Ty>::value;
    Ty z = tile_tri_solve<Lower>(L, y);
    Ty g = adj;
    tile_trsv<N, K, Lower, true>(L.c, g.c);
    for (int i = 0; i < Ty::size; ++i) acc(adj_y.c[i], g.c[i]);
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            if (Lower ? j > i : j < i) continue;
            typename Tm::value_type s{};
            for (int k = 0; k < K; ++k) s = add(s, mul(g.c[i * K + k], z.c[j * K + k]));
            adj_L.c[i * N + j] = sub(adj_L.c[i * N + j], s);
        }
}
// Cholesky factor of A's lower (upper) triangle: L L^T = A (U^T U = A); the other triangle is zero
template <bool Lower, typename Tm> LW_FUNC Tm tile_cholesky(const Tm& A) {
    constexpr int N = Tm::d0;
    using T = typename Tm::value_type;
    Tm L;
    for (int i = 0; i < Tm::size; ++i) L.c[i] = T{};
    auto a = [&](int i, int j) { return Lower ? A.c[i * N + j] : A.c[j * N + i]; };  // lower view of A
    for (int j = 0; j < N; ++j) {
        T d = a(j, j);
        for (int k = 0; k < j; ++k) d = sub(d, mul(L.c[j * N + k], L.c[j * N + k]));
        const T ljj = sqrt(d);
        L.c[j * N + j] = ljj;
        for (int i = j + 1; i < N; ++i) {
            T v = a(i, j);
            for (int k = 0; k < j; ++k) v = sub(v, mul(L.c[i * N + k], L.c[j * N + k]));
            L.c[i * N + j] = div(v, ljj);
        }
    }
    return Lower ? L : tile_transpose(L);
}
// the adjoint (Murray 2016): S = L^-T Phi(L^T adj_L) L^-1 with Phi the lower triangle, diagonal halved;
// the gradient of A's stored triangle is S + S^T off the diagonal and S on it
template <bool Lower, typename Tm> LW_FUNC void adj_tile_cholesky(const Tm& A, Tm& adj_A, const Tm& adj) {
    constexpr int N = Tm::d0;
    using T = typename Tm::value_type;
    const Tm F = tile_cholesky<Lower>(A);
    const Tm L = Lower ? F : tile_transpose(F);
    const Tm G = Lower ? adj : tile_transpose(adj);  // the adjoint of L
    Tm P;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
            T s{};
            if (j <= i)
                for (int k = 0; k < N; ++k) s = add(s, mul(L.c[k * N + i], G.c[k * N + j]));
            P.c[i * N + j] = j < i ? s : j == i ? mul(T(0.5), s) : T{};
        }
    // S = L^-T P L^-1: solve L^T X = P, then S L = X, i.e. L^T S^T = X^T
    tile_trsv<N, N, true, true>(L.c, P.c);
    Tm Xt = tile_transpose(P);
    tile_trsv<N, N, true, true>(L.c, Xt.c);
    const Tm& S = tile_transpose(Xt);
    for (int i = 0; i < N; ++i)
        for (int j = 0; j <= i; ++j) {
            const T g = i == j ? S.c[i * N + i] : add(S.c[i * N + j], S.c[j * N + i]);
            if (Lower) acc(adj_A.c[i * N + j], g); else acc(adj_A.c[j * N + i], g);
        }
}
// A x = y from A's Cholesky factor (lower: L L^T = A; upper: U^T U = A)
template <bool Lower, typename Tm, typename Ty> LW_FUNC Ty tile_cholesky_solve(const Tm& F, const Ty& y) {
    constexpr int N = Tm::d0, K = tile_cols<Ty>::value;
    Ty r = y;
    tile_trsv<N, K, Lower, !Lower>(F.c, r.c);
    tile_trsv<N, K, Lower, Lower>(F.c, r.c);
    return r;
}
template <bool Lower, typename Tm, typename Ty> LW_FUNC void adj_tile_cholesky_solve(const Tm& F, const Ty& y, Tm& adj_F,
                                                                                     Ty& adj_y, const Ty& adj) {
    constexpr int N = Tm::d0, K = tile_cols<Ty>::value;
    using T = typename Tm::value_type;
    const Tm L = Lower ? F : tile_transpose(F);
    Ty w = y;  // w = L^-1 y, x = L^-T w
    tile_trsv<N, K, true, false>(L.c, w.c);
    Ty x = w;
    tile_trsv<N, K, true, true>(L.c, x.c);
    Ty gw = adj;  // adj_w = L^-1 adj_x
    tile_trsv<N, K, true, false>(L.c, gw.c);
    Ty gy = gw;  // adj_y = L^-T adj_w
    tile_trsv<N, K, true, true>(L.c, gy.c);
    for (int i = 0; i < Ty::size; ++i) acc(adj_y.c[i], gy.c[i]);
    for (int i = 0; i < N; ++i)
        for (int j = 0; j <= i; ++j) {
            T s{};
            for (int k = 0; k < K; ++k)
                s = add(s, add(mul(x.c[i * K + k], gw.c[j * K + k]), mul(gy.c[i * K + k], w.c[j * K + k])));
            if (Lower) adj_F.c[i * N + j] = sub(adj_F.c[i * N + j], s);
            else adj_F.c[j * N + i] = sub(adj_F.c[j * N + i], s);
        }
}

// -- sort: keys ascending, values permuted with them (an index sort, then both gathered) ------------

template <typename Tk, typename Tv> LW_FUNC void tile_sort_pairs(Tk& keys, Tv& values) {
    constexpr int n = Tk::size;
    int idx[n > 0 ? n : 1], tmp[n > 0 ? n : 1];
    for (int i = 0; i < n; ++i) idx[i] = i;
    for (int w = 1; w < n; w *= 2)  // bottom-up merge sort of the indices
        for (int lo = 0; lo < n; lo += 2 * w) {
            const int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int a = lo, b = mid, o = lo;
            while (a < mid && b < hi) tmp[o++] = lt(keys.c[idx[b]], keys.c[idx[a]]) ? idx[b++] : idx[a++];
            while (a < mid) tmp[o++] = idx[a++];
            while (b < hi) tmp[o++] = idx[b++];
            for (int i = lo; i < hi; ++i) idx[i] = tmp[i];
        }
    const Tk k0 = keys;
    const Tv v0 = values;
    for (int i = 0; i < n; ++i) {
        keys.c[i] = k0.c[idx[i]];
        values.c[i] = v0.c[idx[i]];
    }
}
template <typename Tk, typename Tv> LW_FUNC Tk tile_sorted_keys(const Tk& keys, const Tv& values) {
    Tk k = keys;
    Tv v = values;
    tile_sort_pairs(k, v);
    return k;
}
template <typename Tk, typename Tv> LW_FUNC Tv tile_sorted_values(const Tk& keys, const Tv& values) {
    Tk k = keys;
    Tv v = values;
    tile_sort_pairs(k, v);
    return v;
}

// wp.tile_randi / wp.tile_randf: each lane seeds its own stream from rng and its lane index (the caller's
// state is not advanced), and draws, in turn, the elements it holds in Warp's register layout (flat index
// lane, lane + dim, ...). One lane (outside a block of lanes) draws every element in row-major order.
template <typename Tl, typename F> LW_FUNC Tl tile_rand_lane(const Tl& d, uint32_t rng, F draw) {
    Tl r = d;
    const int lane = blk_lane(), dim = blk_dim();
    uint32_t s = rand_next((uint32_t)lane + rng);
    for (int i = lane; i < Tl::size; i += dim) r.c[i] = draw(s);
    return r;
}
template <typename Tl> LW_FUNC Tl tile_randi_lane(const Tl& d, uint32_t rng) {
    return tile_rand_lane(d, rng, [](uint32_t& s) { return randi(s); });
}
template <typename Tl> LW_FUNC Tl tile_randi_lane(const Tl& d, uint32_t rng, int32_t lo, int32_t hi) {
    return tile_rand_lane(d, rng, [=](uint32_t& s) { return randi(s, lo, hi); });
}
template <typename Tl> LW_FUNC Tl tile_randf_lane(const Tl& d, uint32_t rng) {
    return tile_rand_lane(d, rng, [](uint32_t& s) { return randf(s); });
}
template <typename Tl> LW_FUNC Tl tile_randf_lane(const Tl& d, uint32_t rng, float lo, float hi) {
    return tile_rand_lane(d, rng, [=](uint32_t& s) { return randf(s, lo, hi); });
}
template <typename Tl> LW_FUNC Tl tile_randi(uint32_t rng) { return tile_randi_lane(Tl{}, rng); }
template <typename Tl> LW_FUNC Tl tile_randi(uint32_t rng, int32_t lo, int32_t hi) {
    return tile_randi_lane(Tl{}, rng, lo, hi);
}
template <typename Tl> LW_FUNC Tl tile_randf(uint32_t rng) { return tile_randf_lane(Tl{}, rng); }
template <typename Tl> LW_FUNC Tl tile_randf(uint32_t rng, float lo, float hi) {
    return tile_randf_lane(Tl{}, rng, lo, hi);
}

// wp.tile_from_thread: lane `lane`'s value over the whole tile. With one lane, that lane's own value; with
// lanes, the tile d filled by the lane named (the others leave it as it is)
template <typename Tl> LW_FUNC Tl tile_from_thread(typename Tl::value_type v, int32_t lane) { return tile_full<Tl>(v); }
template <typename Tl> LW_FUNC Tl tile_from_thread_lane(const Tl& d, typename Tl::value_type v, int32_t lane) {
    return blk_lane() == lane ? tile_full<Tl>(v) : d;
}

// the fills in a @wp.func (tile_of_func, ...), where each lane has a tile of its own: the lanes write their
// parts in turn into a staging tile of the thread that runs the block (zeroed by the leader first, as a
// kernel's frame is), then each lane takes a copy. Every lane of the block calls the function, as in Warp.
template <typename Tl, typename F> LW_FUNC Tl blk_fill(F part) {
#if LW_LANES
    if (blk_cur != nullptr) {
        static thread_local Tl stage;
        if (blk_enter()) stage = Tl{};
        blk_sync();
        stage = part(stage);
        blk_sync();
        return stage;
    }
#endif
    return part(Tl{});
}
template <typename Tl, typename X> LW_FUNC Tl tile_of_func(X x) {
    return blk_fill<Tl>([&](const Tl& d) { return tile_of_lane(d, x); });
}
// each lane holds the whole adjoint of the tile (every lane ran what followed): its element is its value's
template <typename Tl, typename X> LW_FUNC void adj_tile_of_func(X x, X& adj_x, const Tl& adj) {
    acc(adj_x, tile_get_lane<X>(adj, blk_lane()));
}
template <typename Tl, typename... A> LW_FUNC Tl tile_randi_func(uint32_t rng, A... bounds) {
    return blk_fill<Tl>([&](const Tl& d) { return tile_randi_lane(d, rng, bounds...); });
}
template <typename Tl, typename... A> LW_FUNC Tl tile_randf_func(uint32_t rng, A... bounds) {
    return blk_fill<Tl>([&](const Tl& d) { return tile_randf_lane(d, rng, bounds...); });
}
template <typename Tl> LW_FUNC Tl tile_from_thread_func(typename Tl::value_type v, int32_t lane) {
    return blk_fill<Tl>([&](const Tl& d) { return tile_from_thread_lane(d, v, lane); });
}

// -- block-shared state written by the block's threads (in turn, when its lanes run together) ------------

// a stack of up to Cap elements (wp.tile_stack); the builtins update it through a reference
template <typename T, int Cap> struct tile_stack_t {
    using value_type = T;
    int32_t count;
    T data[Cap];
};
template <typename S> LW_FUNC int32_t tile_stack_push(S& s, typename S::value_type v, bool has_value) {
    if (!has_value || s.count >= (int32_t)(sizeof(s.data) / sizeof(s.data[0]))) return -1;
    s.data[s.count] = v;
    return s.count++;
}
// (value, slot) of the top element; slot -1 (and a zero value) when the stack is empty
template <typename R, typename S> LW_FUNC R tile_stack_pop(S& s) {
    R r{};
    r.f1 = -1;
    if (s.count > 0) {
        r.f1 = --s.count;
        r.f0 = s.data[s.count];
    }
    return r;
}
template <typename S> LW_FUNC int32_t tile_stack_count(S& s) { return s.count; }
template <typename S> LW_FUNC void tile_stack_clear(S& s) { s.count = 0; }

// a tile with element (i, j, k, l) added to (written) when has_value; the result may be built in `t` itself
template <typename Tl> LW_FUNC Tl tile_scatter_add(const Tl& t, typename Tl::value_type v, bool has_value, int32_t i,
                                                   int32_t j, int32_t k, int32_t l) {
    Tl r;
    if (&r != &t) r = t;
    if (has_value) {
        const int f = tile_flat<Tl>(i, j, k, l);
        r.c[f] = add(r.c[f], v);
    }
    return r;
}
template <typename Tl> LW_FUNC void adj_tile_scatter_add(const Tl&, typename Tl::value_type, bool has_value, int32_t i,
                                                         int32_t j, int32_t k, int32_t l, Tl& adj_t,
                                                         typename Tl::value_type& adj_v, bool&, int32_t&, int32_t&,
                                                         int32_t&, int32_t&, const Tl& adj) {
    for (int f = 0; f < Tl::size; ++f) acc(adj_t.c[f], adj.c[f]);
    if (has_value) acc(adj_v, adj.c[tile_flat<Tl>(i, j, k, l)]);
}
template <typename Tl> LW_FUNC Tl tile_scatter_masked(const Tl& t, typename Tl::value_type v, bool has_value, int32_t i,
                                                      int32_t j, int32_t k, int32_t l) {
    Tl r;
    if (&r != &t) r = t;
    if (has_value) r.c[tile_flat<Tl>(i, j, k, l)] = v;
    return r;
}
// the written element's gradient goes to the value, the others' to the tile
template <typename Tl> LW_FUNC void adj_tile_scatter_masked(const Tl&, typename Tl::value_type, bool has_value,
                                                            int32_t i, int32_t j, int32_t k, int32_t l, Tl& adj_t,
                                                            typename Tl::value_type& adj_v, bool&, int32_t&, int32_t&,
                                                            int32_t&, int32_t&, const Tl& adj) {
    const int w = has_value ? tile_flat<Tl>(i, j, k, l) : -1;
    for (int f = 0; f < Tl::size; ++f)
        if (f != w) acc(adj_t.c[f], adj.c[f]);
    if (has_value) acc(adj_v, adj.c[w]);
}
