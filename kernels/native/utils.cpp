// loomwork.utils natively: reductions, scans and radix sort on contiguous data, on the runtime's pool.
// Built on first use (most programs never call these), into its own library; the runtime's pool comes
// in through lw_parallel_for, which Python passes to lw_utils_init.

#if defined(__SSE2__)
#include <immintrin.h>
#endif

typedef void (*lw_range_fn)(const void* blob, long long begin, long long end);
typedef void (*lw_parallel_for_fn)(lw_range_fn fn, const void* blob, long long n, long long grain);
typedef int (*lw_threads_fn)();

namespace {

lw_parallel_for_fn g_parallel_for = nullptr;
lw_threads_fn g_threads_fn = nullptr;  // the pool size now (wp.config.cpu_threads may change it)

int threads() { return g_threads_fn ? g_threads_fn() : 1; }

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
        int t = threads();
        long long want = n / grain;
        count = (int)(want < 1 ? 1 : (want < t ? want : t));
        if (count > 256) count = 256;
        for (int i = 0; i <= count; ++i) bounds[i] = n * i / count;
    }
};

// The sum of p[b, e) accumulated in Acc (double for floats; long long keeps integer scans exact).
template <typename T, typename Acc = double> Acc range_sum(const T* p, long long b, long long e) {
    Acc s = 0;
#pragma omp simd reduction(+ : s)
    for (long long i = b; i < e; ++i) s += (Acc)p[i];
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
        for (long long t = b; t < e; ++t) partial[t] = range_sum(p, parts.bounds[t], parts.bounds[t + 1]);
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
// a block waited on is always being worked on. Per block: its chunk sums (the block now sits in cache),
// the inclusive prefix of the block before (published as soon as that block's total was known), then the
// scan from cache to the output. Memory sees one read and one write per element, like a copy; outputs of
// kStreamBytes and more are written with streaming stores, which skip reading the destination lines.
// Within a block, kLanes lanes are scanned in step so the adds form independent chains; a full block's
// lane is not a multiple of 1024 elements, since lanes a power of two apart make each load alias (mod
// 4 KiB) a store just issued. What is left after whole chunks (under kLanes * kChunk) is scanned serially.
const int kLanes = 8;
const long long kChunk = 168;                           // each lane is summed and chained in chunks
const long long kFullLane = 49 * kChunk;                // a full block's lane
const long long kBlock = kLanes * kFullLane;            // 257 KiB of float32: stays in a core's L2 between the reads
const long long kStreamBytes = 32LL << 20;              // outputs larger than a typical last-level cache
#if defined(__SSE2__)
const bool kCanStream = true;
#else
const bool kCanStream = false;
#endif

// Store one vector; streaming stores need it aligned to its size.
template <bool Stream, typename V> inline void store_vec(void* p, const V& v) {
#if defined(__AVX__)
    if constexpr (Stream && sizeof(V) == 32) return _mm256_stream_si256((__m256i*)p, (__m256i)v);
#endif
#if defined(__SSE2__)
    if constexpr (Stream && sizeof(V) == 16) return _mm_stream_si128((__m128i*)p, (__m128i)v);
#endif
    __builtin_memcpy(p, &v, sizeof(V));
}

// Each lane advances 4 elements a step: an in-register prefix (two shifted adds) plus the lane's running
// total, broadcast from the last element. The kLanes carry chains are independent.
template <typename E> struct vec4 {
    typedef E type __attribute__((vector_size(4 * sizeof(E))));
};

template <bool Inclusive, bool Stream, typename T, typename Acc>
void scan_lanes(const T* __restrict in, T* __restrict out, long long lane, const Acc* starts,
                const Acc* /* chunk sums */) {
    typedef typename vec4<T>::type VT;
    typedef typename vec4<Acc>::type VA;
    typedef typename vec4<long long>::type VI;  // shuffle masks (64-bit lanes, like Acc)
    const VA zero = {0, 0, 0, 0};
    VA carry[kLanes];
#pragma GCC unroll 8
    for (int l = 0; l < kLanes; ++l) carry[l] = zero + starts[l];
    for (long long j = 0; j < lane; j += 4) {
#pragma GCC unroll 8
        for (int l = 0; l < kLanes; ++l) {
            VT raw;
            __builtin_memcpy(&raw, in + l * lane + j, sizeof(raw));
            VA x = __builtin_convertvector(raw, VA);
            VA v = x + __builtin_shuffle(x, zero, (VI){4, 0, 1, 2});
            v += __builtin_shuffle(v, zero, (VI){4, 5, 0, 1});
            v += carry[l];
            carry[l] = __builtin_shuffle(v, (VI){3, 3, 3, 3});
            store_vec<Stream>(out + l * lane + j, __builtin_convertvector(Inclusive ? v : v - x, VT));
        }
    }
}

#if defined(__AVX2__)
// float32 with AVX2: 8 elements a step, prefixed in float (two in-lane shifts, then the low half's total
// into the high half) and chained in float only within a chunk, where the running sum stays small; each
// output adds the chunk's exact (double) start as a float pair, the low part carried in the chain, so it
// is rounded about once, like a double scan.
template <bool Inclusive, bool Stream>
void scan_lanes(const float* __restrict in, float* __restrict out, long long lane, const double* starts,
                const double* chunk_sums) {
    const __m256i last = _mm256_set1_epi32(7);
    const long long chunks = lane / kChunk;
    double at[kLanes];
    for (int l = 0; l < kLanes; ++l) at[l] = starts[l];
    for (long long c = 0; c < chunks; ++c) {
        __m256 hi[kLanes], carry[kLanes];
#pragma GCC unroll 8
        for (int l = 0; l < kLanes; ++l) {
            float h = (float)at[l];
            hi[l] = _mm256_set1_ps(h);
            carry[l] = _mm256_set1_ps((float)(at[l] - (double)h));
            at[l] += chunk_sums[l * chunks + c];
        }
        for (long long j = c * kChunk; j < (c + 1) * kChunk; j += 8) {
#pragma GCC unroll 8
            for (int l = 0; l < kLanes; ++l) {
                __m256 x = _mm256_loadu_ps(in + l * lane + j);
                __m256 v = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(x), 4)));
                v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(v), 8)));
                __m256 low_total = _mm256_permute2f128_ps(v, v, 0x08);  // [0, low half]
                v = _mm256_add_ps(v, _mm256_shuffle_ps(low_total, low_total, 0xFF));
                v = _mm256_add_ps(v, carry[l]);
                carry[l] = _mm256_permutevar8x32_ps(v, last);
                store_vec<Stream>(out + l * lane + j, _mm256_add_ps(hi[l], Inclusive ? v : _mm256_sub_ps(v, x)));
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

