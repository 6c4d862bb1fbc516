// loomwork.utils natively: reductions, scans and radix sort on contiguous data, on the runtime's pool.
// Built on first use (most programs never call these), into its own library; the runtime's pool comes
// in through lw_parallel_for, which Python passes to lw_utils_init.

#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef void (*lw_range_fn)(const void* blob, long long begin, long long end);
typedef void (*lw_parallel_for_fn)(lw_range_fn fn, const void* blob, long long n, long long grain);

namespace {

lw_parallel_for_fn g_parallel_for = nullptr;
int g_threads = 1;

template <typename F> void tramp(const void* blob, long long b, long long e) { (*(const F*)blob)(b, e); }

// Run f(begin, end) over [0, n) in chunks of at least `grain` on the runtime's pool.
template <typename F> void parallel_for(long long n, long long grain, const F& f) {
    if (g_parallel_for == nullptr) {
        f(0LL, n);
        return;
    }
    g_parallel_for(&tramp<F>, &f, n, grain);
}

// Split [0, n) into one contiguous part per thread: part t is [bounds[t], bounds[t + 1]).
struct Parts {
    int count;
    long long bounds[257];
    Parts(long long n, long long grain) {
        int t = g_threads;
        long long want = n / grain;
        count = (int)(want < 1 ? 1 : (want < t ? want : t));
        if (count > 256) count = 256;
        for (int i = 0; i <= count; ++i) bounds[i] = n * i / count;
    }
};

template <typename T> double chunk_sum(const T* p, long long b, long long e) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (long long i = b; i < e; ++i) s += (double)p[i];
    return s;
}
template <typename T> double chunk_dot(const T* a, const T* b_, long long b, long long e) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (long long i = b; i < e; ++i) s += (double)a[i] * (double)b_[i];
    return s;
}
template <typename T> double parallel_sum(const T* p, long long n) {
    Parts parts(n, 1 << 16);
    double partial[256];
    parallel_for(parts.count, 1, [&](long long b, long long e) {
        for (long long t = b; t < e; ++t) partial[t] = chunk_sum(p, parts.bounds[t], parts.bounds[t + 1]);
    });
    double s = 0.0;
    for (int t = 0; t < parts.count; ++t) s += partial[t];
    return s;
}
template <typename T> double parallel_dot(const T* a, const T* b_, long long n) {
    Parts parts(n, 1 << 16);
    double partial[256];
    parallel_for(parts.count, 1, [&](long long b, long long e) {
        for (long long t = b; t < e; ++t) partial[t] = chunk_dot(a, b_, parts.bounds[t], parts.bounds[t + 1]);
    });
    double s = 0.0;
    for (int t = 0; t < parts.count; ++t) s += partial[t];
    return s;
}
// One pass over cache-sized blocks taken in order by whichever thread is free (an atomic counter), so
// a block waited on is always being worked on. Per block: its total (the block now sits in cache), the
// inclusive prefix of the block before (published as soon as that block's total was known), then the
// scan from cache to the output. Memory sees one read and one write per element, like a copy.
// Within a block, kLanes lanes of kLane elements are scanned in step so the adds form independent
// chains, addressed at constant offsets from one pointer; kLane is not a multiple of 1024, since lanes
// a power of two apart make each load alias (mod 4 KiB) a store just issued.
const int kLanes = 8;
const long long kLane = 8232;
const long long kBlock = kLanes * kLane;  // 257 KiB of float32: stays in a core's L2 between the reads
const long long kChunk = 168;             // the first read sums each lane in chunks (see the float32 scan)
const long long kChunks = kLane / kChunk;

// Each lane advances 4 elements a step: an in-register prefix (two shifted adds) plus the lane's running
// total, broadcast from the last element. The kLanes carry chains are independent.
template <typename E> struct vec4 {
    typedef E type __attribute__((vector_size(4 * sizeof(E))));
};

template <bool Inclusive, typename T, typename Acc>
void scan_lanes(const T* __restrict in, T* __restrict out, const Acc* sums, const Acc* /* chunk sums */) {
    typedef typename vec4<T>::type VT;
    typedef typename vec4<Acc>::type VA;
    typedef typename vec4<long long>::type VI;  // shuffle masks (64-bit lanes, like Acc)
    const VA zero = {0, 0, 0, 0};
    VA carry[kLanes];
#pragma GCC unroll 8
    for (int l = 0; l < kLanes; ++l) carry[l] = zero + sums[l];
    for (long long j = 0; j < kLane; j += 4) {
#pragma GCC unroll 8
        for (int l = 0; l < kLanes; ++l) {
            VT raw;
            __builtin_memcpy(&raw, in + l * kLane + j, sizeof(raw));
            VA x = __builtin_convertvector(raw, VA);
            VA v = x + __builtin_shuffle(x, zero, (VI){4, 0, 1, 2});
            v += __builtin_shuffle(v, zero, (VI){4, 5, 0, 1});
            v += carry[l];
            carry[l] = __builtin_shuffle(v, (VI){3, 3, 3, 3});
            VT res = __builtin_convertvector(Inclusive ? v : v - x, VT);
            __builtin_memcpy(out + l * kLane + j, &res, sizeof(res));
        }
    }
}

