// loomwork's XLA FFI handler for the CPU: one handler for every kernel a jax_kernel wraps.
// The Python side packs a kernel launch at trace time (runtime header, launch grid, static scalars, array
// shapes and strides) and passes it as the attribute `blob`; `slots` says, for each operand then each
// result, where its address or value goes in that block. At run time the handler copies the block, patches
// in XLA's buffers and calls the runtime's lw_launch on loomwork's thread pool: no Python, no GIL.
// Under jax.vmap one call runs `batch` launches, each buffer advancing by its slot's batch stride (0: the
// same buffer for every launch). Debug builds of a kernel report out-of-bounds indices to a fault record at
// `fault_offset` in the block; the handler checks it after each launch and fails the call, naming the kernel
// and the site (`sites`: one line per bounds-check site of the module).
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

typedef void (*lw_launch_fn)(const char* packed);
typedef void (*lw_zero_fn)(void* p, long long nbytes);

static lw_launch_fn g_launch = nullptr;
static lw_zero_fn g_zero = nullptr;

// The runtime's entries (its library is loaded by Python first), given once after this library loads.
extern "C" __attribute__((visibility("default"))) void lw_jax_init(void* launch, void* zero) {
    g_launch = (lw_launch_fn)launch;
    g_zero = (lw_zero_fn)zero;
}

