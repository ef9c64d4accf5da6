/* Libraries opkernel must refuse, chosen by -D at compile time (tests/test_c_op_library.py). */
#include <opkernel/c_api.h>

__attribute__((unused)) static int nothing(const OK_Api* api, OK_KernelContext* ctx) { (void)api; (void)ctx; return OK_OK; }

#if defined(WRONG_ABI)
/* Built for another ABI version. */
OK_EXPORT uint32_t opkernel_c_abi_version(void) { return OPKERNEL_C_ABI_VERSION + 1; }
OK_EXPORT int opkernel_library_register(const OK_Api* api, OK_Library* lib) { (void)api; (void)lib; return 0; }
#elif defined(NO_ENTRY)
/* A shared object that is no op library. */
OK_EXPORT int some_function(void) { return 1; }
#elif defined(BAD_SPEC)
/* A malformed attr spec after a good op: neither op may stay registered. */
OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* good = api->new_op(lib, "Refused>Good");
  api->op_input(good, "x: float");
  api->op_output(good, "y: float");
  api->register_kernel(lib, "Refused>Good", "cpu", NULL, nothing);
  OK_OpBuilder* bad = api->new_op(lib, "Refused>Bad");
  int status = api->op_attr(bad, "T: {float,");
  return status;  /* OK_INVALID_ARGUMENT, its message recorded */
}
#elif defined(IGNORED_ERROR)
/* A failed call whose status the library ignores: still refused. */
OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "Refused>Ignored");
  api->op_input(op, "x: float");
  api->op_output(op, "y: float");
  api->register_kernel(lib, "Refused>Ignored", "cpu", "T: {floaty}", nothing);
  return OK_OK;
}
#elif defined(CROSS_CHECK)
/* Specs that parse but do not fit together (an input's type attr is never declared). */
OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "Refused>CrossCheck");
  api->op_input(op, "x: T");
  api->op_output(op, "y: float");
  return api->register_kernel(lib, "Refused>CrossCheck", "cpu", NULL, nothing);
}
#elif defined(OPENCL_KERNEL)
/* A kernel for a backend whose memory has no pointer a C function could use. */
OPKERNEL_LIBRARY(api, lib) {
  OK_OpBuilder* op = api->new_op(lib, "Refused>OnOpenCL");
  api->op_input(op, "x: float");
  api->op_output(op, "y: float");
  return api->register_kernel(lib, "Refused>OnOpenCL", "opencl", NULL, nothing);
}
#else
#error choose a library with -D
#endif
