// A block's lanes on the CPU (wp.config.enable_cpu_blocks): the lanes of one block run as fibers on the
// thread that runs the block, each on a stack of its own, switched by hand (x86-64 Linux only). A lane runs
// until it reaches a barrier (a block-wide tile operation, see kernels/codegen.py), then the next lane runs;
// when every running lane has arrived, they all go on in order. Block-wide tile values live in the block's
// frame, which every lane sees; the lowest running lane (the leader) computes a block-wide operation once.
// Included inside namespace lw by loomwork.h. On CUDA, and on the CPU outside such a launch, there is no
// block (blk_cur is null) and every query answers as for a block of one lane.

struct blk_t {
    int32_t dim;     // lanes in a block (the launch's block_dim)
    int32_t active;  // lanes that exist in this block: fewer than dim in a partial last block
    int32_t lane;    // the lane running now
    int32_t leader;  // the lowest lane still running
    char* frame;     // the block's shared values (tiles, tile stacks), zeroed when the block starts
    void* home;      // the scheduler's saved stack pointer
    void** sp;       // each lane's saved stack pointer
    unsigned char* done;
    void (*run)(void*, int64_t);  // run(ctx, thread index): one lane's kernel body
    void* ctx;
    int64_t base;  // the thread index of lane 0
};

#if !LW_CUDA && defined(__x86_64__) && defined(__linux__)
#define LW_LANES 1
inline thread_local blk_t* blk_cur = nullptr;

extern "C" void* mmap(void* addr, decltype(sizeof(0)) len, int prot, int flags, int fd, long off);
extern "C" int munmap(void* addr, decltype(sizeof(0)) len);
extern "C" int mprotect(void* addr, decltype(sizeof(0)) len, int prot);
extern "C" void* memset(void* p, int c, decltype(sizeof(0)) n);

// saves the callee-saved registers and the stack pointer in *save, then resumes the context at `to`. noipa:
// callers must assume every caller-saved register clobbered (other lanes run before it returns), which GCC's
// interprocedural register allocation would not, seeing an asm body that names no register
__attribute__((naked, noinline, noipa)) static void blk_switch(void** save, void* to) {
    __asm__(
        "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
        "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
        "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n\t");
}

// a lane's first instructions (entered by blk_switch's `ret` on a fresh stack): its body, then back for good
__attribute__((noinline)) static void blk_start() {
    blk_t* b = blk_cur;
    b->run(b->ctx, b->base + b->lane);
    b->done[b->lane] = 1;
    blk_switch(&b->sp[b->lane], b->home);
    __builtin_trap();  // a finished lane is never resumed
}

// per thread: lane stacks (each with guard pages below it), the frame and the lanes' records, kept for the
// next block and grown when a launch needs more (the stacks are reserved, not committed, until used)
static constexpr long blk_stack_bytes = 1024 * 1024;
static constexpr long blk_page = 64 * 1024;
struct blk_memory {
    char* stacks = nullptr;
    long bytes = 0;
    char* frame = nullptr;
    long frame_bytes = 0;
};
inline thread_local blk_memory blk_mem;

static char* blk_map(long bytes) {
    void* p = mmap(nullptr, (decltype(sizeof(0)))bytes, 3, 0x22 | 0x4000, -1, 0);  // rw, private anonymous, noreserve
    if (p == (void*)-1) __builtin_trap();
    return (char*)p;
}

static void blk_reserve(int32_t lanes, long frame_bytes) {
    blk_memory& m = blk_mem;
    const long need = lanes * (blk_stack_bytes + blk_page) + lanes * (long)(sizeof(void*) + 1) + 64;
    if (m.bytes < need) {
        if (m.stacks) munmap(m.stacks, (decltype(sizeof(0)))m.bytes);
        m.stacks = blk_map(need);
        m.bytes = need;
        for (int32_t l = 0; l < lanes; ++l)
            mprotect(m.stacks + l * (blk_stack_bytes + blk_page), (decltype(sizeof(0)))blk_page, 0);
    }
    if (m.frame_bytes < frame_bytes) {
        if (m.frame) munmap(m.frame, (decltype(sizeof(0)))m.frame_bytes);
        m.frame = blk_map(frame_bytes);
        m.frame_bytes = frame_bytes;
    }
}

