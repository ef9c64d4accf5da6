"""Every raw CUDA source of the plugin, with the template instantiations it uses.

This module is plain data (no cupy): the backend compiles these with
``cupy.RawModule`` (lazily, or all at once in ``warmup``), and the CI test
``tests/test_cuda_compile.py`` compiles the very same text and name
expressions with NVRTC for sm_80 and sm_90 without a GPU.

Each kernel is a template over the storage type ``T`` and the type ``A`` it
computes in (float for ``__half``, as the CPU backend widens 16-bit floats).
Work is spread with grid-stride loops, so any grid size is correct.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Source", "SOURCES", "OPTIONS", "CTYPES", "ACCUMULATOR", "source", "expression"]

#: Options passed to NVRTC, at run time (cupy adds -arch and its include path) and in the CI test.
OPTIONS: tuple[str, ...] = ("-std=c++17",)

#: dtype name -> the CUDA C type a kernel template is instantiated with.
CTYPES = {
    "float16": "__half", "float32": "float", "float64": "double",
    "int32": "int", "int64": "long long",
    "int8": "signed char", "int16": "short", "uint8": "unsigned char", "uint16": "unsigned short",
}

#: dtype name -> the type kernels compute in.
ACCUMULATOR = {
    "float16": "float", "float32": "float", "float64": "double", "int32": "int", "int64": "long long",
    "int8": "int", "int16": "int", "uint8": "int", "uint16": "int",
}

FLOATS = ("float16", "float32", "float64")
REALS = FLOATS + ("int32", "int64")
#: MaxPool and MaxPoolWithArgmax also take the small integers (computed in int), as TensorFlow's CPU kernels.
POOL_TYPES = REALS + ("int8", "int16", "uint8", "uint16")


@dataclass(frozen=True)
class Source:
    """One CUDA translation unit: its text, its kernel templates and the template
    arguments each is instantiated with (one tuple of C types per instantiation)."""

    name: str
    code: str
    kernels: tuple[str, ...]
    instantiations: tuple[tuple[str, ...], ...]

    def name_expressions(self) -> list[str]:
        return [expression(k, args) for k in self.kernels for args in self.instantiations]


def expression(kernel: str, args: tuple[str, ...]) -> str:
    """The NVRTC name expression of one instantiation: ``softmax_xent<float, float>``."""
    return f"{kernel}<{', '.join(args)}>"


def _types(dtypes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((CTYPES[d], ACCUMULATOR[d]) for d in dtypes)


_PRELUDE = r"""
#include <cuda_fp16.h>
typedef long long i64;

template <typename A> __device__ __forceinline__ A lowest();
template <> __device__ __forceinline__ float lowest<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double lowest<double>() { return -__longlong_as_double(0x7ff0000000000000LL); }
template <> __device__ __forceinline__ int lowest<int>() { return -2147483647 - 1; }
template <> __device__ __forceinline__ long long lowest<long long>() { return -9223372036854775807LL - 1; }

