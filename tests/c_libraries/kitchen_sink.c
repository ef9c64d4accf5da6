/* Every entry of the OK_Api table, for tests/test_c_op_library.py: list inputs, attrs of
 * every kind, errors a kernel reports, and kernels that break the ABI's rules. */
#include <opkernel/c_api.h>
#include <string.h>
#include <time.h>

/* Ck>AddAll: the elementwise sum of N float tensors of one shape. */
static int add_all(const OK_Api* api, OK_KernelContext* ctx) {
  int n = api->num_inputs(ctx);
  const DLTensor* first = api->input(ctx, 0);
  if (first == NULL) return OK_INTERNAL;
  DLTensor* out = api->allocate_output(ctx, 0, first->ndim, first->shape);
  if (out == NULL) return OK_INTERNAL;
  int64_t size = 1;
  for (int d = 0; d < first->ndim; ++d) size *= first->shape[d];
  float* sum = (float*)out->data;
  memset(sum, 0, (size_t)size * sizeof(float));
  for (int i = 0; i < n; ++i) {
    const DLTensor* x = api->input(ctx, i);
    if (x == NULL) return OK_INTERNAL;
    if (x->ndim != first->ndim || memcmp(x->shape, first->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
      return api->set_error(ctx, OK_INVALID_ARGUMENT, "inputs must all have one shape");
    const float* v = (const float*)x->data;
    for (int64_t k = 0; k < size; ++k) sum[k] += v[k];
  }
  return OK_OK;
}

/* Ck>Attrs: its attrs and its input's description as a float64 vector:
 * [i, f, b, T's DLPack code, T's bits, len(dims), dims..., len(s), s[0], ndim, strides..., outputs] */
static int attrs(const OK_Api* api, OK_KernelContext* ctx) {
  int64_t i, dims[8];
  double f;
  int b, count;
  DLDataType t;
  char s[4];
  size_t length;
  int status = api->attr_int(ctx, "i", &i);
  if (!status) status = api->attr_float(ctx, "f", &f);
  if (!status) status = api->attr_bool(ctx, "b", &b);
  if (!status) status = api->attr_type(ctx, "T", &t);
  if (!status) status = api->attr_int_list(ctx, "dims", dims, 8, &count);
  if (!status) status = api->attr_string(ctx, "s", s, sizeof s, &length);
  if (status) return status;
  const DLTensor* x = api->input(ctx, 0);
  if (x == NULL) return OK_INTERNAL;
  int64_t n = 11 + (count < 8 ? count : 8) + x->ndim;
  DLTensor* out = api->allocate_output(ctx, 0, 1, &n);
  if (out == NULL) return OK_INTERNAL;
  double* v = (double*)out->data;
  int k = 0;
  v[k++] = (double)i;
  v[k++] = f;
  v[k++] = b;
  v[k++] = t.code;
  v[k++] = t.bits;
  v[k++] = count;
  for (int j = 0; j < count && j < 8; ++j) v[k++] = (double)dims[j];
  v[k++] = (double)length;
  v[k++] = (double)(unsigned char)s[0];
  v[k++] = x->ndim;
  for (int j = 0; j < x->ndim; ++j) v[k++] = (double)x->strides[j];
  v[k++] = api->num_outputs(ctx);
  v[k++] = (api->stream(ctx) == NULL);
  return OK_OK;
}

/* Ck>Misbehave: breaks a rule, chosen by `mode`. */
static int misbehave(const OK_Api* api, OK_KernelContext* ctx) {
  int64_t mode, one = 1;
  double f;
  int b;
  if (api->attr_int(ctx, "mode", &mode)) return OK_INTERNAL;
  switch (mode) {
    case 0: return OK_INVALID_ARGUMENT;                   /* an error without a message */
    case 1: return OK_OK;                                 /* its output never allocated */
    case 2: api->allocate_output(ctx, 0, 1, &one);        /* allocated twice */
            return api->allocate_output(ctx, 0, 1, &one) ? OK_OK : OK_INVALID_ARGUMENT;
    case 3: return api->input(ctx, 5) ? OK_OK : OK_INTERNAL;           /* no input 5 */
    case 4: return api->attr_float(ctx, "missing", &f);                 /* no such attr */
    case 5: return api->attr_bool(ctx, "mode", &b);                     /* an int, not a bool */
    case 6: return api->set_error(ctx, OK_RESOURCE_EXHAUSTED, "no room for the answer");
    case 7: { int64_t bad = -2; return api->allocate_output(ctx, 0, 1, &bad) ? OK_OK : OK_INTERNAL; }
    case 8: { int64_t huge[2] = {1LL << 20, 1LL << 20};                 /* 4 TiB of floats */
              return api->allocate_output(ctx, 0, 2, huge) ? OK_OK : OK_INTERNAL; }
    case 9: { int64_t dims[300] = {0};                                  /* past 254 dimensions */
              return api->allocate_output(ctx, 0, 300, dims) ? OK_OK : OK_INTERNAL; }
    case 10: { int64_t huge[2] = {1LL << 31, 1LL << 31};                /* 2^64 bytes */
              return api->allocate_output(ctx, 0, 2, huge) ? OK_OK : OK_INTERNAL; }
    default: return api->set_error(ctx, OK_UNIMPLEMENTED, "no such mode");
  }
}

/* Ck>Sleep: sleeps `ms` milliseconds and returns its input: a kernel runs without the GIL. */
static int sleep_kernel(const OK_Api* api, OK_KernelContext* ctx) {
  int64_t ms;
  if (api->attr_int(ctx, "ms", &ms)) return OK_INTERNAL;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  const DLTensor* x = api->input(ctx, 0);
  if (x == NULL) return OK_INTERNAL;
  DLTensor* out = api->allocate_output(ctx, 0, x->ndim, x->shape);
  if (out == NULL) return OK_INTERNAL;
  memcpy(out->data, x->data, sizeof(float));
  return OK_OK;
}

#define TRY(call) do { int s_ = (call); if (s_) return s_; } while (0)

OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "Ck>AddAll");
  if (op == NULL) return OK_INTERNAL;
  TRY(api->op_attr(op, "N: int >= 1"));
  TRY(api->op_input(op, "xs: N * float"));
  TRY(api->op_output(op, "sum: float"));
  TRY(api->op_shape_fn(op, "merge_all_inputs"));
  TRY(api->register_kernel(lib, "Ck>AddAll", "cpu", NULL, add_all));

  op = api->new_op(lib, "Ck>Attrs");
  if (op == NULL) return OK_INTERNAL;
  TRY(api->op_attr(op, "T: {float, int64, bfloat16}"));
  TRY(api->op_attr(op, "i: int"));
  TRY(api->op_attr(op, "f: float"));
  TRY(api->op_attr(op, "b: bool"));
  TRY(api->op_attr(op, "dims: list(int)"));
  TRY(api->op_attr(op, "s: string"));
  TRY(api->op_input(op, "x: T"));
  TRY(api->op_output(op, "info: double"));
  TRY(api->register_kernel(lib, "Ck>Attrs", "cpu", "T: {float, int64, bfloat16}", attrs));

  op = api->new_op(lib, "Ck>Misbehave");
  if (op == NULL) return OK_INTERNAL;
  TRY(api->op_attr(op, "mode: int"));
  TRY(api->op_input(op, "x: float"));
  TRY(api->op_output(op, "y: float"));
  TRY(api->op_set_is_stateful(op));
  TRY(api->register_kernel(lib, "Ck>Misbehave", "cpu", NULL, misbehave));

  op = api->new_op(lib, "Ck>Sleep");
  if (op == NULL) return OK_INTERNAL;
  TRY(api->op_attr(op, "ms: int"));
  TRY(api->op_input(op, "x: float"));
  TRY(api->op_output(op, "y: float"));
  TRY(api->op_shape_fn(op, "unchanged_shape"));
  TRY(api->op_set_is_stateful(op));
  return api->register_kernel(lib, "Ck>Sleep", "cpu", "", sleep_kernel);
}
