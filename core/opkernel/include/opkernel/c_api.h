/* opkernel's C ABI for op libraries: ops, kernels and their tensors in plain C.
 *
 * A shared object built against this header is loaded with
 *
 *     lib = opkernel.load_op_library("./zero_out.so")
 *
 * It defines its ops and kernels in OPKERNEL_LIBRARY (below); opkernel calls that once
 * with a table of functions (OK_Api) through which it registers ops in TensorFlow's
 * REGISTER_OP grammar and kernels per backend, and through which a kernel reads its
 * inputs and attrs and allocates its outputs while it runs.  Tensors are DLPack
 * DLTensors.  No C++ and no Python object crosses the boundary, so one .so works with
 * every Python and every opkernel whose OPKERNEL_C_ABI_VERSION equals the one it was
 * built with (docs/c-kernels.md).
 *
 * Build flags: `python -c "import opkernel.sysconfig as s; print(*s.get_compile_flags())"`.
 */
#ifndef OPKERNEL_C_API_H_
#define OPKERNEL_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version: a library built with another version is refused at load. */
#define OPKERNEL_C_ABI_VERSION 1

#if defined(_WIN32)
#define OK_EXPORT __declspec(dllexport)
#else
#define OK_EXPORT __attribute__((visibility("default")))
#endif

/* ---- DLPack (https://dmlc.github.io/dlpack/latest/c_api.html) ----------------------
 * The subset of dlpack.h this ABI uses, with the same layout; a program that includes
 * dlpack.h first uses its definitions instead. */
#ifndef DLPACK_VERSION
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLCUDAManaged = 13,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;  /* a DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  /* in elements, never NULL here */
  uint64_t byte_offset;
} DLTensor;
#endif /* DLPACK_VERSION */

/* ---- status codes: TensorFlow's (tensorflow/core/protobuf/error_codes.proto) -------- */
typedef enum {
  OK_OK = 0,
  OK_CANCELLED = 1,
  OK_UNKNOWN = 2,
  OK_INVALID_ARGUMENT = 3,
  OK_NOT_FOUND = 5,
  OK_ALREADY_EXISTS = 6,
  OK_RESOURCE_EXHAUSTED = 8,
  OK_FAILED_PRECONDITION = 9,
  OK_OUT_OF_RANGE = 11,
  OK_UNIMPLEMENTED = 12,
  OK_INTERNAL = 13,
} OK_Code;

/* Opaque handles: what a library registers into, an op being declared, a running kernel. */
typedef struct OK_Library OK_Library;
typedef struct OK_OpBuilder OK_OpBuilder;
typedef struct OK_KernelContext OK_KernelContext;
struct OK_Api;

/* A kernel: returns OK_OK, or an error code after api->set_error (or without it, then
 * opkernel reports the code alone).  It runs without Python's GIL, possibly on several
 * threads at once: keep no state outside its arguments. */
typedef int (*OK_ComputeFn)(const struct OK_Api* api, OK_KernelContext* ctx);

/* Every function returns OK_OK or an error code, unless it says otherwise.  A failing
 * registration call records its message; opkernel then refuses the whole library.
 * Strings are UTF-8 and copied: the library may free them after the call. */
typedef struct OK_Api {
  uint32_t abi_version;  /* OPKERNEL_C_ABI_VERSION of the loading opkernel */
  uint32_t size;         /* sizeof(OK_Api) there: fields are only ever appended */

  /* -- registration: valid only inside OPKERNEL_LIBRARY ------------------------------ */
  /* An op, declared as with opkernel.register_op(name).input(...).output(...)...:
   * NULL when the name is malformed (the error is recorded). */
  OK_OpBuilder* (*new_op)(OK_Library* lib, const char* name);
  int (*op_input)(OK_OpBuilder* op, const char* spec);   /* "to_zero: T" */
  int (*op_output)(OK_OpBuilder* op, const char* spec);  /* "zeroed: T" */
  int (*op_attr)(OK_OpBuilder* op, const char* spec);    /* "T: {float, int32} = DT_INT32" */
  /* A shape function of opkernel.shape_fns by name: "unchanged_shape", "scalar_shape",
   * "unknown_shape", "broadcast_binary_op_shape", "matmul_shape", "merge_all_inputs",
   * "no_outputs".  An op without one has outputs of unknown shape. */
  int (*op_shape_fn)(OK_OpBuilder* op, const char* name);
  int (*op_doc)(OK_OpBuilder* op, const char* doc);
  int (*op_set_is_stateful)(OK_OpBuilder* op);
  /* A kernel of `op` on `backend` ("cpu", "cuda", or any backend whose arrays are numpy
   * arrays).  `type_constraints` is NULL (every type) or "T: {float, int32}; U: {int64}". */
  int (*register_kernel)(OK_Library* lib, const char* op, const char* backend,
                         const char* type_constraints, OK_ComputeFn compute);

  /* -- a running kernel: valid only inside its OK_ComputeFn -------------------------- */
  int (*num_inputs)(OK_KernelContext* ctx);   /* returns the count */
  int (*num_outputs)(OK_KernelContext* ctx);  /* returns the count */
  /* Input i, dense and row-major (strides given all the same); NULL when out of range.
   * Read only: the memory belongs to a tensor, and tensors are values. */
  const DLTensor* (*input)(OK_KernelContext* ctx, int i);
  /* Allocates output i (dense, row-major, of the dtype the op's attrs give it) and
   * returns it; NULL on error (recorded).  Each output must be allocated exactly once. */
  DLTensor* (*allocate_output)(OK_KernelContext* ctx, int i, int ndim, const int64_t* shape);
  int (*attr_int)(OK_KernelContext* ctx, const char* name, int64_t* value);
  int (*attr_float)(OK_KernelContext* ctx, const char* name, double* value);
  int (*attr_bool)(OK_KernelContext* ctx, const char* name, int* value);
  int (*attr_type)(OK_KernelContext* ctx, const char* name, DLDataType* value);
  /* An int list (list(int), shape): writes min(count, capacity) values and sets *count. */
  int (*attr_int_list)(OK_KernelContext* ctx, const char* name, int64_t* values,
                       int capacity, int* count);
  /* A string: writes at most size bytes, NUL-terminated, and sets *length (without NUL). */
  int (*attr_string)(OK_KernelContext* ctx, const char* name, char* buffer, size_t size,
                     size_t* length);
  /* The stream to launch work on: a cudaStream_t on cuda (the current CuPy stream of the
   * tensors' device), NULL on host backends.  A kernel's work must be ordered on it. */
  void* (*stream)(OK_KernelContext* ctx);
  /* Records an error for the kernel or registration call to return; returns `code`. */
  int (*set_error)(OK_KernelContext* ctx, int code, const char* message);
} OK_Api;

/* A library's entry points: opkernel calls opkernel_c_abi_version() first and refuses the
 * library unless it returns its own OPKERNEL_C_ABI_VERSION, then the registration
 * function once.  Write them with OPKERNEL_LIBRARY:
 *
 *     OPKERNEL_LIBRARY(api, lib) {
 *       OK_OpBuilder* op = api->new_op(lib, "ZeroOut");
 *       ...
 *       return api->register_kernel(lib, "ZeroOut", "cpu", "T: {float, int32}", zero_out);
 *     }
 */
#define OPKERNEL_LIBRARY(api, lib)                                                   \
  OK_EXPORT uint32_t opkernel_c_abi_version(void) { return OPKERNEL_C_ABI_VERSION; } \
  OK_EXPORT int opkernel_library_register(const OK_Api* api, OK_Library* lib)

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* OPKERNEL_C_API_H_ */