#if defined(__AVX2__)
// float32 with AVX2: 8 elements a step, prefixed in float (two in-lane shifts, then the low half's total
// into the high half) and chained in float only within a chunk of kChunk elements, where the running
// sum stays small; each output adds the chunk's exact (double) start as a float pair, low part first,
// so it is rounded about once, like a double scan.
template <bool Inclusive> void scan_lanes(const float* __restrict in, float* __restrict out, const double* starts,
                                          const double* chunk_sums) {
    const __m256i last = _mm256_set1_epi32(7);
    double at[kLanes];
    for (int l = 0; l < kLanes; ++l) at[l] = starts[l];
    for (long long c = 0; c < kChunks; ++c) {
        __m256 hi[kLanes], lo[kLanes], carry[kLanes];
#pragma GCC unroll 8
        for (int l = 0; l < kLanes; ++l) {
            float h = (float)at[l];
            hi[l] = _mm256_set1_ps(h);
            lo[l] = _mm256_set1_ps((float)(at[l] - (double)h));
            carry[l] = _mm256_setzero_ps();
            at[l] += chunk_sums[l * kChunks + c];
        }
        for (long long j = c * kChunk; j < (c + 1) * kChunk; j += 8) {
#pragma GCC unroll 8
            for (int l = 0; l < kLanes; ++l) {
                __m256 x = _mm256_loadu_ps(in + l * kLane + j);
                __m256 v = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(x), 4)));
                v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(v), 8)));
                __m256 low_total = _mm256_permute2f128_ps(v, v, 0x08);  // [0, low half]
                v = _mm256_add_ps(v, _mm256_shuffle_ps(low_total, low_total, 0xFF));
                v = _mm256_add_ps(v, carry[l]);
                carry[l] = _mm256_permutevar8x32_ps(v, last);
                __m256 r = _mm256_add_ps(hi[l], _mm256_add_ps(Inclusive ? v : _mm256_sub_ps(v, x), lo[l]));
                _mm256_storeu_ps(out + l * kLane + j, r);
            }
        }
    }
}
#endif

template <bool Inclusive, typename T, typename Acc>
void scan_range(const T* __restrict in, T* __restrict out, long long b, long long e, Acc s) {
    for (long long i = b; i < e; ++i) {
        Acc v = (Acc)in[i];
        if (Inclusive) s += v;
        out[i] = (T)s;
        if (!Inclusive) s += v;
    }
}

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

template <bool Inclusive, typename T, typename Acc>
void scan_block(const T* in, T* out, long long b, long long e, long long k, int* ready, Acc* inclusive_prefix) {
    bool full = e - b == kBlock;
    Acc sums[kLanes], chunk_sums[kLanes * kChunks], total = 0;
    for (long long c = 0; c < (full ? kLanes * kChunks : 1); ++c) {  // chunk c is in lane c / kChunks
        long long cb = full ? b + c * kChunk : b, ce = full ? cb + kChunk : e;
        Acc s = 0;
#pragma omp simd reduction(+ : s)
        for (long long i = cb; i < ce; ++i) s += (Acc)in[i];
        chunk_sums[c] = s;
        total += s;
    }
    Acc prefix = 0;
    if (k > 0) {
        while (!__atomic_load_n(&ready[k - 1], __ATOMIC_ACQUIRE)) spin_pause();
        prefix = inclusive_prefix[k - 1];
    }
    inclusive_prefix[k] = prefix + total;
    __atomic_store_n(&ready[k], 1, __ATOMIC_RELEASE);
    if (!full) {  // the array's last, shorter block
        scan_range<Inclusive>(in, out, b, e, prefix);
        return;
    }
    for (int l = 0; l < kLanes; ++l) {  // each lane's start
        sums[l] = prefix;
        for (long long c = 0; c < kChunks; ++c) prefix += chunk_sums[l * kChunks + c];
    }
    scan_lanes<Inclusive>(in + b, out + b, sums, chunk_sums);
}

