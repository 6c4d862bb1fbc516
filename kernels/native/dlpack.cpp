// DLPack capsule import in one call (kernels/dlpack.py). Checks a producer's capsule by name, reads the
// managed tensor it holds (legacy "dltensor" or "dltensor_versioned"), renames the capsule "used_..." so it is
// consumed once, and writes what the tensor describes into a flat record Python unpacks in one step.
// The Python C API functions it needs are handed over by lw_dlpack_init (no link-time dependency on a
// libpython); Python calls lw_dlpack_import holding the GIL.
#include <cstdint>
#include <cstring>

namespace {

typedef const char* (*capsule_name_fn)(void*);
typedef void* (*capsule_pointer_fn)(void*, const char*);
typedef int (*capsule_set_name_fn)(void*, const char*);
typedef void (*err_clear_fn)();

capsule_name_fn g_name = nullptr;
capsule_pointer_fn g_pointer = nullptr;
capsule_set_name_fn g_set_name = nullptr;
err_clear_fn g_clear = nullptr;

struct DLDevice {
    int32_t type, id;
};
struct DLDataType {
    uint8_t code, bits;
    uint16_t lanes;
};
struct DLTensor {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void* deleter;
};
struct DLManagedTensorVersioned {
    uint32_t major, minor;
    void* manager_ctx;
    void* deleter;
    uint64_t flags;
    DLTensor dl_tensor;
};

const int kMaxDims = 32;

// kernels/dlpack.py reads it as "<QQQ12i" then the shape and the strides
struct Record {
    uint64_t data, deleter, managed;
    int32_t status, dev_type, dev_id, ndim, code, bits, lanes, flags, has_strides, major, minor, pad;
    int64_t extents[2 * kMaxDims];
};

enum { kOk = 0, kUsed = 1, kNotDLPack = 2, kTooNew = 3, kTooManyDims = 4 };

}  // namespace

extern "C" __attribute__((visibility("default"))) void lw_dlpack_init(void* name, void* pointer, void* set_name,
                                                                    void* clear) {
    g_name = (capsule_name_fn)name;
    g_pointer = (capsule_pointer_fn)pointer;
    g_set_name = (capsule_set_name_fn)set_name;
    g_clear = (err_clear_fn)clear;
}

extern "C" __attribute__((visibility("default"))) void lw_dlpack_import(void* capsule, Record* out,
                                                                        uint32_t max_major) {
    const char* name = g_name(capsule);
    if (name == nullptr) {
        g_clear();
        out->status = kNotDLPack;
        return;
    }
    bool versioned = std::strcmp(name, "dltensor_versioned") == 0;
    if (!versioned && std::strcmp(name, "dltensor") != 0) {
        bool used = std::strcmp(name, "used_dltensor") == 0 || std::strcmp(name, "used_dltensor_versioned") == 0;
        out->status = used ? kUsed : kNotDLPack;
        return;
    }
    void* managed = g_pointer(capsule, name);
    if (managed == nullptr) {
        g_clear();
        out->status = kNotDLPack;
        return;
    }
    const DLTensor* t;
    if (versioned) {
        const DLManagedTensorVersioned* m = (const DLManagedTensorVersioned*)managed;
        out->major = (int32_t)m->major;
        out->minor = (int32_t)m->minor;
        if (m->major > max_major) {
            out->status = kTooNew;
            return;
        }
        t = &m->dl_tensor;
        out->deleter = (uint64_t)m->deleter;
        out->flags = (int32_t)m->flags;
    } else {
        const DLManagedTensor* m = (const DLManagedTensor*)managed;
        t = &m->dl_tensor;
        out->deleter = (uint64_t)m->deleter;
        out->flags = 0;
        out->major = out->minor = 0;
    }
    if (t->ndim < 0 || t->ndim > kMaxDims) {
        out->ndim = t->ndim;
        out->status = kTooManyDims;
        return;
    }
    out->data = (uint64_t)t->data + t->byte_offset;
    out->managed = (uint64_t)managed;
    out->dev_type = t->device.type;
    out->dev_id = t->device.id;
    out->ndim = t->ndim;
    out->code = t->dtype.code;
    out->bits = t->dtype.bits;
    out->lanes = t->dtype.lanes;
    out->has_strides = t->strides != nullptr && t->ndim > 0;
    if (t->ndim) std::memcpy(out->extents, t->shape, sizeof(int64_t) * t->ndim);
    if (out->has_strides) std::memcpy(out->extents + t->ndim, t->strides, sizeof(int64_t) * t->ndim);
    g_set_name(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor");
    out->status = kOk;
}