template <typename A> __device__ __forceinline__ A to_acc(__half v) { return static_cast<A>(__half2float(v)); }
template <typename A> __device__ __forceinline__ A to_acc(float v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(double v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(int v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(long long v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(signed char v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(short v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(unsigned char v) { return static_cast<A>(v); }
template <typename A> __device__ __forceinline__ A to_acc(unsigned short v) { return static_cast<A>(v); }

template <typename T> struct Store { template <typename A> __device__ static T from(A v) { return static_cast<T>(v); } };
template <> struct Store<__half> { template <typename A> __device__ static __half from(A v) { return __float2half_rn(static_cast<float>(v)); } };

__device__ __forceinline__ float ex(float v) { return expf(v); }
__device__ __forceinline__ double ex(double v) { return exp(v); }
__device__ __forceinline__ float lg(float v) { return logf(v); }
__device__ __forceinline__ double lg(double v) { return log(v); }
__device__ __forceinline__ float root(float v) { return sqrtf(v); }
__device__ __forceinline__ double root(double v) { return sqrt(v); }

// max that propagates NaN, as numpy's maximum and max do
template <typename A> __device__ __forceinline__ A maxv(A a, A b) { return (a != a || a > b) ? a : b; }

struct MaxOp { template <typename A> __device__ A operator()(A a, A b) const { return maxv(a, b); } };
struct SumOp { template <typename A> __device__ A operator()(A a, A b) const { return a + b; } };

// Reduce one value per thread over the block (blockDim.x a power of two); every thread gets the result.
template <typename A, typename Op>
__device__ A block_reduce(A v, A* scratch, Op op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  A r = scratch[0];
  __syncthreads();
  return r;
}
"""

_XENT = _PRELUDE + r"""
// SoftmaxCrossEntropyWithLogits on [rows, cols]: one block per row (grid-stride over rows);
// loss[r] = -sum(labels * log_softmax), backprop = softmax - labels.  Shared memory: blockDim.x * sizeof(A).
template <typename T, typename A>
__global__ void softmax_xent(const T* logits, const T* labels, T* loss, T* backprop, i64 rows, i64 cols) {
  extern __shared__ unsigned char smem[];
  A* scratch = reinterpret_cast<A*>(smem);
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * cols;
    const T* y = labels + r * cols;
    A m = lowest<A>();
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) m = maxv(m, to_acc<A>(x[j]));
    m = block_reduce(m, scratch, MaxOp());
    A s = A(0);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += ex(to_acc<A>(x[j]) - m);
    const A log_sum = lg(block_reduce(s, scratch, SumOp()));
    A l = A(0);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A logp = to_acc<A>(x[j]) - m - log_sum;
      const A yj = to_acc<A>(y[j]);
      l -= yj * logp;
      backprop[r * cols + j] = Store<T>::from(ex(logp) - yj);
    }
    l = block_reduce(l, scratch, SumOp());
    if (threadIdx.x == 0) loss[r] = Store<T>::from(l);
  }
}

// SparseSoftmaxCrossEntropyWithLogits: labels are class indices (checked on the host first).
template <typename T, typename A, typename L>
__global__ void sparse_softmax_xent(const T* logits, const L* labels, T* loss, T* backprop, i64 rows, i64 cols) {
  extern __shared__ unsigned char smem[];
  A* scratch = reinterpret_cast<A*>(smem);
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = logits + r * cols;
    const i64 label = static_cast<i64>(labels[r]);
    A m = lowest<A>();
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) m = maxv(m, to_acc<A>(x[j]));
    m = block_reduce(m, scratch, MaxOp());
    A s = A(0);
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += ex(to_acc<A>(x[j]) - m);
    const A log_sum = lg(block_reduce(s, scratch, SumOp()));
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
      const A logp = to_acc<A>(x[j]) - m - log_sum;
      backprop[r * cols + j] = Store<T>::from(ex(logp) - (j == label ? A(1) : A(0)));
      if (j == label) loss[r] = Store<T>::from(-logp);
    }
  }
}
"""

_BIAS_GRAD = _PRELUDE + r"""
// BiasAddGrad, channels last: partial[k, c] = sum of dy[rows k*chunk .. (k+1)*chunk, c].
// Threads of a warp read neighbouring channels (coalesced); the host sums the chunks.
template <typename T, typename A>
__global__ void bias_grad_partial(const T* dy, A* partial, i64 rows, i64 channels, i64 chunk) {
  const i64 k = blockIdx.y;
  const i64 r0 = k * chunk;
  const i64 r1 = (r0 + chunk < rows) ? r0 + chunk : rows;
  for (i64 c = blockIdx.x * (i64)blockDim.x + threadIdx.x; c < channels; c += (i64)gridDim.x * blockDim.x) {
    A acc = A(0);
    for (i64 r = r0; r < r1; ++r) acc += to_acc<A>(dy[r * channels + c]);
    partial[k * channels + c] = acc;
  }
}
"""

_POOL = _PRELUDE + r"""
// MaxPool over NHWC, TensorFlow's CPU rules (pooling_ops_common.h, maxpooling_op.cc): y
// starts at the lowest finite value and takes only greater elements (NaN never, -inf
// never), and argmax = the flat NHWC index into x of the first element in row-major window
// order, then of each strictly greater one, or -1 for a window with no input element in it.
template <typename A> __device__ __forceinline__ A lowest_finite() { return lowest<A>(); }
template <> __device__ __forceinline__ float lowest_finite<float>() { return -3.402823466e+38f; }
template <> __device__ __forceinline__ double lowest_finite<double>() { return -1.7976931348623157e+308; }
// The start of MaxPool's maximum: T's own lowest finite value (half computes in float).
template <typename T, typename A> __device__ __forceinline__ A pool_floor() { return lowest_finite<A>(); }
template <> __device__ __forceinline__ float pool_floor<__half, float>() { return -65504.0f; }
template <> __device__ __forceinline__ int pool_floor<signed char, int>() { return -128; }
template <> __device__ __forceinline__ int pool_floor<short, int>() { return -32768; }
template <> __device__ __forceinline__ int pool_floor<unsigned char, int>() { return 0; }
template <> __device__ __forceinline__ int pool_floor<unsigned short, int>() { return 0; }
template <typename T, typename A>
// The geometry is 64-bit: window coordinates (oy * sh - pad_top + i) pass 2**31 for
// geometries whose every size fits in 32 bits.  The loops visit only the taps inside the
// input, so a window far larger than the input costs nothing.
__global__ void max_pool(const T* x, T* y, i64* argmax, i64 total, i64 h, i64 w, i64 c, i64 oh, i64 ow,
                         i64 kh, i64 kw, i64 sh, i64 sw, i64 pad_top, i64 pad_left) {
  for (i64 o = blockIdx.x * (i64)blockDim.x + threadIdx.x; o < total; o += (i64)gridDim.x * blockDim.x) {
    const i64 ch = o % c;
    const i64 ox = (o / c) % ow;
    const i64 oy = (o / (c * ow)) % oh;
    const i64 n = o / (c * ow * oh);
    A best = lowest<A>();
    A top = pool_floor<T, A>();
    i64 best_i = -1;
    const i64 r0 = oy * sh - pad_top, q0 = ox * sw - pad_left;
    for (i64 i = r0 < 0 ? -r0 : 0; i < kh && r0 + i < h; ++i) {
      const i64 r = r0 + i;
      for (i64 j = q0 < 0 ? -q0 : 0; j < kw && q0 + j < w; ++j) {
        const i64 q = q0 + j;
        const i64 idx = ((n * h + r) * w + q) * c + ch;
        const A v = to_acc<A>(x[idx]);
        if (best_i < 0 || v > best) { best = v; best_i = idx; }
        if (v > top) top = v;
      }
    }
    y[o] = Store<T>::from(top);
    argmax[o] = best_i;
  }
}