template <typename T, typename Acc> void parallel_scan(const T* in, T* out, long long n, bool inclusive) {
    long long blocks = (n + kBlock - 1) / kBlock;
    int stack_ready[256];
    Acc stack_prefix[256];
    int* ready = blocks <= 256 ? stack_ready : new int[blocks];
    Acc* prefix = blocks <= 256 ? stack_prefix : new Acc[blocks];
    for (long long k = 0; k < blocks; ++k) ready[k] = 0;
    long long next = 0;
    int workers = blocks < g_threads ? (int)blocks : g_threads;
    parallel_for(workers, 1, [&](long long, long long) {
        for (;;) {
            long long k = __atomic_fetch_add(&next, 1LL, __ATOMIC_RELAXED);
            if (k >= blocks) return;
            long long b = k * kBlock, e = b + kBlock < n ? b + kBlock : n;
            if (inclusive)
                scan_block<true>(in, out, b, e, k, ready, prefix);
            else
                scan_block<false>(in, out, b, e, k, ready, prefix);
        }
    });
    if (ready != stack_ready) {
        delete[] ready;
        delete[] prefix;
    }
}

// LSD radix sort of (key, value) pairs by 32-bit keys mapped to order-preserving unsigned integers,
// 8 bits a pass; each pass histograms per part, scans (digit-major, part-minor) and scatters stably.
template <typename KeyOf>
void radix_sort(unsigned* keys, int* values, unsigned* tmp_keys, int* tmp_values, long long n, KeyOf key_of) {
    Parts parts(n, 1 << 14);
    long long (*hist)[256] = new long long[256][256];  // [part][digit], shared by every thread
    unsigned* src_k = keys;
    int* src_v = values;
    unsigned* dst_k = tmp_keys;
    int* dst_v = tmp_values;
    for (int shift = 0; shift < 32; shift += 8) {
        parallel_for(parts.count, 1, [&](long long b, long long e) {
            for (long long t = b; t < e; ++t) {
                long long h[256] = {0};
                for (long long i = parts.bounds[t]; i < parts.bounds[t + 1]; ++i) ++h[(key_of(src_k[i]) >> shift) & 255u];
                for (int d = 0; d < 256; ++d) hist[t][d] = h[d];
            }
        });
        long long offset = 0;
        for (int d = 0; d < 256; ++d)
            for (int t = 0; t < parts.count; ++t) {
                long long c = hist[t][d];
                hist[t][d] = offset;
                offset += c;
            }
        parallel_for(parts.count, 1, [&](long long b, long long e) {
            for (long long t = b; t < e; ++t) {
                long long pos[256];
                for (int d = 0; d < 256; ++d) pos[d] = hist[t][d];
                for (long long i = parts.bounds[t]; i < parts.bounds[t + 1]; ++i) {
                    long long o = pos[(key_of(src_k[i]) >> shift) & 255u]++;
                    dst_k[o] = src_k[i];
                    dst_v[o] = src_v[i];
                }
            }
        });
        unsigned* sk = src_k; src_k = dst_k; dst_k = sk;
        int* sv = src_v; src_v = dst_v; dst_v = sv;
    }
    delete[] hist;  // four passes: the sorted data is back in the caller's arrays
}

}  // namespace

#define LW_API extern "C" __attribute__((visibility("default")))
LW_API void lw_utils_init(lw_parallel_for_fn parallel_for_, int threads) {
    g_parallel_for = parallel_for_;
    g_threads = threads < 1 ? 1 : threads;
}
LW_API double lw_sum_f32(const float* p, long long n) { return parallel_sum(p, n); }
LW_API double lw_sum_f64(const double* p, long long n) { return parallel_sum(p, n); }
LW_API double lw_dot_f32(const float* a, const float* b, long long n) { return parallel_dot(a, b, n); }
LW_API double lw_dot_f64(const double* a, const double* b, long long n) { return parallel_dot(a, b, n); }
LW_API void lw_scan_f32(const float* in, float* out, long long n, int inclusive) {
    parallel_scan<float, double>(in, out, n, inclusive != 0);
}
LW_API void lw_scan_f64(const double* in, double* out, long long n, int inclusive) {
    parallel_scan<double, double>(in, out, n, inclusive != 0);
}
LW_API void lw_scan_i32(const int* in, int* out, long long n, int inclusive) {
    parallel_scan<int, long long>(in, out, n, inclusive != 0);
}
LW_API void lw_radix_sort_i32(int* keys, int* values, int* tmp_keys, int* tmp_values, long long n) {
    radix_sort((unsigned*)keys, values, (unsigned*)tmp_keys, tmp_values, n,
               [](unsigned k) { return k ^ 0x80000000u; });
}
LW_API void lw_radix_sort_f32(float* keys, int* values, float* tmp_keys, int* tmp_values, long long n) {
    radix_sort((unsigned*)keys, values, (unsigned*)tmp_keys, tmp_values, n,
               [](unsigned k) { return (k & 0x80000000u) ? ~k : (k | 0x80000000u); });
}