// Block k is [b, e); `start` is what comes before block 0.
template <bool Inclusive, bool Stream, typename T, typename Acc>
void scan_block(const T* in, T* out, long long b, long long e, long long k, int* ready, Acc* inclusive_prefix,
                Acc start) {
    const long long chunks = (e - b) / (kLanes * kChunk), lane = chunks * kChunk, tail = b + kLanes * lane;
    Acc chunk_sums[kLanes * (kFullLane / kChunk)], total = 0;
    for (long long c = 0; c < kLanes * chunks; ++c) {  // chunk c is in lane c / chunks
        chunk_sums[c] = range_sum<T, Acc>(in, b + c * kChunk, b + (c + 1) * kChunk);
        total += chunk_sums[c];
    }
    total += range_sum<T, Acc>(in, tail, e);
    Acc prefix = start;
    if (k > 0) {
        while (!__atomic_load_n(&ready[k - 1], __ATOMIC_ACQUIRE)) spin_pause();
        prefix = inclusive_prefix[k - 1];
    }
    inclusive_prefix[k] = prefix + total;
    __atomic_store_n(&ready[k], 1, __ATOMIC_RELEASE);
    Acc starts[kLanes];
    for (int l = 0; l < kLanes; ++l) {
        starts[l] = prefix;
        for (long long c = 0; c < chunks; ++c) prefix += chunk_sums[l * chunks + c];
    }
    if (lane > 0)
        scan_lanes<Inclusive, Stream>(in + b, out + b, lane, starts, chunk_sums);
    scan_range<Inclusive>(in, out, tail, e, prefix);
}

template <bool Inclusive, bool Stream, typename T, typename Acc>
void scan_blocks(const T* in, T* out, long long n, Acc start) {
    long long blocks = (n + kBlock - 1) / kBlock;
    int stack_ready[256];
    Acc stack_prefix[256];
    int* ready = blocks <= 256 ? stack_ready : new int[blocks];
    Acc* prefix = blocks <= 256 ? stack_prefix : new Acc[blocks];
    for (long long k = 0; k < blocks; ++k) ready[k] = 0;
    long long next = 0;
    int t = threads();
    int workers = blocks < t ? (int)blocks : t;
    parallel_for(workers, 1, [&](long long, long long) {
        for (;;) {
            long long k = __atomic_fetch_add(&next, 1LL, __ATOMIC_RELAXED);
            if (k >= blocks) break;
            long long b = k * kBlock, e = b + kBlock < n ? b + kBlock : n;
            scan_block<Inclusive, Stream>(in, out, b, e, k, ready, prefix, start);
        }
#if defined(__SSE2__)
        if (Stream) _mm_sfence();  // streamed stores are visible before the pool reports the work done
#endif
    });
    if (ready != stack_ready) {
        delete[] ready;
        delete[] prefix;
    }
}

// Streaming starts at the first output element aligned to 32 bytes; the few before it are scanned here.
template <typename T, typename Acc> void parallel_scan(const T* in, T* out, long long n, bool inclusive) {
    unsigned long long addr = (unsigned long long)out;
    bool stream = kCanStream && n * (long long)sizeof(T) >= kStreamBytes && addr % sizeof(T) == 0;
    long long head = stream ? (long long)((0 - addr) % 32 / sizeof(T)) : 0;
    Acc start = range_sum<T, Acc>(in, 0, head);
    const T* rest_in = in + head;
    T* rest_out = out + head;
    if (inclusive) {
        scan_range<true>(in, out, 0, head, (Acc)0);
        stream ? scan_blocks<true, true>(rest_in, rest_out, n - head, start)
               : scan_blocks<true, false>(rest_in, rest_out, n - head, start);
    } else {
        scan_range<false>(in, out, 0, head, (Acc)0);
        stream ? scan_blocks<false, true>(rest_in, rest_out, n - head, start)
               : scan_blocks<false, false>(rest_in, rest_out, n - head, start);
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
LW_API void lw_utils_init(lw_parallel_for_fn parallel_for_, lw_threads_fn threads_) {
    g_parallel_for = parallel_for_;
    g_threads_fn = threads_;
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

