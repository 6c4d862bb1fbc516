// loomwork CPU kernels across SIMD lanes: W consecutive threads of a kernel run as one call, each varying
// value held as W lanes (codegen: kernels/simd.py). Every operation here gives, lane by lane, the bits the
// scalar operation of loomwork.h gives (same IEEE operations in the same order), so a kernel's results do not
// depend on which path ran it.
#pragma once
#include "loomwork.h"

namespace lw {
namespace simd {

#if defined(__AVX512F__)
constexpr int W = 16;
#else
constexpr int W = 8;
#endif

// the scalars that have a register form
template <typename S> struct in_reg { static constexpr bool value = false; };
template <> struct in_reg<float> { static constexpr bool value = true; };
template <> struct in_reg<double> { static constexpr bool value = true; };
template <> struct in_reg<int32_t> { static constexpr bool value = true; };
template <> struct in_reg<uint32_t> { static constexpr bool value = true; };
template <> struct in_reg<int64_t> { static constexpr bool value = true; };
template <> struct in_reg<uint64_t> { static constexpr bool value = true; };
template <bool B> struct when {};
template <> struct when<true> { typedef void type; };

// the GCC vector of W scalars of type S (absent for other types, so overloads on it drop out)
template <typename S, typename = void> struct reg {};
template <typename S> struct reg<S, typename when<in_reg<S>::value>::type> {
    typedef S type __attribute__((vector_size(W * sizeof(S))));
};
typedef reg<int32_t>::type mask_t;  // a lane mask (-1: on) and the varying form of bool

// W lanes of any type that has no register form (structs, arrays, quaternions, ...)
template <typename T> struct lanes { T l[W]; };
// W lanes of a vector or matrix of scalars S held component by component (N components)
template <typename S, int N> struct comp { typename reg<S>::type c[N]; };

// how a varying value of type T is held, read and written lane by lane
template <typename T, typename = void> struct rep {
    typedef lanes<T> type;
    static LW_FUNC T get(const type& v, int l) { return v.l[l]; }
    static LW_FUNC void set(type& v, int l, T x) { v.l[l] = x; }
    static LW_FUNC type splat(T x) { type r; for (int l = 0; l < W; ++l) r.l[l] = x; return r; }
};
#define LW_SIMD_REG(S)                                                                      \
    template <> struct rep<S, void> {                                                           \
        typedef reg<S>::type type;                                                          \
        static LW_FUNC S get(const type& v, int l) { return v[l]; }                         \
        static LW_FUNC void set(type& v, int l, S x) { v[l] = x; }                          \
        static LW_FUNC type splat(S x) { return x - type{}; } /* exact: x - (+0) is x, -0 too */ \
    };
LW_SIMD_REG(float)
LW_SIMD_REG(double)
LW_SIMD_REG(int32_t)
LW_SIMD_REG(uint32_t)
LW_SIMD_REG(int64_t)
LW_SIMD_REG(uint64_t)
#undef LW_SIMD_REG
template <> struct rep<bool, void> {
    typedef mask_t type;
    // (v[l] & 1), not v[l] != 0: GCC 12 -O3 -march=native (AVX-512) vectorized int(v[l] != 0) to -1 per lane
    static LW_FUNC bool get(const type& v, int l) { return (v[l] & 1) != 0; }
    static LW_FUNC void set(type& v, int l, bool x) { v[l] = x ? -1 : 0; }
    static LW_FUNC type splat(bool x) { return x ? ~mask_t{} : mask_t{}; }
};
template <typename S, int N> struct comp_rep {
    typedef comp<S, N> type;
    template <typename T> static LW_FUNC T get(const type& v, int l) {
        T r;
        for (int k = 0; k < N; ++k) r.c[k] = v.c[k][l];
        return r;
    }
    template <typename T> static LW_FUNC void set(type& v, int l, const T& x) {
        for (int k = 0; k < N; ++k) v.c[k][l] = x.c[k];
    }
    template <typename T> static LW_FUNC type splat(const T& x) {
        type r;
        for (int k = 0; k < N; ++k) r.c[k] = rep<S>::splat(x.c[k]);
        return r;
    }
};
template <int N, typename S> struct rep<vec_t<N, S>, typename when<in_reg<S>::value>::type> : comp_rep<S, N> {
    typedef vec_t<N, S> T;
    static LW_FUNC T get(const comp<S, N>& v, int l) { return comp_rep<S, N>::template get<T>(v, l); }
    static LW_FUNC void set(comp<S, N>& v, int l, const T& x) { comp_rep<S, N>::set(v, l, x); }
    static LW_FUNC comp<S, N> splat(const T& x) { return comp_rep<S, N>::splat(x); }
};
template <int R, int C, typename S> struct rep<mat_t<R, C, S>, typename when<in_reg<S>::value>::type>
    : comp_rep<S, R * C> {
    typedef mat_t<R, C, S> T;
    static LW_FUNC T get(const comp<S, R * C>& v, int l) { return comp_rep<S, R * C>::template get<T>(v, l); }
    static LW_FUNC void set(comp<S, R * C>& v, int l, const T& x) { comp_rep<S, R * C>::set(v, l, x); }
    static LW_FUNC comp<S, R * C> splat(const T& x) { return comp_rep<S, R * C>::splat(x); }
};

template <typename T> using vary = typename rep<T>::type;
template <typename T> LW_FUNC T lane(const vary<T>& v, int l) { return rep<T>::get(v, l); }
template <typename T> LW_FUNC void set_lane(vary<T>& v, int l, const T& x) { rep<T>::set(v, l, x); }
template <typename T> LW_FUNC vary<T> splat(const T& x) { return rep<T>::splat(x); }

// masks
LW_FUNC mask_t all_lanes() { return ~mask_t{}; }
LW_FUNC bool any(mask_t m) {
    int32_t r = 0;
    for (int l = 0; l < W; ++l) r |= m[l];
    return r != 0;
}
// a mask as the integer vector of the lane width of S (what the ternary operator wants)
template <typename S> LW_FUNC auto widen(mask_t m) {
    typedef __typeof__((typename reg<S>::type){} < (typename reg<S>::type){}) wide;
    return __builtin_convertvector(m, wide);
}
template <typename V> LW_FUNC mask_t narrow(V m) { return __builtin_convertvector(m, mask_t); }

// m ? a : b lane by lane, for each way of holding a value
template <typename S> LW_FUNC typename reg<S>::type pick(mask_t m, typename reg<S>::type a, typename reg<S>::type b) {
    return widen<S>(m) ? a : b;
}
template <typename T, typename = void> struct blender {
    static LW_FUNC vary<T> run(mask_t m, const vary<T>& a, const vary<T>& b) {
        vary<T> r = b;
        for (int l = 0; l < W; ++l)
            if (m[l]) r.l[l] = a.l[l];
        return r;
    }
};
#define LW_SIMD_BLEND(S) \
    template <> struct blender<S, void> { \
        static LW_FUNC vary<S> run(mask_t m, vary<S> a, vary<S> b) { return pick<S>(m, a, b); } \
    };
LW_SIMD_BLEND(float)
LW_SIMD_BLEND(double)
LW_SIMD_BLEND(int32_t)
LW_SIMD_BLEND(uint32_t)
LW_SIMD_BLEND(int64_t)
LW_SIMD_BLEND(uint64_t)
#undef LW_SIMD_BLEND
template <> struct blender<bool, void> {
    static LW_FUNC mask_t run(mask_t m, mask_t a, mask_t b) { return (m & a) | (~m & b); }
};
template <typename S, int N> struct comp_blender {
    static LW_FUNC comp<S, N> run(mask_t m, const comp<S, N>& a, const comp<S, N>& b) {
        comp<S, N> r;
        for (int k = 0; k < N; ++k) r.c[k] = pick<S>(m, a.c[k], b.c[k]);
        return r;
    }
};
template <int N, typename S> struct blender<vec_t<N, S>, typename when<in_reg<S>::value>::type>
    : comp_blender<S, N> {};
template <int R, int C, typename S> struct blender<mat_t<R, C, S>, typename when<in_reg<S>::value>::type>
    : comp_blender<S, R * C> {};
// the value `a` in the lanes of mask m, `b` in the others
template <typename T> LW_FUNC vary<T> blend(mask_t m, const vary<T>& a, const vary<T>& b) {
    return blender<T>::run(m, a, b);
}

// thread indices: lw_idx, lw_idx + 1, ...
LW_FUNC reg<int32_t>::type iota(int32_t base) {
#if defined(__AVX512F__)
    return base + reg<int32_t>::type{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
    return base + reg<int32_t>::type{0, 1, 2, 3, 4, 5, 6, 7};
#endif
}

// W consecutive elements starting at `i` of an innermost-contiguous 1-D array
template <typename S> LW_FUNC typename reg<S>::type load_linear(const array_t<S>& a, int64_t i) {
    typename reg<S>::type r;
    __builtin_memcpy(&r, a.data + i, sizeof(r));
    return r;
}
template <int N, typename S> LW_FUNC comp<S, N> load_linear(const array_t<vec_t<N, S>>& a, int64_t i) {
    comp<S, N> r;
    const S* p = (const S*)(a.data + i);
    for (int l = 0; l < W; ++l)
        for (int k = 0; k < N; ++k) r.c[k][l] = p[l * N + k];
    return r;
}
template <typename S> LW_FUNC void store_linear(const array_t<S>& a, int64_t i, typename reg<S>::type v) {
    __builtin_memcpy(a.data + i, &v, sizeof(v));
}
template <int N, typename S> LW_FUNC void store_linear(const array_t<vec_t<N, S>>& a, int64_t i, const comp<S, N>& v) {
    S* p = (S*)(a.data + i);
    for (int l = 0; l < W; ++l)
        for (int k = 0; k < N; ++k) p[l * N + k] = v.c[k][l];
}

// arithmetic on register lanes: the operators of loomwork.h's scalar templates
#define LW_SIMD_ARITH(S)                                                                                 \
    LW_FUNC reg<S>::type add(reg<S>::type a, reg<S>::type b) { return a + b; }                          \
    LW_FUNC reg<S>::type sub(reg<S>::type a, reg<S>::type b) { return a - b; }                          \
    LW_FUNC reg<S>::type mul(reg<S>::type a, reg<S>::type b) { return a * b; }                          \
    LW_FUNC reg<S>::type neg(reg<S>::type a) { return -a; }                                             \
    LW_FUNC reg<S>::type pos(reg<S>::type a) { return a; }                                              \
    LW_FUNC reg<S>::type min(reg<S>::type a, reg<S>::type b) { return ((b < a) | (a != a)) ? b : a; }   \
    LW_FUNC reg<S>::type max(reg<S>::type a, reg<S>::type b) { return ((a < b) | (a != a)) ? b : a; }   \
    LW_FUNC reg<S>::type clamp(reg<S>::type x, reg<S>::type lo, reg<S>::type hi) { return min(max(x, lo), hi); } \
    LW_FUNC mask_t lt(reg<S>::type a, reg<S>::type b) { return narrow(a < b); }                        \
    LW_FUNC mask_t le(reg<S>::type a, reg<S>::type b) { return narrow(a <= b); }                       \
    LW_FUNC mask_t gt(reg<S>::type a, reg<S>::type b) { return narrow(a > b); }                        \
    LW_FUNC mask_t ge(reg<S>::type a, reg<S>::type b) { return narrow(a >= b); }                       \
    LW_FUNC mask_t eq(reg<S>::type a, reg<S>::type b) { return narrow(a == b); }                       \
    LW_FUNC mask_t ne(reg<S>::type a, reg<S>::type b) { return narrow(a != b); }                       \
    LW_FUNC reg<S>::type select(mask_t c, reg<S>::type a, reg<S>::type b) { return pick<S>(c, b, a); }  \
    LW_FUNC reg<S>::type where(mask_t c, reg<S>::type a, reg<S>::type b) { return pick<S>(c, a, b); }
LW_SIMD_ARITH(float)
LW_SIMD_ARITH(double)
LW_SIMD_ARITH(int32_t)
LW_SIMD_ARITH(uint32_t)
LW_SIMD_ARITH(int64_t)
LW_SIMD_ARITH(uint64_t)
#undef LW_SIMD_ARITH

#define LW_SIMD_INT(S)                                                                      \
    LW_FUNC reg<S>::type bit_and(reg<S>::type a, reg<S>::type b) { return a & b; }          \
    LW_FUNC reg<S>::type bit_or(reg<S>::type a, reg<S>::type b) { return a | b; }           \
    LW_FUNC reg<S>::type bit_xor(reg<S>::type a, reg<S>::type b) { return a ^ b; }          \
    LW_FUNC reg<S>::type invert(reg<S>::type a) { return ~a; }                              \
    LW_FUNC reg<S>::type abs(reg<S>::type a) { return a < S(0) ? -a : a; }                  \
    LW_FUNC reg<S>::type sign(reg<S>::type a) { return a < S(0) ? S(-1) - reg<S>::type{} : S(1) - reg<S>::type{}; }
LW_SIMD_INT(int32_t)
LW_SIMD_INT(uint32_t)
LW_SIMD_INT(int64_t)
LW_SIMD_INT(uint64_t)
#undef LW_SIMD_INT

// scalar conversions (the analysis leaves float -> integer, whose out-of-range cases differ, to the scalar cast)
template <typename To, typename V> LW_FUNC typename reg<To>::type convert(V v) {
    return __builtin_convertvector(v, typename reg<To>::type);
}

// square roots: whole registers where the target has an instruction for them (GCC splits a lane loop into
// halves under -mprefer-vector-width=256), else lane by lane; IEEE-exact either way
template <typename V, typename H> LW_FUNC V by_parts(V a, H (*f)(H)) {
    constexpr int n = sizeof(V) / sizeof(H);
    H h[n];
    __builtin_memcpy(h, &a, sizeof(a));
    for (int i = 0; i < n; ++i) h[i] = f(h[i]);
    __builtin_memcpy(&a, h, sizeof(a));
    return a;
}
typedef float f32x16 __attribute__((vector_size(64)));
typedef double f64x8 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));
#if defined(__AVX512F__)
LW_FUNC f32x16 sqrt_part(f32x16 a) { return __builtin_ia32_sqrtps512_mask(a, a, (unsigned short)0xffff, 4); }
LW_FUNC f64x8 sqrt_part(f64x8 a) { return __builtin_ia32_sqrtpd512_mask(a, a, (unsigned char)0xff, 4); }
LW_FUNC reg<float>::type sqrt(reg<float>::type a) { return by_parts<reg<float>::type, f32x16>(a, sqrt_part); }
LW_FUNC reg<double>::type sqrt(reg<double>::type a) { return by_parts<reg<double>::type, f64x8>(a, sqrt_part); }
#elif defined(__AVX__)
LW_FUNC f32x8 sqrt_part(f32x8 a) { return __builtin_ia32_sqrtps256(a); }
LW_FUNC f64x4 sqrt_part(f64x4 a) { return __builtin_ia32_sqrtpd256(a); }
LW_FUNC reg<float>::type sqrt(reg<float>::type a) { return by_parts<reg<float>::type, f32x8>(a, sqrt_part); }
LW_FUNC reg<double>::type sqrt(reg<double>::type a) { return by_parts<reg<double>::type, f64x4>(a, sqrt_part); }
#else
LW_FUNC reg<float>::type sqrt(reg<float>::type a) {
    for (int l = 0; l < W; ++l) a[l] = __builtin_sqrtf(a[l]);
    return a;
}
LW_FUNC reg<double>::type sqrt(reg<double>::type a) {
    for (int l = 0; l < W; ++l) a[l] = __builtin_sqrt(a[l]);
    return a;
}
#endif

#define LW_SIMD_FLOAT(S, I, signbit)                                                                  \
    LW_FUNC reg<S>::type div(reg<S>::type a, reg<S>::type b) { return a / b; }                      \
    LW_FUNC reg<S>::type rsqrt(reg<S>::type a) { return S(1) / sqrt(a); }                          \
    LW_FUNC reg<S>::type abs(reg<S>::type a) {                                                      \
        return (reg<S>::type)((reg<I>::type)a & ~(signbit - reg<I>::type{}));                       \
    }                                                                                               \
    LW_FUNC reg<S>::type sign(reg<S>::type a) { return a < S(0) ? S(-1) - reg<S>::type{} : S(1) - reg<S>::type{}; } \
    LW_FUNC reg<S>::type lerp(reg<S>::type a, reg<S>::type b, reg<S>::type t) { return a + (b - a) * t; } \
    LW_FUNC mask_t isnan(reg<S>::type a) { return narrow(a != a); }                                 \
    LW_FUNC mask_t isfinite(reg<S>::type a) { return narrow((a - a) == (a - a)); }
LW_SIMD_FLOAT(float, int32_t, (int32_t)0x80000000u)
LW_SIMD_FLOAT(double, int64_t, (int64_t)0x8000000000000000ull)
#undef LW_SIMD_FLOAT

// vectors and matrices, component by component (the order of loomwork.h's loops)
template <typename S, int N> LW_FUNC comp<S, N> add(const comp<S, N>& a, const comp<S, N>& b) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = a.c[k] + b.c[k];
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> sub(const comp<S, N>& a, const comp<S, N>& b) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = a.c[k] - b.c[k];
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> neg(const comp<S, N>& a) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = -a.c[k];
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> pos(const comp<S, N>& a) { return a; }
#define LW_SIMD_COMPWISE2(name) \
    template <typename S, int N> LW_FUNC comp<S, N> name(const comp<S, N>& a, const comp<S, N>& b) { \
        comp<S, N> r; \
        for (int k = 0; k < N; ++k) r.c[k] = name(a.c[k], b.c[k]); \
        return r; \
    }
LW_SIMD_COMPWISE2(min)
LW_SIMD_COMPWISE2(max)
#undef LW_SIMD_COMPWISE2
template <typename S, int N> LW_FUNC comp<S, N> abs(const comp<S, N>& a) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = abs(a.c[k]);
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> mul(const comp<S, N>& a, typename reg<S>::type s) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = a.c[k] * s;
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> mul(typename reg<S>::type s, const comp<S, N>& a) { return mul(a, s); }
template <typename S, int N> LW_FUNC comp<S, N> div(const comp<S, N>& a, typename reg<S>::type s) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = a.c[k] / s;
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> div(typename reg<S>::type s, const comp<S, N>& a) {
    comp<S, N> r;
    for (int k = 0; k < N; ++k) r.c[k] = s / a.c[k];
    return r;
}
template <typename S, int N> LW_FUNC typename reg<S>::type dot(const comp<S, N>& a, const comp<S, N>& b) {
    typename reg<S>::type s = a.c[0] * b.c[0];
    for (int k = 1; k < N; ++k) s = s + a.c[k] * b.c[k];
    return s;
}
template <typename S, int N> LW_FUNC typename reg<S>::type length_sq(const comp<S, N>& a) { return dot(a, a); }
template <typename S, int N> LW_FUNC typename reg<S>::type length(const comp<S, N>& a) { return sqrt(dot(a, a)); }
template <typename S> LW_FUNC comp<S, 3> cross(const comp<S, 3>& a, const comp<S, 3>& b) {
    comp<S, 3> r;
    r.c[0] = a.c[1] * b.c[2] - a.c[2] * b.c[1];
    r.c[1] = a.c[2] * b.c[0] - a.c[0] * b.c[2];
    r.c[2] = a.c[0] * b.c[1] - a.c[1] * b.c[0];
    return r;
}
template <typename S, int N> LW_FUNC comp<S, N> select(mask_t c, const comp<S, N>& a, const comp<S, N>& b) {
    return comp_blender<S, N>::run(c, b, a);
}
template <typename S, int N> LW_FUNC comp<S, N> where(mask_t c, const comp<S, N>& a, const comp<S, N>& b) {
    return comp_blender<S, N>::run(c, a, b);
}

// a vector or matrix from its components, or every component the same
template <typename T, typename... A> LW_FUNC vary<T> make(const A&... a) {
    vary<T> r{{a...}};
    return r;
}
template <typename T, typename V> LW_FUNC vary<T> fill(V s) {
    vary<T> r;
    for (auto& c : r.c) c = s;
    return r;
}

}  // namespace simd
}  // namespace lw
