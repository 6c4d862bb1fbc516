// loomwork CPU runtime: one process-wide thread pool that runs a kernel's launch range in chunks.
// Python calls lw_launch(fn, blob, n) through ctypes (the GIL is released for the call); fn is the
// module's exported range function, which runs threads [begin, end) of the launch described by blob.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#include <pthread.h>
#include <unistd.h>

typedef void (*lw_range_fn)(const void* blob, long long begin, long long end);

namespace {

struct Job {
    lw_range_fn fn = nullptr;
    const void* blob = nullptr;
    long long n = 0;
    long long chunk = 1;
};

struct Pool {
    std::vector<std::thread> workers;
    std::mutex launch_mutex;       // one launch at a time uses the pool; others run serially
    std::mutex sleep_mutex;
    std::condition_variable wake;
    Job job;
    std::atomic<unsigned long long> generation{0};
    std::atomic<long long> next_chunk{0};
    std::atomic<int> done{0};
    std::atomic<int> sleepers{0};
    int nthreads = 1;              // including the calling thread
    int spin = 20000;              // pause iterations a worker spins before it sleeps

    void run_chunks(const Job& j) {
        long long nchunks = (j.n + j.chunk - 1) / j.chunk;
        for (;;) {
            long long c = next_chunk.fetch_add(1, std::memory_order_relaxed);
            if (c >= nchunks) break;
            long long b = c * j.chunk, e = b + j.chunk < j.n ? b + j.chunk : j.n;
            j.fn(j.blob, b, e);
        }
    }

    void worker_main(unsigned long long seen) {
        for (;;) {
            unsigned long long g;
            int spins = 0;
            while ((g = generation.load(std::memory_order_acquire)) == seen) {
                if (++spins < spin) {
#if defined(__x86_64__) || defined(__i386__)
                    __builtin_ia32_pause();
#endif
                    continue;
                }
                std::unique_lock<std::mutex> lock(sleep_mutex);
                sleepers.fetch_add(1);
                wake.wait(lock, [&] { return generation.load(std::memory_order_acquire) != seen; });
                sleepers.fetch_sub(1);
                spins = 0;
            }
            seen = g;
            run_chunks(job);
            done.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    void start(int n) {
        nthreads = n < 1 ? 1 : n;
        unsigned long long g0 = generation.load();
        for (int i = 1; i < nthreads; ++i) {
            workers.emplace_back([this, g0] { worker_main(g0); });
            workers.back().detach();
        }
    }

    void launch(lw_range_fn fn, const void* blob, long long n, long long grain) {
        int t = nthreads;
        long long chunk = n / ((long long)t * 4);
        if (chunk < grain) chunk = grain;
        job.fn = fn;
        job.blob = blob;
        job.n = n;
        job.chunk = chunk;
        next_chunk.store(0, std::memory_order_relaxed);
        done.store(0, std::memory_order_relaxed);
        // seq_cst on both sides of the sleeper handshake: either we see the sleeper, or it sees the new job
        generation.fetch_add(1, std::memory_order_seq_cst);
        if (sleepers.load(std::memory_order_seq_cst) > 0) {
            std::lock_guard<std::mutex> lock(sleep_mutex);
            wake.notify_all();
        }
        run_chunks(job);
        while (done.load(std::memory_order_acquire) != t - 1) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
};

Pool* g_pool = nullptr;
int g_requested_threads = 0;

void reset_after_fork() { g_pool = nullptr; }  // the child has no worker threads; it builds a new pool

Pool* pool() {
    if (!g_pool) {
        static bool registered = false;
        if (!registered) {
            pthread_atfork(nullptr, nullptr, reset_after_fork);
            registered = true;
        }
        int n = g_requested_threads > 0 ? g_requested_threads : (int)std::thread::hardware_concurrency();
        Pool* p = new Pool();  // never freed: detached workers may outlive static destruction
        p->start(n);
        g_pool = p;
    }
    return g_pool;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void lw_launch(lw_range_fn fn, const void* blob, long long n,
                                                                   long long serial_below) {
    if (n <= 0) return;
    if (n < serial_below) {
        fn(blob, 0, n);
        return;
    }
    Pool* p = pool();
    if (p->nthreads <= 1 || !p->launch_mutex.try_lock()) {
        fn(blob, 0, n);  // a single core, or another thread is using the pool: run here
        return;
    }
    p->launch(fn, blob, n, 64);
    p->launch_mutex.unlock();
}

extern "C" __attribute__((visibility("default"))) void lw_set_num_threads(int n) {
    // takes effect for a pool not yet started; a running pool keeps its size
    g_requested_threads = n;
}

extern "C" __attribute__((visibility("default"))) int lw_get_num_threads() { return pool()->nthreads; }