// MaxPoolGrad as a gather (deterministic, no atomics): each input element sums the
// gradients of the windows whose argmax it is.
template <typename T, typename A>
__global__ void max_pool_grad(const i64* argmax, const T* grad, T* dx, i64 total, i64 h, i64 w, i64 c, i64 oh, i64 ow,
                              i64 kh, i64 kw, i64 sh, i64 sw, i64 pad_top, i64 pad_left) {
  for (i64 idx = blockIdx.x * (i64)blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
    const i64 ch = idx % c;
    const i64 q = (idx / c) % w;
    const i64 r = (idx / (c * w)) % h;
    const i64 n = idx / (c * w * h);
    const i64 rp = r + pad_top, qp = q + pad_left;  // 64-bit: max_pool's geometry
    const i64 y0 = rp - kh + 1 > 0 ? (rp - kh + 1 + sh - 1) / sh : 0;
    const i64 x0 = qp - kw + 1 > 0 ? (qp - kw + 1 + sw - 1) / sw : 0;
    const i64 y1 = min(rp / sh, oh - 1), x1 = min(qp / sw, ow - 1);
    A acc = A(0);
    for (i64 oy = y0; oy <= y1; ++oy) {
      for (i64 ox = x0; ox <= x1; ++ox) {
        const i64 o = ((n * oh + oy) * ow + ox) * c + ch;
        if (argmax[o] == idx) acc += to_acc<A>(grad[o]);
      }
    }
    dx[idx] = Store<T>::from(acc);
  }
}
"""

_TRAINING = _PRELUDE + r"""
// The fused optimizer updates (TensorFlow's training_ops), in place on contiguous
// variables; the hyper-parameters are one-element device arrays, read by every thread.
template <typename T, typename A>
__global__ void apply_gradient_descent(T* var, const T* alpha, const T* delta, i64 n) {
  const A a = to_acc<A>(alpha[0]);
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
    var[i] = Store<T>::from(to_acc<A>(var[i]) - a * to_acc<A>(delta[i]));
}