// run one block of `dim` lanes, `active` of them, whose lane l is thread base + l: f(thread index) per lane
template <typename F> static void blk_invoke(void* f, int64_t i) { (*(F*)f)(i); }
template <typename F> static void blk_run(int32_t dim, int32_t active, int64_t base, long frame_bytes, F& f) {
    blk_reserve(dim, frame_bytes);
    blk_memory& m = blk_mem;
    const long region = dim * (blk_stack_bytes + blk_page);
    blk_t b;
    b.dim = dim;
    b.active = active;
    b.frame = m.frame;
    b.sp = (void**)(m.stacks + region);
    b.done = (unsigned char*)(b.sp + dim);
    b.run = &blk_invoke<F>;
    b.ctx = &f;
    b.base = base;
    b.leader = 0;
    if (frame_bytes) memset(b.frame, 0, (decltype(sizeof(0)))frame_bytes);
    for (int32_t l = 0; l < active; ++l) {
        // the top of lane l's stack, 16-aligned: blk_start's return slot (never used), the address blk_switch's
        // `ret` takes, then the six registers it pops
        void** top = (void**)(m.stacks + (l + 1) * (blk_stack_bytes + blk_page));
        top[-1] = nullptr;
        top[-2] = (void*)&blk_start;
        for (int k = 3; k <= 8; ++k) top[-k] = nullptr;
        b.sp[l] = (void*)(top - 8);
        b.done[l] = 0;
    }
    blk_t* outer = blk_cur;
    blk_cur = &b;
    int32_t live = active;
    while (live > 0) {
        for (int32_t l = 0; l < active; ++l) {
            if (b.done[l]) continue;
            b.lane = l;
            blk_switch(&b.home, b.sp[l]);
            if (b.done[l]) --live;
        }
        while (b.leader < active && b.done[b.leader]) ++b.leader;
    }
    blk_cur = outer;
}

// the first error a block's lanes met (blk_fail), which the launch raises after the blocks ran
inline const char* blk_error = nullptr;
LW_FUNC void blk_fail(const char* message) {
    const char* none = nullptr;
    __atomic_compare_exchange_n(&blk_error, &none, message, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// a barrier: this lane waits until every running lane of the block has arrived
LW_FUNC void blk_sync() {
    blk_t* b = blk_cur;
    if (b) blk_switch(&b->sp[b->lane], b->home);
}
LW_FUNC int32_t blk_lane() { return blk_cur ? blk_cur->lane : 0; }
LW_FUNC char* blk_frame() { return blk_cur->frame; }
LW_FUNC int32_t blk_dim() { return blk_cur ? blk_cur->dim : 1; }
// the block, when it is a partial one (some lanes do not exist): tile reductions skip their elements
LW_FUNC const blk_t* blk_partial() {
    const blk_t* b = blk_cur;
    return b && b->active < b->dim ? b : nullptr;
}
#else
#define LW_LANES 0
LW_FUNC void blk_fail(const char*) {}
LW_FUNC void blk_sync() {}
LW_FUNC int32_t blk_lane() { return 0; }
LW_FUNC int32_t blk_dim() { return 1; }
LW_FUNC const blk_t* blk_partial() { return nullptr; }
#endif

// a barrier, then whether this lane computes the block-wide operation that follows (the leader)
LW_FUNC bool blk_enter() {
#if LW_LANES
    blk_sync();
    return blk_cur == nullptr || blk_cur->lane == blk_cur->leader;
#else
    return true;
#endif
}
// whether this lane is the leader (no barrier): where every lane computes the same block-wide adjoint, the
// leader's is the one kept
LW_FUNC bool blk_leads() {
#if LW_LANES
    return blk_cur == nullptr || blk_cur->lane == blk_cur->leader;
#else
    return true;
#endif
}
// whether element i of a tile belongs to a lane that does not exist (Warp's register layout: lane i % dim)
LW_FUNC bool blk_absent(const blk_t* b, int i) { return b != nullptr && i % b->dim >= b->active; }