namespace {

// One (offset, kind, flags, batch stride in bytes) slot per operand and result.
const int64_t kSkip = -1;    // not referenced by the block (e.g. an operand aliased by a result)
const int64_t kAddress = 0;  // the buffer's address goes at offset (an array descriptor's data or grad pointer)
// kind > 0: the buffer holds a scalar of `kind` bytes whose value goes at offset (a scalar traced by jax.jit)
const int64_t kZeroFirst = 1;  // flags: zero the buffer before the launch (outputs the kernel accumulates into)

const size_t kSlot = 4;

struct Fault {  // lw::error_t
    int32_t code, site;
    int64_t index, extent;
};

std::string_view line_of(std::string_view text, int64_t n) {
    for (; n > 0; --n) {
        size_t end = text.find('\n');
        if (end == std::string_view::npos) return "?";
        text.remove_prefix(end + 1);
    }
    return text.substr(0, text.find('\n'));
}

ffi::Error place(char* block, size_t block_size, const int64_t* slot, char* base, size_t nbytes, int64_t item) {
    int64_t offset = slot[0], kind = slot[1], stride = slot[3];
    if (kind == kSkip) return ffi::Error::Success();
    char* data = base + item * stride;
    if (stride) nbytes = (size_t)stride;
    size_t width = kind == kAddress ? sizeof(void*) : (size_t)kind;
    if (offset < 0 || (size_t)offset + width > block_size || (kind > 0 && nbytes < width))
        return ffi::Error::InvalidArgument("loomwork: a buffer does not fit the packed launch");
    if (slot[2] & kZeroFirst) {
        if (nbytes >= (1 << 20)) g_zero(data, (long long)nbytes);
        else std::memset(data, 0, nbytes);
    }
    if (kind == kAddress) std::memcpy(block + offset, &data, sizeof(void*));
    else std::memcpy(block + offset, data, width);
    return ffi::Error::Success();
}

// Host memory XLA allocates is mapped in 4 KiB pages, where a streaming kernel spends a quarter of its time
// on TLB misses (NumPy's large arrays, and so loomwork's, get 2 MiB pages). Over the 2 MiB-aligned part of a
// large buffer: `advice` MADV_HUGEPAGE for a result XLA allocated afresh (not touched yet, so its first-touch
// faults are 512 times fewer too), MADV_COLLAPSE for an operand (its pages are replaced by 2 MiB ones now,
// once; an operand already in 2 MiB pages costs a page-table walk). Advice only: refused advice (an older
// kernel, no free 2 MiB pages) changes nothing.
void advise_huge_pages(char* p, size_t nbytes, int advice) {
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (nbytes < 2 * huge) return;
    uintptr_t begin = ((uintptr_t)p + huge - 1) & ~(huge - 1), end = ((uintptr_t)p + nbytes) & ~(huge - 1);
    if (end > begin) madvise((void*)begin, end - begin, advice);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

// The operands' then the results' (address, size) pairs; `host`: host memory, given 2 MiB pages.
ffi::Error gather(ffi::RemainingArgs args, ffi::RemainingRets rets, std::vector<std::pair<char*, size_t>>& out,
                  bool host) {
    out.reserve(args.size() + rets.size());
    for (size_t i = 0; i < args.size(); ++i) {
        auto buf = args.get<ffi::AnyBuffer>(i);
        if (!buf.has_value()) return buf.error();
        out.emplace_back((char*)buf->untyped_data(), buf->size_bytes());
        if (host) advise_huge_pages(out.back().first, out.back().second, MADV_COLLAPSE);
    }
    for (size_t i = 0; i < rets.size(); ++i) {
        auto buf = rets.get<ffi::AnyBuffer>(i);
        if (!buf.has_value()) return buf.error();
        ffi::AnyBuffer result = **buf;
        out.emplace_back((char*)result.untyped_data(), result.size_bytes());
        if (host) advise_huge_pages(out.back().first, out.back().second, MADV_HUGEPAGE);
    }
    return ffi::Error::Success();
}

// A debug build's out-of-bounds report, naming the kernel and the site.
ffi::Error out_of_bounds(std::string_view kernel, std::string_view sites, const Fault& fault) {
    std::string message = "kernel " + std::string(kernel) + ": index " + std::to_string(fault.index) +
                          " is out of bounds for an extent of " + std::to_string(fault.extent) + " in " +
                          std::string(line_of(sites, fault.site));
    return ffi::Error(ffi::ErrorCode::kOutOfRange, message);
}

ffi::Error launch_impl(ffi::RemainingArgs args, ffi::RemainingRets rets, ffi::Span<const uint8_t> blob,
                       ffi::Span<const int64_t> slots, int64_t batch, int64_t fault_offset, std::string_view kernel,
                       std::string_view sites) {
    if (g_launch == nullptr) return ffi::Error::Internal("loomwork: the FFI handler was not initialized");
    size_t n_args = args.size(), n_rets = rets.size();
    if (slots.size() != kSlot * (n_args + n_rets))
        return ffi::Error::InvalidArgument("loomwork: operand count does not match the packed launch");
    std::vector<std::pair<char*, size_t>> buffers;
    if (ffi::Error e = gather(args, rets, buffers, true); e.failure()) return e;
    alignas(16) char small[1024];
    std::vector<char> large;
    char* block = small;
    if (blob.size() > sizeof(small)) {
        large.resize(blob.size());
        block = large.data();
    }
    if (fault_offset >= 0 && (size_t)fault_offset + sizeof(void*) > blob.size())
        return ffi::Error::InvalidArgument("loomwork: the fault record is outside the packed launch");
    Fault fault{};
    Fault* fault_ptr = &fault;
    for (int64_t item = 0; item < batch; ++item) {
        std::memcpy(block, blob.begin(), blob.size());
        if (fault_offset >= 0) std::memcpy(block + fault_offset, &fault_ptr, sizeof(void*));
        for (size_t i = 0; i < buffers.size(); ++i) {
            ffi::Error e = place(block, blob.size(), slots.begin() + kSlot * i, buffers[i].first, buffers[i].second,
                                 item);
            if (e.failure()) return e;
        }
        g_launch(block);
        if (fault.code != 0) return out_of_bounds(kernel, sites, fault);
    }
    return ffi::Error::Success();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* lw_jax_launch(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(lw_jax_launch, launch_impl,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const uint8_t>>("blob")
                                  .Attr<ffi::Span<const int64_t>>("slots")
                                  .Attr<int64_t>("batch")
                                  .Attr<int64_t>("fault_offset")
                                  .Attr<std::string_view>("kernel")
                                  .Attr<std::string_view>("sites"));

// ---- CUDA: the same launches on the stream XLA hands over ----
// The packed block is a CUDA kernel's parameter block; `desc` holds, per CUDA device loomwork loaded the kernel
// on, the device's context and the kernel's handle, after the launch settings the runtime's lw_cuda_launch takes.
// Outputs the kernel accumulates into are zeroed with a memset on the stream; a traced scalar's value is copied
// to the host (which waits for the stream); a debug build's fault record (device memory) is read back after
// each launch.

typedef int (*lw_cuda_launch_fn)(const void* desc, const char* blob, int nbytes);
typedef int (*cu_memset_fn)(uint64_t ptr, unsigned char value, size_t n, void* stream);
typedef int (*cu_dtoh_fn)(void* dst, uint64_t src, size_t n, void* stream);
typedef int (*cu_sync_fn)(void* stream);
typedef int (*cu_stream_ctx_fn)(void* stream, void** ctx);

static lw_cuda_launch_fn g_cuda_launch = nullptr;
static cu_memset_fn g_cu_memset = nullptr;
static cu_dtoh_fn g_cu_dtoh = nullptr;
static cu_sync_fn g_cu_sync = nullptr;
static cu_stream_ctx_fn g_cu_stream_ctx = nullptr;

extern "C" __attribute__((visibility("default"))) void lw_jax_init_cuda(void* launch, void* memset, void* dtoh,
                                                                       void* sync, void* stream_ctx) {
    g_cuda_launch = (lw_cuda_launch_fn)launch;
    g_cu_memset = (cu_memset_fn)memset;
    g_cu_dtoh = (cu_dtoh_fn)dtoh;
    g_cu_sync = (cu_sync_fn)sync;
    g_cu_stream_ctx = (cu_stream_ctx_fn)stream_ctx;
}

namespace {

struct CudaLaunch {  // lw_cuda_launch's descriptor (native/runtime.cpp)
    void* launch;
    void* func;
    void* const* stream;
    unsigned max_block, sm_count;
    void* ctx;
    void* get_current;
    void* set_current;
};

ffi::Error cuda_failed(const char* call, int err) {
    return ffi::Error::Internal(std::string("loomwork: ") + call + " failed with CUDA error " + std::to_string(err));
}

ffi::Error place_cuda(char* block, size_t block_size, const int64_t* slot, char* base, size_t nbytes, int64_t item,
                      void* stream) {
    int64_t offset = slot[0], kind = slot[1], stride = slot[3];
    if (kind == kSkip) return ffi::Error::Success();
    char* data = base + item * stride;
    if (stride) nbytes = (size_t)stride;
    size_t width = kind == kAddress ? sizeof(void*) : (size_t)kind;
    if (offset < 0 || (size_t)offset + width > block_size || (kind > 0 && nbytes < width))
        return ffi::Error::InvalidArgument("loomwork: a buffer does not fit the packed launch");
    if (slot[2] & kZeroFirst) {
        if (int err = g_cu_memset((uint64_t)data, 0, nbytes, stream)) return cuda_failed("cuMemsetD8Async", err);
    }
    if (kind == kAddress) {
        std::memcpy(block + offset, &data, sizeof(void*));
    } else {
        if (int err = g_cu_dtoh(block + offset, (uint64_t)data, width, stream)) return cuda_failed("cuMemcpyDtoHAsync", err);
        if (int err = g_cu_sync(stream)) return cuda_failed("cuStreamSynchronize", err);
    }
    return ffi::Error::Success();
}

ffi::Error launch_cuda_impl(void* stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                            ffi::Span<const uint8_t> blob, ffi::Span<const uint8_t> desc, ffi::Span<const int64_t> slots,
                            int64_t batch, int64_t fault_offset, std::string_view kernel, std::string_view sites) {
    if (g_cuda_launch == nullptr) return ffi::Error::Internal("loomwork: the CUDA FFI handler was not initialized");
    // desc: the launch settings (a CudaLaunch whose func and stream are filled here), then (context, kernel) pairs
    if (desc.size() < sizeof(CudaLaunch) || (desc.size() - sizeof(CudaLaunch)) % (2 * sizeof(void*)) != 0)
        return ffi::Error::InvalidArgument("loomwork: malformed CUDA launch descriptor");
    CudaLaunch d;
    std::memcpy(&d, desc.begin(), sizeof(d));
    void* ctx = nullptr;
    if (int err = g_cu_stream_ctx(stream, &ctx)) return cuda_failed("cuStreamGetCtx", err);
    d.func = nullptr;
    for (size_t at = sizeof(CudaLaunch); at < desc.size(); at += 2 * sizeof(void*)) {
        void* pair[2];
        std::memcpy(pair, desc.begin() + at, sizeof(pair));
        if (pair[0] == ctx) {
            d.ctx = pair[0];
            d.func = pair[1];
        }
    }
    if (d.func == nullptr)
        return ffi::Error::InvalidArgument("loomwork: kernel " + std::string(kernel) +
                                           " was not loaded on the CUDA device XLA runs it on");
    d.stream = &stream;
    size_t n_args = args.size(), n_rets = rets.size();
    if (slots.size() != kSlot * (n_args + n_rets))
        return ffi::Error::InvalidArgument("loomwork: operand count does not match the packed launch");
    std::vector<std::pair<char*, size_t>> buffers;
    if (ffi::Error e = gather(args, rets, buffers, false); e.failure()) return e;
    std::vector<char> block(blob.size());
    uint64_t fault_record = 0;
    if (fault_offset >= 0) {
        if ((size_t)fault_offset + sizeof(void*) > blob.size())
            return ffi::Error::InvalidArgument("loomwork: the fault record is outside the packed launch");
        std::memcpy(&fault_record, blob.begin() + fault_offset, sizeof(fault_record));
    }
    for (int64_t item = 0; item < batch; ++item) {
        std::memcpy(block.data(), blob.begin(), blob.size());
        for (size_t i = 0; i < buffers.size(); ++i) {
            ffi::Error e = place_cuda(block.data(), blob.size(), slots.begin() + kSlot * i, buffers[i].first,
                                      buffers[i].second, item, stream);
            if (e.failure()) return e;
        }
        if (int err = g_cuda_launch(&d, block.data(), (int)blob.size())) return cuda_failed("cuLaunchKernel", err);
        if (fault_record) {
            Fault fault{};
            if (int err = g_cu_dtoh(&fault, fault_record, sizeof(fault), stream)) return cuda_failed("cuMemcpyDtoHAsync", err);
            if (int err = g_cu_sync(stream)) return cuda_failed("cuStreamSynchronize", err);
            if (fault.code != 0) {
                g_cu_memset(fault_record, 0, sizeof(fault), stream);
                return out_of_bounds(kernel, sites, fault);
            }
        }
    }
    return ffi::Error::Success();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* lw_jax_launch_cuda(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(lw_jax_launch_cuda, launch_cuda_impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const uint8_t>>("blob")
                                  .Attr<ffi::Span<const uint8_t>>("desc")
                                  .Attr<ffi::Span<const int64_t>>("slots")
                                  .Attr<int64_t>("batch")
                                  .Attr<int64_t>("fault_offset")
                                  .Attr<std::string_view>("kernel")
                                  .Attr<std::string_view>("sites"));

// The CUDA stream of a Python FFI callback's call (null where the platform has none, the CPU).
extern "C" __attribute__((visibility("default"))) void* lw_jax_stream(XLA_FFI_CallFrame* frame) {
    XLA_FFI_Stream_Get_Args args;
    args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
    args.extension_start = nullptr;
    args.ctx = frame->ctx;
    args.stream = nullptr;
    XLA_FFI_Error* err = frame->api->XLA_FFI_Stream_Get(&args);
    if (err != nullptr) {
        XLA_FFI_Error_Destroy_Args destroy;
        destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
        destroy.extension_start = nullptr;
        destroy.error = err;
        frame->api->XLA_FFI_Error_Destroy(&destroy);
        return nullptr;
    }
    return args.stream;
}

// Python FFI callbacks (register_ffi_callback, jax_callable) are ctypes functions that read the call frame
// themselves; these two do for them what needs XLA's C API: answer XLA's metadata query (made once, before
// the first call) and make an error XLA reports as the call's failure.
extern "C" __attribute__((visibility("default"))) int lw_jax_answer_metadata(XLA_FFI_CallFrame* frame) {
    // (auto: jaxlib renamed the extension header type, XLA_FFI_Extension_Base -> XLA_FFI_InternalExtension)
    for (auto* e = frame->extension_start; e != nullptr; e = e->next) {
        if (e->type == XLA_FFI_Extension_Metadata) {
            XLA_FFI_Metadata* m = reinterpret_cast<XLA_FFI_Metadata_Extension*>(e)->metadata;
            m->api_version.major_version = XLA_FFI_API_MAJOR;
            m->api_version.minor_version = XLA_FFI_API_MINOR;
            m->traits = 0;
            return 1;
        }
    }
    return 0;
}

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* lw_jax_error(XLA_FFI_CallFrame* frame,
                                                                              const char* message) {
    XLA_FFI_Error_Create_Args args;
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.extension_start = nullptr;
    args.message = message;
    args.errc = XLA_FFI_Error_Code_UNKNOWN;
    return frame->api->XLA_FFI_Error_Create(&args);
}
