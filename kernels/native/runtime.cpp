// loomwork CPU runtime: one process-wide thread pool that runs a kernel's launch range in chunks.
// Python calls lw_launch(packed) through ctypes (the GIL is released for the call); packed starts with
// the module's range function, the launch size, the serial threshold and the pool size wp.config asks
// for (a change resizes the pool before the launch), then the kernel's own block.
// Plain pthreads and compiler atomics only, so this file compiles in a fraction of a second.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

typedef void (*lw_range_fn)(const void* blob, long long begin, long long end);

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

template <typename T> inline T load_acquire(const T* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

struct Job {
    lw_range_fn fn;
    const void* blob;
    long long n;
    long long chunk;
};

// A launch's admission word: (launch number << kSeqShift) | kClosed | workers admitted. A worker joins the launch
// by raising the count while it is open; the caller closes it once every chunk is taken and waits only for the
// workers that joined, so a worker that never got a core (a busy machine) delays nothing.
const int kSeqShift = 32;
const unsigned long long kClosed = 1ULL << 31;
const unsigned long long kCountMask = kClosed - 1;
const int kSpinPauses = 2000;  // a waiting worker spins this many pauses, then yields the core...
const int kSpinYields = 64;    // ...this many times (another runnable thread gets it), then sleeps

struct Pool {
    int nthreads = 1;  // including the calling thread
    int requested = 0;  // the size asked for (nthreads is smaller when a thread could not start)
    bool stopped = false;  // its workers were told to exit (the pool was resized): launches skip it
    bool exiting = false;  // read by workers: leave now
    pthread_t* workers = nullptr;
    pthread_mutex_t launch_mutex = PTHREAD_MUTEX_INITIALIZER;  // one launch at a time uses the pool
    pthread_mutex_t sleep_mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
    Job job{};
    unsigned long long admit = 0;
    long long next_chunk = 0;
    int done = 0;  // workers of the current launch that finished
    int sleepers = 0;

    void run_chunks(const Job& j) {
        long long nchunks = (j.n + j.chunk - 1) / j.chunk;
        for (;;) {
            long long c = __atomic_fetch_add(&next_chunk, 1, __ATOMIC_RELAXED);
            if (c >= nchunks) break;
            long long b = c * j.chunk, e = b + j.chunk < j.n ? b + j.chunk : j.n;
            j.fn(j.blob, b, e);
        }
    }

    bool news(unsigned long long seen) {  // a launch after `seen` was published, or the pool is stopping
        return (__atomic_load_n(&admit, __ATOMIC_SEQ_CST) >> kSeqShift) != seen ||
               __atomic_load_n(&exiting, __ATOMIC_SEQ_CST);
    }

    // Wait for a launch numbered after `seen`: spin briefly (back-to-back launches), then give the core to
    // whatever else is runnable, then sleep until a launch wakes us.
    void wait_for_launch(unsigned long long seen) {
        for (int i = 0; i < kSpinPauses; ++i) {
            if (news(seen)) return;
            cpu_relax();
        }
        for (int i = 0; i < kSpinYields; ++i) {
            if (news(seen)) return;
            sched_yield();
        }
        pthread_mutex_lock(&sleep_mutex);
        __atomic_fetch_add(&sleepers, 1, __ATOMIC_SEQ_CST);
        while (!news(seen)) pthread_cond_wait(&wake, &sleep_mutex);
        __atomic_fetch_sub(&sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&sleep_mutex);
    }

    void worker_main() {
        unsigned long long seen = 0;  // the last launch number this worker has dealt with
        for (;;) {
            wait_for_launch(seen);
            if (__atomic_load_n(&exiting, __ATOMIC_ACQUIRE)) return;
            unsigned long long a = __atomic_load_n(&admit, __ATOMIC_ACQUIRE);
            seen = a >> kSeqShift;
            // join while the launch is open; a failed exchange reloads `a` (another worker joined, the caller
            // closed it, or a newer launch began: the next wait returns at once for that one)
            while (!(a & kClosed) && (a >> kSeqShift) == seen) {
                if (__atomic_compare_exchange_n(&admit, &a, a + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                    run_chunks(job);
                    __atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
                    break;
                }
            }
        }
    }

    static void* thread_entry(void* arg) {
        ((Pool*)arg)->worker_main();
        return nullptr;
    }

    void start(int n) {
        requested = n;
        nthreads = n < 1 ? 1 : n;
        workers = new pthread_t[nthreads];
        // tiled kernels keep their tiles on the stack: give workers the room the main thread has (reserved
        // address space; pages are committed only as they are touched)
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)32 << 20);
        for (int i = 1; i < nthreads; ++i) {
            if (pthread_create(&workers[i], &attr, thread_entry, this) != 0) {
                nthreads = i;  // fewer threads than asked: run with what started
                break;
            }
        }
        pthread_attr_destroy(&attr);
    }

    // Make every worker exit and wait until they have; the caller holds launch_mutex.
    void stop() {
        __atomic_store_n(&exiting, true, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&sleep_mutex);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&sleep_mutex);
        for (int i = 1; i < nthreads; ++i) pthread_join(workers[i], nullptr);
        stopped = true;
    }

    void launch(lw_range_fn fn, const void* blob, long long n, long long grain) {
        long long chunk = n / ((long long)nthreads * 8);  // small enough that a late worker finds work left
        if (chunk < grain) chunk = grain;
        job = Job{fn, blob, n, chunk};
        __atomic_store_n(&next_chunk, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&done, 0, __ATOMIC_RELAXED);
        // seq_cst on both sides of the sleeper handshake: either we see the sleeper, or it sees the new launch
        unsigned long long seq = (__atomic_load_n(&admit, __ATOMIC_RELAXED) >> kSeqShift) + 1;
        __atomic_store_n(&admit, seq << kSeqShift, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST) > 0) {
            pthread_mutex_lock(&sleep_mutex);
            pthread_cond_broadcast(&wake);
            pthread_mutex_unlock(&sleep_mutex);
        }
        run_chunks(job);
        int joined = (int)(__atomic_fetch_or(&admit, kClosed, __ATOMIC_ACQ_REL) & kCountMask);
        for (int i = 0; load_acquire(&done) != joined; ++i) {
            if (i < kSpinPauses) cpu_relax();
            else sched_yield();  // a joined worker lost its core: let it have ours
        }
    }
};