template <typename T, typename A>
__global__ void apply_momentum(T* var, T* accum, const T* lr, const T* grad, const T* momentum, i64 n, int nesterov) {
  const A l = to_acc<A>(lr[0]), mu = to_acc<A>(momentum[0]);
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const A g = to_acc<A>(grad[i]);
    const A a = to_acc<A>(accum[i]) * mu + g;
    accum[i] = Store<T>::from(a);
    const A step = nesterov ? l * (g + mu * a) : l * a;
    var[i] = Store<T>::from(to_acc<A>(var[i]) - step);
  }
}

template <typename T, typename A>
__global__ void apply_adam(T* var, T* m, T* v, const T* beta1_power, const T* beta2_power, const T* lr,
                           const T* beta1, const T* beta2, const T* epsilon, const T* grad, i64 n, int nesterov) {
  const A b1 = to_acc<A>(beta1[0]), b2 = to_acc<A>(beta2[0]), eps = to_acc<A>(epsilon[0]);
  const A lr_t = to_acc<A>(lr[0]) * root(A(1) - to_acc<A>(beta2_power[0])) / (A(1) - to_acc<A>(beta1_power[0]));
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const A g = to_acc<A>(grad[i]);
    A mi = to_acc<A>(m[i]);
    A vi = to_acc<A>(v[i]);
    mi += (g - mi) * (A(1) - b1);
    vi += (g * g - vi) * (A(1) - b2);
    m[i] = Store<T>::from(mi);
    v[i] = Store<T>::from(vi);
    const A direction = nesterov ? mi * b1 + g * (A(1) - b1) : mi;
    var[i] = Store<T>::from(to_acc<A>(var[i]) - lr_t * direction / (root(vi) + eps));
  }
}
"""

_RANDOM = r"""
#include <cuda_fp16.h>
typedef long long i64;
typedef unsigned long long u64;

