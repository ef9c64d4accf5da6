/* AddOne, the CUDA example of TensorFlow's "Create an op" guide (cuda_op_kernel.cu.cc), as an
 * opkernel op library: one op with a kernel for cpu (plain C++) and one for cuda.
 *
 *   nvcc -shared -Xcompiler -fPIC,-fvisibility=hidden --cudart static \
 *        -I$(python -c "import opkernel.sysconfig as s; print(s.get_include())") \
 *        -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90] \
 *        add_one.cu -o add_one.so
 *
 *   lib = ok.load_op_library("./add_one.so")
 *   lib.add_one([1, 2, 3])   # [2, 3, 4] on cpu, and on cuda where a GPU is
 */
#include <cuda_runtime.h>
#include <opkernel/c_api.h>

__global__ void add_one_kernel(const int* in, int* out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
    out[i] = in[i] + 1;
}

static int64_t elements(const DLTensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

static int add_one_cuda(const OK_Api* api, OK_KernelContext* ctx) {
  const DLTensor* in = api->input(ctx, 0);
  if (in == NULL) return OK_INTERNAL;
  DLTensor* out = api->allocate_output(ctx, 0, in->ndim, in->shape);
  if (out == NULL) return OK_INTERNAL;
  int64_t n = elements(in);
  if (n == 0) return OK_OK;
  int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  add_one_kernel<<<blocks, 256, 0, (cudaStream_t)api->stream(ctx)>>>(
      (const int*)in->data, (int*)out->data, n);
  cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? OK_OK : api->set_error(ctx, OK_INTERNAL, cudaGetErrorString(status));
}

static int add_one_cpu(const OK_Api* api, OK_KernelContext* ctx) {
  const DLTensor* in = api->input(ctx, 0);
  if (in == NULL) return OK_INTERNAL;
  DLTensor* out = api->allocate_output(ctx, 0, in->ndim, in->shape);
  if (out == NULL) return OK_INTERNAL;
  const int* x = (const int*)in->data;
  int* y = (int*)out->data;
  for (int64_t i = 0, n = elements(in); i < n; ++i) y[i] = x[i] + 1;
  return OK_OK;
}

extern "C" {
OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "AddOne");
  if (op == NULL) return OK_INTERNAL;
  int status = api->op_input(op, "input: int32");
  if (!status) status = api->op_output(op, "output: int32");
  if (!status) status = api->op_shape_fn(op, "unchanged_shape");
  if (!status) status = api->register_kernel(lib, "AddOne", "cpu", NULL, add_one_cpu);
  if (!status) status = api->register_kernel(lib, "AddOne", "cuda", NULL, add_one_cuda);
  return status;
}
}