Pool* g_pool = nullptr;  // read and replaced atomically; a replaced pool is never freed (see resize)
int g_requested_threads = 0;  // 0: one per core
pthread_mutex_t g_pool_mutex = PTHREAD_MUTEX_INITIALIZER;  // creating or replacing the pool

void reset_after_fork() {  // the child has no worker threads; it builds a new pool
    g_pool = nullptr;
    pthread_mutex_init(&g_pool_mutex, nullptr);
}

int cores() {  // the cores this process may run on
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

Pool* pool() {
    Pool* p = __atomic_load_n(&g_pool, __ATOMIC_ACQUIRE);
    if (p) return p;
    pthread_mutex_lock(&g_pool_mutex);
    static bool registered = false;
    if (!registered) {
        pthread_atfork(nullptr, nullptr, reset_after_fork);
        registered = true;
    }
    p = g_pool;
    if (!p) {
        int n = g_requested_threads > 0 ? g_requested_threads : cores();
        p = new Pool();
        p->start(n);
        __atomic_store_n(&g_pool, p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_pool_mutex);
    return p;
}

// A new pool size: the running pool (if any) finishes its launch, its workers exit, and the next launch
// starts a pool of the new size. The old Pool object stays allocated: a launch on another thread may still
// hold its address; it finds it stopped and runs inline.
void resize(int n) {
    pthread_mutex_lock(&g_pool_mutex);
    if (n != g_requested_threads) {
        __atomic_store_n(&g_requested_threads, n, __ATOMIC_RELAXED);
        Pool* old = __atomic_exchange_n(&g_pool, (Pool*)nullptr, __ATOMIC_ACQ_REL);
        if (old) {
            pthread_mutex_lock(&old->launch_mutex);
            old->stop();
            pthread_mutex_unlock(&old->launch_mutex);
        }
    }
    pthread_mutex_unlock(&g_pool_mutex);
}

// What Python packs in front of a kernel's launch_t and arguments: one pointer is the whole call,
// which keeps the ctypes call as cheap as it gets.
struct Call {
    lw_range_fn fn;
    long long n;
    long long serial_below;
    long long threads;  // the pool size wp.config asks for now (0: one per core)
};

// Run fn(blob, begin, end) over [0, n) in chunks of at least `grain` on the pool; inline (on the calling
// thread) when n is below `serial_below`, the machine has one core, or another thread holds the pool.
void run_range(lw_range_fn fn, const void* blob, long long n, long long grain, long long serial_below) {
    if (n <= 0) return;
    Pool* p = n < serial_below ? nullptr : pool();
    if (p == nullptr || p->nthreads <= 1 || pthread_mutex_trylock(&p->launch_mutex) != 0) {
        fn(blob, 0, n);
        return;
    }
    if (p->stopped) {  // resized since this thread read g_pool
        pthread_mutex_unlock(&p->launch_mutex);
        fn(blob, 0, n);
        return;
    }
    p->launch(fn, blob, n, grain);
    pthread_mutex_unlock(&p->launch_mutex);
}

struct ZeroJob {
    char* p;
    long long nbytes;
};
const long long kZeroBlock = 1 << 18;

void zero_range(const void* blob, long long begin, long long end) {
    const ZeroJob* j = (const ZeroJob*)blob;
    for (long long b = begin; b < end; ++b) {
        long long off = b * kZeroBlock;
        long long n = j->nbytes - off < kZeroBlock ? j->nbytes - off : kZeroBlock;
        __builtin_memset(j->p + off, 0, (size_t)n);
    }
}

struct DigestJob {
    const char* p;
    long long nbytes;
    unsigned long long sum;
};
const long long kDigestBlock = 1 << 16;  // bytes, a multiple of 8

// One 8-byte word's share of a digest: keyed by its position, so moving words changes the sum too, and
// multiplied by an odd constant, so changing any one word always changes it.
inline unsigned long long digest_word(unsigned long long w, unsigned long long i) {
    return (w ^ (i * 0x9E3779B97F4A7C15ULL)) * 0xBF58476D1CE4E5B9ULL;
}

void digest_range(const void* blob, long long begin, long long end) {
    DigestJob* j = (DigestJob*)blob;
    unsigned long long s = 0;
    for (long long b = begin; b < end; ++b) {
        long long off = b * kDigestBlock;
        long long n = j->nbytes - off < kDigestBlock ? j->nbytes - off : kDigestBlock;
        long long words = n / 8;
        const char* p = j->p + off;
        unsigned long long first = (unsigned long long)off / 8;
        for (long long k = 0; k < words; ++k) {
            unsigned long long w;
            __builtin_memcpy(&w, p + 8 * k, 8);
            s += digest_word(w, first + k);
        }
        if (n % 8) {  // the last few bytes of the range
            unsigned long long w = 0;
            __builtin_memcpy(&w, p + 8 * words, (size_t)(n % 8));
            s += digest_word(w, first + words);
        }
    }
    __atomic_fetch_add(&j->sum, s, __ATOMIC_RELAXED);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void lw_launch(const char* packed) {
    Call call;
    __builtin_memcpy(&call, packed, sizeof(call));
    if (call.threads != __atomic_load_n(&g_requested_threads, __ATOMIC_RELAXED)) resize((int)call.threads);
    run_range(call.fn, packed + sizeof(Call), call.n, 64, call.serial_below);
}

// Run n packed launches in order (a captured graph's consecutive launches, replayed in one call).
extern "C" __attribute__((visibility("default"))) void lw_launch_batch(const char* const* packed, long long n) {
    for (long long i = 0; i < n; ++i) lw_launch(packed[i]);
}

// A CUDA launch in one call from Python (kernels/cuda.py): `d` fixes per kernel the driver's cuLaunchKernel,
// the kernel, its largest block size, the device's multiprocessor count and where the backend keeps its
// current stream; `blob` is the launch's block size and grid cap (two uint32, 0: the defaults), then the
// kernel's parameter block (lw::launch_t, whose first field is the thread count, then the kernel's
// arguments). By default a grid too small to give every multiprocessor two blocks gets smaller blocks (down
// to one warp), so small launches spread over the whole device; a grid cap makes the threads loop over the
// launch (the kernels' loops are grid-stride). Returns the driver's CUresult.
struct CudaLaunch {
    void* launch;
    void* func;
    void* const* stream;
    unsigned max_block, sm_count;  // the most threads a block of this kernel can have
    void* ctx;                     // the context the kernel was loaded in, and cuCtxGetCurrent / cuCtxSetCurrent
    void* get_current;
    void* set_current;
};
typedef int (*cu_launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                void**, void**);
typedef int (*cu_get_ctx)(void**);
typedef int (*cu_set_ctx)(void*);

extern "C" __attribute__((visibility("default"))) int lw_cuda_launch(const CudaLaunch* d, const char* blob,
                                                                     int nbytes) {
    unsigned asked[2];
    __builtin_memcpy(asked, blob, sizeof(asked));
    blob += sizeof(asked);
    nbytes -= (int)sizeof(asked);
    long long n;
    __builtin_memcpy(&n, blob, sizeof(n));
    unsigned block = asked[0] ? asked[0] : 256;  // wp.launch's default block_dim (BLOCK_DIM in kernels/cuda.py)
    if (block > d->max_block) block = d->max_block;
    long long blocks = (n + block - 1) / block;
    const long long want = 2LL * d->sm_count;
    if (!asked[0] && blocks < want) {
        long long b = ((n + want - 1) / want + 31) / 32 * 32;
        if (b < block) {
            block = b < 32 ? 32 : (unsigned)b;
            blocks = (n + block - 1) / block;
        }
    }
    if (asked[1] && blocks > (long long)asked[1]) blocks = asked[1];
    if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
    decltype(sizeof(0)) size = (decltype(sizeof(0)))nbytes;  // size_t, without the standard headers
    void* extra[] = {(void*)1, (void*)blob, (void*)2, &size, (void*)0};
    // the kernel's context must be current; another library may have made its own current on this thread
    void* previous = nullptr;
    int err = ((cu_get_ctx)d->get_current)(&previous);
    if (err) return err;
    if (previous != d->ctx && (err = ((cu_set_ctx)d->set_current)(d->ctx))) return err;
    err = ((cu_launch_kernel)d->launch)(d->func, (unsigned)blocks, 1, 1, block, 1, 1, 0, *d->stream, nullptr, extra);
    if (previous != d->ctx && previous != nullptr) ((cu_set_ctx)d->set_current)(previous);
    return err;
}

// Zero nbytes at p on every core (array.zero_() of large arrays, e.g. gradients before backward).
extern "C" __attribute__((visibility("default"))) void lw_zero(void* p, long long nbytes) {
    ZeroJob job{(char*)p, nbytes};
    run_range(zero_range, &job, (nbytes + kZeroBlock - 1) / kZeroBlock, 1, 2);
}

// A checksum of nbytes at p, on every core (Tapes compare it to see writes made behind loomwork's back).
extern "C" __attribute__((visibility("default"))) unsigned long long lw_digest(const void* p, long long nbytes) {
    DigestJob job{(const char*)p, nbytes, 0};
    run_range(digest_range, &job, (nbytes + kDigestBlock - 1) / kDigestBlock, 1, 2);
    return job.sum;
}

// The same for other native libraries (the utilities): chunks of at least `grain`.
extern "C" __attribute__((visibility("default"))) void lw_parallel_for(lw_range_fn fn, const void* blob, long long n,
                                                                        long long grain) {
    run_range(fn, blob, n, grain, grain + 1);
}

// The pool size (0: one per core); a running pool of another size is replaced (see resize).
extern "C" __attribute__((visibility("default"))) void lw_set_num_threads(int n) { resize(n < 0 ? 0 : n); }

extern "C" __attribute__((visibility("default"))) int lw_get_num_threads() { return pool()->nthreads; }