// Philox 4x32-10 at counter + n (a 128-bit counter of four words, lowest first)
__device__ __forceinline__ void philox10(uint4 c, unsigned k0, unsigned k1, unsigned* w) {
  for (int r = 0; r < 10; r++) {
    const unsigned h0 = __umulhi(0xD2511F53u, c.x), l0 = 0xD2511F53u * c.x;
    const unsigned h1 = __umulhi(0xCD9E8D57u, c.z), l1 = 0xCD9E8D57u * c.z;
    c = make_uint4(h1 ^ c.y ^ k0, l1, h0 ^ c.w ^ k1, l0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = c.x; w[1] = c.y; w[2] = c.z; w[3] = c.w;
}
__device__ __forceinline__ uint4 counter_add(uint4 b, u64 n) {
  const u64 lo = (((u64)b.y << 32) | b.x) + n;
  const u64 hi = (((u64)b.w << 32) | b.z) + (lo < n ? 1 : 0);
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
}
__device__ __forceinline__ float unit_float(unsigned x) { return __uint_as_float((127u << 23) | (x & 0x7fffffu)) - 1.0f; }
__device__ __forceinline__ double unit_double(unsigned x0, unsigned x1) {
  return __longlong_as_double((long long)((1023ull << 52) | ((u64)(x0 & 0xfffffu) << 32) | x1)) - 1.0;
}
// TensorFlow's BoxMullerFloat; the logarithm, sine, cosine and root in double, rounded to float
__device__ __forceinline__ void box_muller_float(unsigned x0, unsigned x1, float* f0, float* f1) {
  float u1 = unit_float(x0);
  if (u1 < 1.0e-7f) u1 = 1.0e-7f;
  const float v1 = (float)(2.0 * 3.14159265358979323846 * (double)unit_float(x1));
  const float lg = (float)log((double)u1);
  const float u2 = (float)sqrt((double)__fmul_rn(-2.0f, lg));
  *f0 = __fmul_rn((float)sin((double)v1), u2);
  *f1 = __fmul_rn((float)cos((double)v1), u2);
}
__device__ __forceinline__ void box_muller_double(unsigned x0, unsigned x1, unsigned x2, unsigned x3, double* d0, double* d1) {
  double u1 = unit_double(x0, x1);
  if (u1 < 1.0e-7) u1 = 1.0e-7;
  const double v1 = __dmul_rn(2 * 3.14159265358979323846, unit_double(x2, x3));
  const double u2 = sqrt(__dmul_rn(-2.0, log(u1)));
  *d0 = __dmul_rn(sin(v1), u2);
  *d1 = __dmul_rn(cos(v1), u2);
}
struct Samples {
  uint4 counter; unsigned w[4]; int used; unsigned k0, k1;
  __device__ unsigned next() {
    if (used == 4) { philox10(counter, k0, k1, w); counter = counter_add(counter, 1); used = 0; }
    return w[used++];
  }
};
template <typename T> struct Put { __device__ static void at(T* out, i64 i, float v) { out[i] = (T)v; } };
template <> struct Put<__half> { __device__ static void at(__half* out, i64 i, float v) { out[i] = __float2half_rn(v); } };

// One thread per group of 4 outputs (2 for double), grid-stride.
template <typename T>
__global__ void philox_uniform(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 4; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 4) {
    unsigned w[4];
    philox10(counter_add(base, (u64)g), k0, k1, w);
    for (int k = 0; k < 4 && at + k < size; k++)
      Put<T>::at(out, at + k, sizeof(T) == 2 ? (float)(w[k] & 0x3ffu) * (1.0f / 1024) : unit_float(w[k]));
  }
}
template <typename T>
__global__ void philox_normal(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 4; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 4) {
    unsigned w[4];
    float f[4];
    philox10(counter_add(base, (u64)g), k0, k1, w);
    box_muller_float(w[0], w[1], &f[0], &f[1]);
    box_muller_float(w[2], w[3], &f[2], &f[3]);
    for (int k = 0; k < 4 && at + k < size; k++) Put<T>::at(out, at + k, f[k]);
  }
}
template <typename T>
__global__ void philox_truncated(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 4; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 4) {
    Samples s;
    s.counter = counter_add(base, (u64)g * 256); s.used = 4; s.k0 = k0; s.k1 = k1;
    int index = 0;
    while (index < 4) {
      const unsigned a = s.next(), b = s.next();
      float f[2];
      box_muller_float(a, b, &f[0], &f[1]);
      for (int k = 0; k < 2 && index < 4; k++)
        if (fabsf(f[k]) < 2.0f) { if (at + index < size) Put<T>::at(out, at + index, f[k]); index++; }
    }
  }
}
template <typename T>
__global__ void philox_uniform_double(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 2; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 2) {
    unsigned w[4];
    philox10(counter_add(base, (u64)g), k0, k1, w);
    out[at] = unit_double(w[0], w[1]);
    if (at + 1 < size) out[at + 1] = unit_double(w[2], w[3]);
  }
}
template <typename T>
__global__ void philox_normal_double(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 2; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 2) {
    unsigned w[4];
    double d[2];
    philox10(counter_add(base, (u64)g), k0, k1, w);
    box_muller_double(w[0], w[1], w[2], w[3], &d[0], &d[1]);
    out[at] = d[0];
    if (at + 1 < size) out[at + 1] = d[1];
  }
}
template <typename T>
__global__ void philox_truncated_double(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * 2; at < size; g += (i64)gridDim.x * blockDim.x, at = g * 2) {
    Samples s;
    s.counter = counter_add(base, (u64)g * 128); s.used = 4; s.k0 = k0; s.k1 = k1;
    int index = 0;
    while (index < 2) {
      const unsigned a = s.next(), b = s.next(), c = s.next(), e = s.next();
      double d[2];
      box_muller_double(a, b, c, e, &d[0], &d[1]);
      for (int k = 0; k < 2 && index < 2; k++)
        if (fabs(d[k]) < 2.0) { if (at + index < size) out[at + index] = d[k]; index++; }
    }
  }
}
// Integers: lo + bits % range (full = 1: the bits), wrapped to T's width; W the unsigned type of that width.
template <typename T, typename W>
__global__ void philox_int(T* out, i64 size, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3, u64 lo, u64 range, int full) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  const int per = sizeof(W) == 8 ? 2 : 4;
  for (i64 g = blockIdx.x * (i64)blockDim.x + threadIdx.x, at = g * per; at < size; g += (i64)gridDim.x * blockDim.x, at = g * per) {
    unsigned w[4];
    philox10(counter_add(base, (u64)g), k0, k1, w);
    for (int k = 0; k < per && at + k < size; k++) {
      const W bits = sizeof(W) == 8 ? (W)(((u64)w[2 * k + 1] << 32) | w[2 * k]) : (W)w[k];
      out[at + k] = (T)(full ? bits : (W)((W)lo + bits % (W)range));
    }
  }
}
// StatelessMultinomial: one thread per sample; sample i reads words 2i, 2i + 1 of the stream.
template <typename L, typename O>
__global__ void multinomial(O* out, const L* logits, int classes, i64 n, i64 total_samples, unsigned k0, unsigned k1, unsigned c0, unsigned c1, unsigned c2, unsigned c3) {
  const uint4 base = make_uint4(c0, c1, c2, c3);
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total_samples; i += (i64)gridDim.x * blockDim.x) {
    const L* row = logits + (i / n) * classes;
    unsigned w[4];
    philox10(counter_add(base, (u64)(i / 2)), k0, k1, w);
    const double u = (i % 2) ? unit_double(w[2], w[3]) : unit_double(w[0], w[1]);
    double top = -1.0 / 0.0;
    bool any = false;
    for (int j = 0; j < classes; j++) { const double v = (double)row[j]; if (isfinite(v)) { if (!any || v > top) top = v; any = true; } }
    double total = 0;
    for (int j = 0; j < classes; j++) { const double v = (double)row[j]; if (isfinite(v)) total += exp(v - top); }
    const double to_find = u * total;
    double running = 0;
    int found = classes;
    for (int j = 0; j < classes; j++) {
      const double v = (double)row[j];
      if (isfinite(v)) running += exp(v - top);
      if (running > to_find) { found = j; break; }
    }
    out[i] = (O)found;
  }
}
"""

SOURCES: tuple[Source, ...] = (
    Source("xent", _XENT, ("softmax_xent",), _types(FLOATS)),
    Source(
        "sparse_xent", _XENT, ("sparse_softmax_xent",),
        tuple((CTYPES[d], ACCUMULATOR[d], CTYPES[i]) for d in FLOATS for i in ("int32", "int64")),
    ),
    Source("bias_grad", _BIAS_GRAD, ("bias_grad_partial",), _types(REALS)),
    Source("pool", _POOL, ("max_pool", "max_pool_grad"), _types(POOL_TYPES)),
    Source("training", _TRAINING, ("apply_gradient_descent", "apply_momentum", "apply_adam"), _types(FLOATS)),
    Source("philox", _RANDOM, ("philox_uniform", "philox_normal", "philox_truncated"), (("__half",), ("float",))),
    Source("philox_double", _RANDOM, ("philox_uniform_double", "philox_normal_double", "philox_truncated_double"),
           (("double",),)),
    Source(
        "philox_int", _RANDOM, ("philox_int",),
        (("int", "unsigned"), ("unsigned", "unsigned"), ("long long", "unsigned long long"),
         ("unsigned long long", "unsigned long long")),
    ),
    Source(
        "multinomial", _RANDOM, ("multinomial",),
        tuple((CTYPES[t], CTYPES[o]) for t in ("float32", "float64") for o in ("int32", "int64")),
    ),
)

_BY_NAME = {s.name: s for s in SOURCES}


def source(name: str) -> Source:
    return _BY_NAME[name]
