// loomwork.utils natively: reductions, scans and radix sort on contiguous data, on the runtime's pool.
// Built on first use (most programs never call these), into its own library; the runtime's pool comes
// in through lw_parallel_for, which Python passes to lw_utils_init.

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
// Two passes over parts (one per thread), each split into kLanes lanes: first every lane's total, then
// every lane scanned from its offset. A part's lanes are scanned in step, so the adds form kLanes
// independent chains instead of one dependent one. Lane starts are staggered by a few cache lines:
// lanes exactly a power of two apart would make each load alias (mod 4 KiB) a store just issued.
const int kLanes = 8;

template <bool Inclusive, typename T, typename Acc>
void scan_lanes(const T* __restrict in, T* __restrict out, const long long* start, Acc* sums, long long steps) {
    Acc s[kLanes];
#pragma GCC unroll 8
    for (int l = 0; l < kLanes; ++l) s[l] = sums[l];
    for (long long j = 0; j < steps; ++j) {
#pragma GCC unroll 8
        for (int l = 0; l < kLanes; ++l) {
            Acc v = (Acc)in[start[l] + j];
            if (Inclusive) s[l] += v;
            out[start[l] + j] = (T)s[l];
            if (!Inclusive) s[l] += v;
        }
    }
#pragma GCC unroll 8
    for (int l = 0; l < kLanes; ++l) sums[l] = s[l];
}

template <bool Inclusive, typename T, typename Acc>
void scan_range(const T* __restrict in, T* __restrict out, long long b, long long e, Acc s) {
    for (long long i = b; i < e; ++i) {
        Acc v = (Acc)in[i];
        if (Inclusive) s += v;
        out[i] = (T)s;
        if (!Inclusive) s += v;
    }
}

template <typename T, typename Acc> void parallel_scan(const T* in, T* out, long long n, bool inclusive) {
    Parts parts(n, 1 << 16);
    Acc lane_total[256 * kLanes];
    auto lane_bounds = [&](long long t, int l, long long& b, long long& e) {
        long long pb = parts.bounds[t], pe = parts.bounds[t + 1], len = pe - pb;
        auto edge = [&](int k) {
            long long x = pb + len * k / kLanes + (k > 0 && k < kLanes ? 40LL * k : 0);
            return x < pb ? pb : (x > pe ? pe : x);
        };
        b = edge(l);
        e = edge(l + 1);
        if (e < b) e = b;
    };
    parallel_for(parts.count, 1, [&](long long b0, long long e0) {
        for (long long t = b0; t < e0; ++t)
            for (int l = 0; l < kLanes; ++l) {
                long long b, e;
                lane_bounds(t, l, b, e);
                Acc s = 0;
#pragma omp simd reduction(+ : s)
                for (long long i = b; i < e; ++i) s += (Acc)in[i];
                lane_total[t * kLanes + l] = s;
            }
    });
    Acc run = 0;
    for (long long k = 0; k < (long long)parts.count * kLanes; ++k) {
        Acc v = lane_total[k];
        lane_total[k] = run;
        run += v;
    }
    parallel_for(parts.count, 1, [&](long long b0, long long e0) {
        for (long long t = b0; t < e0; ++t) {
            long long start[kLanes], len[kLanes], steps = -1;
            for (int l = 0; l < kLanes; ++l) {
                long long b, e;
                lane_bounds(t, l, b, e);
                start[l] = b;
                len[l] = e - b;
                if (steps < 0 || len[l] < steps) steps = len[l];
            }
            Acc* sums = &lane_total[t * kLanes];
            if (inclusive)
                scan_lanes<true>(in, out, start, sums, steps);
            else
                scan_lanes<false>(in, out, start, sums, steps);
            for (int l = 0; l < kLanes; ++l) {  // the part of each lane beyond the common length
                if (inclusive)
                    scan_range<true>(in, out, start[l] + steps, start[l] + len[l], sums[l]);
                else
                    scan_range<false>(in, out, start[l] + steps, start[l] + len[l], sums[l]);
            }
        }
    });
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

