/* ZeroOut, the op of TensorFlow's "Create an op" guide, as an opkernel op library in C.
 *
 *   cc -shared -fPIC -O2 $(python -c "import opkernel.sysconfig as s; print(*s.get_compile_flags())") \
 *      zero_out.c -o zero_out.so
 *
 *   import opkernel as ok
 *   lib = ok.load_op_library("./zero_out.so")
 *   lib.zero_out([[1, 2], [3, 4]])            # [[1, 0], [0, 0]]
 *   lib.zero_out([5., 6., 7.], preserve_index=2)  # [0., 0., 7.]
 */
#include <opkernel/c_api.h>
#include <stdio.h>
#include <string.h>

/* Every element of the output is 0 but the one at preserve_index (in row-major order),
 * which keeps the input's value. */
static int zero_out(const OK_Api* api, OK_KernelContext* ctx) {
  const DLTensor* in = api->input(ctx, 0);
  int64_t preserve = 0;
  if (in == NULL || api->attr_int(ctx, "preserve_index", &preserve) != OK_OK) return OK_INTERNAL;
  int64_t n = 1;
  for (int d = 0; d < in->ndim; ++d) n *= in->shape[d];
  if (preserve >= n && n > 0) {
    char message[128];
    snprintf(message, sizeof message, "preserve_index out of range: %lld for an input of %lld elements",
             (long long)preserve, (long long)n);
    return api->set_error(ctx, OK_INVALID_ARGUMENT, message);
  }
  DLTensor* out = api->allocate_output(ctx, 0, in->ndim, in->shape);
  if (out == NULL) return OK_INTERNAL;
  size_t width = in->dtype.bits / 8;
  char* dst = (char*)out->data + out->byte_offset;
  const char* src = (const char*)in->data + in->byte_offset;
  memset(dst, 0, (size_t)n * width);  /* 0 is all-zero bits for float32 and int32 */
  if (n > 0) memcpy(dst + preserve * width, src + preserve * width, width);
  return OK_OK;
}

OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "ZeroOut");
  if (op == NULL) return OK_INTERNAL;
  int status = OK_OK;
  if (!status) status = api->op_attr(op, "T: {float, int32} = DT_INT32");
  if (!status) status = api->op_attr(op, "preserve_index: int >= 0 = 0");
  if (!status) status = api->op_input(op, "to_zero: T");
  if (!status) status = api->op_output(op, "zeroed: T");
  if (!status) status = api->op_shape_fn(op, "unchanged_shape");
  if (!status) status = api->op_doc(op,
      "Zeroes every element but one.\n"
      "\n"
      "to_zero: The tensor to zero out.\n"
      "zeroed: A tensor of to_zero's shape and type: zero everywhere but at preserve_index.\n"
      "preserve_index: The row-major index of the element that keeps its value.");
  if (!status) status = api->register_kernel(lib, "ZeroOut", "cpu", "T: {float, int32}", zero_out);
  return status;
}
