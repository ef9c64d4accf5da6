/* The CPU backend's native code: a thread pool for large elementwise ufunc calls (its
 * Shard), and kernels numpy cannot do in one pass: MaxPool, MaxPoolWithArgmax and
 * MaxPoolGrad (numpy: a pass per window tap), a convolution's im2col (numpy copies a
 * channel run at a time) and col2im, ReluGrad and the sparse softmax cross-entropy.
 * Each kernel follows its numpy path in nn_kernels.py, which runs without this module.
 *
 * ``run(ufunc, inputs, out, threads, block)`` computes ``ufunc(*inputs, out=out)`` over
 * C-contiguous, aligned, native-order arrays of one size, in blocks of ``block``
 * elements shared out among the calling thread and ``threads - 1`` pool threads.  Each
 * block goes through the very inner loop numpy itself would pick for these types (the
 * first exact match in ``ufunc.types``: numpy's own legacy loop selection), so the
 * result is bit-identical to numpy's single-threaded call.
 *
 * Why native: a Python pool thread needs the GIL before it can start its chunk and
 * sleeps on a lock between chunks, so every hand-off pays a futex wake-up of an idle
 * core (tens of microseconds on a virtual machine), a fifth of a 1e6-element add.
 * Here the pool threads never touch the interpreter: after a job they spin for
 * ``SPIN_NS`` on an atomic ticket before they sleep, so back-to-back large ops start
 * on every core at once, and the blocks are claimed one at a time, so a thread that
 * wakes late simply gets fewer of them.
 *
 * The ticket is one 64-bit word: the job's generation (high half) and the number of
 * its blocks nobody has claimed yet (low half).  A thread claims block ``r - 1`` by a
 * compare-and-swap from ``(g, r)`` to ``(g, r - 1)``; only after that claim does it read
 * the job, which the caller rewrites only once every block of ``g`` is done, so a
 * late thread can never run a block of a job that has moved on.
 *
 * Floating-point exceptions (the flags numpy turns into warnings) are per thread:
 * every block's flags are folded into the job's, and ``run`` returns them, so the
 * caller can let numpy report them as it would have (see sharding.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/ufuncobject.h>

#include <errno.h>
#include <float.h>
#include <math.h>
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Loops marked WIDE_CLONES are compiled three times, for x86-64-v4 (AVX-512), x86-64-v3
 * (AVX2, FMA) and the baseline, and the loader picks the one this CPU runs (GCC's
 * target_clones, an ifunc).  On a 2-core Xeon the AVX-512 clone runs erf on 1e5 floats in
 * 47 us against 105-111 for the AVX2 one.  The clones do the same arithmetic element by
 * element (no reassociation), so they give the same bits, except the baseline's, which
 * has no fused multiply-add. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WIDE_CLONES
#endif

#define MAX_ARGS 3            /* unary and binary ufuncs with one output */
#define MAX_THREADS 256
#define SPIN_NS 200000        /* an idle pool thread spins this long before it sleeps */
#define FPE_FLAGS (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

#define MAX_JOB_ARGS 40  /* a fused program's inputs, outputs and offset (see fused) */

typedef struct {
    PyUFuncGenericFunction loop;
    void *data;
    int nargs;
    char *ptr[MAX_JOB_ARGS];
    npy_intp itemsize[MAX_JOB_ARGS];
    npy_intp size, block, nblocks;
    int rounding; /* the caller's fegetround(): pool threads compute in the same mode */
} Job;

static struct {
    pthread_mutex_t lock;       /* guards sleeping and starting threads */
    pthread_cond_t wake;
    pthread_mutex_t busy;       /* held by the one caller using the pool */
    int started;                /* pool threads running */
    _Atomic int wanted;         /* pool threads taking part in jobs (threads - 1) */
    _Atomic int sleepers;
    _Atomic uint64_t ticket;    /* (generation << 32) | unclaimed blocks */
    _Atomic npy_intp done;      /* blocks finished in this job */
    _Atomic int fpe;            /* floating-point flags raised by this job's blocks */
    _Atomic uint64_t pool_blocks;  /* blocks the pool threads (not callers) have run */
    Job job;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Claim and run blocks of job ``generation`` until none is left unclaimed; returns how many. */
static uint64_t work(uint32_t generation) {
    uint64_t ran = 0;
    uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(t >> 32) != generation || (uint32_t)t == 0) return ran;
        if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, t - 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;  /* t now holds the current ticket */
        const Job *job = &pool.job;
        npy_intp b = (npy_intp)(uint32_t)t - 1;
        npy_intp lo = b * job->block;
        npy_intp n = job->size - lo < job->block ? job->size - lo : job->block;
        char *args[MAX_JOB_ARGS];
        npy_intp steps[MAX_JOB_ARGS];
        for (int i = 0; i < job->nargs; i++) {
            args[i] = job->ptr[i] + lo * job->itemsize[i];
            steps[i] = job->itemsize[i];
        }
        if (fegetround() != job->rounding) fesetround(job->rounding);
        feclearexcept(FPE_FLAGS);
        job->loop(args, &n, steps, job->data);
        int raised = fetestexcept(FPE_FLAGS);
        if (raised) atomic_fetch_or_explicit(&pool.fpe, raised, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        ran++;
        t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    }
}

static void *pool_thread(void *arg) {
    int index = (int)(intptr_t)arg;
    uint32_t seen = (uint32_t)(atomic_load(&pool.ticket) >> 32);
    for (;;) {
        uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
        /* threads beyond the wanted count (after it was lowered) sleep at once */
        int surplus = index >= atomic_load_explicit(&pool.wanted, memory_order_relaxed);
        if ((uint32_t)(t >> 32) == seen) {
            uint64_t until = now_ns() + (surplus ? 0 : SPIN_NS);
            for (unsigned i = 1;; i++) {
                CPU_RELAX();
                t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
                if ((uint32_t)(t >> 32) != seen) break;
                if ((i & 255) == 0 && now_ns() > until) break;
            }
            if ((uint32_t)(t >> 32) == seen) {
                pthread_mutex_lock(&pool.lock);
                atomic_fetch_add(&pool.sleepers, 1);  /* seq_cst: see publish() */
                while ((uint32_t)(atomic_load(&pool.ticket) >> 32) == seen)
                    pthread_cond_wait(&pool.wake, &pool.lock);
                atomic_fetch_sub(&pool.sleepers, 1);
                pthread_mutex_unlock(&pool.lock);
                t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
            }
        }
        seen = (uint32_t)(t >> 32);
        if (index < atomic_load_explicit(&pool.wanted, memory_order_relaxed))
            atomic_fetch_add_explicit(&pool.pool_blocks, work(seen), memory_order_relaxed);
    }
    return NULL;
}

/* Start pool threads until there are ``n``; the caller holds ``pool.busy``. */
static int ensure_threads(int n) {
    atomic_store(&pool.wanted, n);
    pthread_mutex_lock(&pool.lock);
    while (pool.started < n) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        int err = pthread_create(&thread, &attr, pool_thread, (void *)(intptr_t)pool.started);
        pthread_attr_destroy(&attr);
        if (err) {
            pthread_mutex_unlock(&pool.lock);
            atomic_store(&pool.wanted, pool.started);
            return err;
        }
        pool.started++;
    }
    pthread_mutex_unlock(&pool.lock);
    return 0;
}

/* Hand the job in ``pool.job`` to the pool: its blocks become claimable. */
static void publish(void) {
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.fpe, 0, memory_order_relaxed);
    uint64_t generation = (atomic_load_explicit(&pool.ticket, memory_order_relaxed) >> 32) + 1;
    /* seq_cst store, then seq_cst load of sleepers: a thread going to sleep either is
     * counted here or sees the new generation under the lock before it waits. */
    atomic_store(&pool.ticket, ((generation & 0xffffffffu) << 32) | (uint64_t)pool.job.nblocks);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
}

static void after_fork_in_child(void) {
    /* The child has none of the parent's threads. */
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_mutex_init(&pool.busy, NULL);
    pool.started = 0;
    atomic_store(&pool.wanted, 0);
    atomic_store(&pool.sleepers, 0);
}

/* The inner loop numpy selects for exactly these type numbers, or NULL. */
static int find_loop(PyUFuncObject *ufunc, const int *types, int nargs, PyUFuncGenericFunction *loop,
                     void **data) {
    for (int k = 0; k < ufunc->ntypes; k++) {
        const char *sig = ufunc->types + (size_t)k * nargs;
        int i = 0;
        while (i < ufunc->nin && sig[i] == types[i]) i++;
        if (i < ufunc->nin) continue;
        /* numpy takes the first loop whose inputs match; its output must be ours */
        if (sig[nargs - 1] != types[nargs - 1] || ufunc->functions == NULL || ufunc->functions[k] == NULL)
            return 0;
        *loop = ufunc->functions[k];
        *data = ufunc->data == NULL ? NULL : ufunc->data[k];
        return 1;
    }
    return 0;
}

/* A quiet ufunc's loop and its data (see add_ufuncs): quiet_loop runs it and drops the
 * floating-point flags it raised. */
typedef struct {
    PyUFuncGenericFunction loop;
    void *data;
} QuietLoop;

static void quiet_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    const QuietLoop *q = (const QuietLoop *)data;
    int before = fetestexcept(FPE_FLAGS);
    q->loop(args, dimensions, steps, q->data);
    /* only what the loop raised, and only then: glibc's feclearexcept reloads the x87
     * state (85 ns a call, against 26 ns for the two tests) */
    int raised = fetestexcept(FPE_FLAGS) & ~before;
    if (raised) feclearexcept(raised);
}

static int usable(PyArrayObject *a, npy_intp size) {
    int t = PyArray_TYPE(a);
    return PyArray_SIZE(a) == size && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) &&
           PyArray_ISNOTSWAPPED(a) && (PyTypeNum_ISNUMBER(t) || PyTypeNum_ISBOOL(t));
}

/* Run ``job`` on the calling thread and ``threads - 1`` pool threads, the GIL released;
 * ``*raised`` gets the floating-point flags its blocks raised, or -1 when the pool is busy
 * with another caller's job (nothing was run).  Returns -1 with an OSError set when pool
 * threads cannot be started. */
static int run_job(const Job *job, int threads, int *raised) {
    if (pthread_mutex_trylock(&pool.busy) != 0) {
        *raised = -1;
        return 0;
    }
    int err = ensure_threads(threads - 1);
    if (err) {
        pthread_mutex_unlock(&pool.busy);
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    pool.job = *job;
    publish();
    uint32_t generation = (uint32_t)(atomic_load(&pool.ticket) >> 32);
    work(generation);
    /* every block is claimed; wait for the ones other threads are still running */
    for (unsigned i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < job->nblocks; i++) {
        if (i < 4096) CPU_RELAX();
        else sched_yield();
    }
    *raised = atomic_load_explicit(&pool.fpe, memory_order_relaxed);
    feclearexcept(FPE_FLAGS);
    Py_END_ALLOW_THREADS
    pthread_mutex_unlock(&pool.busy);
    return 0;
}

PyDoc_STRVAR(run_doc,
"run(ufunc, inputs, out, threads, block) -> int\n\n"
"Compute ``ufunc(*inputs, out=out)`` on the calling thread and ``threads - 1`` pool\n"
"threads, ``block`` elements at a time.  Returns the floating-point exception flags\n"
"the blocks raised (0: none); -1 when the pool is busy with another caller's job, -2\n"
"when the arrays are not all writeable (out), C-contiguous, aligned, native-order,\n"
"numeric and of one size, -3 when ``ufunc`` is not a unary or binary elementwise ufunc\n"
"with one output or numpy has no plain inner loop of it for exactly these types\n"
"(nothing was computed then).  Raises TypeError for arguments of the wrong kind.");

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *ufunc_obj, *inputs, *out_obj;
    int threads;
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OO!O!in", &ufunc_obj, &PyTuple_Type, &inputs, &PyArray_Type, &out_obj,
                          &threads, &block))
        return NULL;
    /* -3 for what this function can never run (as for types without an inner loop below) */
    if (!PyObject_TypeCheck(ufunc_obj, &PyUFunc_Type)) return PyLong_FromLong(-3);
    PyUFuncObject *ufunc = (PyUFuncObject *)ufunc_obj;
    Py_ssize_t nin = PyTuple_GET_SIZE(inputs);
    if (ufunc->nout != 1 || ufunc->nin != nin || nin + 1 > MAX_ARGS || ufunc->core_enabled) return PyLong_FromLong(-3);
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads < 1 || block < 1) {
        PyErr_SetString(PyExc_ValueError, "run() needs at least 1 thread and a positive block");
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)out_obj;
    npy_intp size = PyArray_SIZE(out);
    if (!PyArray_ISWRITEABLE(out) || !usable(out, size)) return PyLong_FromLong(-2);
    Job job = {0};
    int types[MAX_ARGS];
    job.nargs = (int)nin + 1;
    for (Py_ssize_t i = 0; i < nin; i++) {
        PyObject *a = PyTuple_GET_ITEM(inputs, i);
        if (!PyArray_Check(a)) {
            PyErr_SetString(PyExc_TypeError, "run() takes a tuple of numpy arrays");
            return NULL;
        }
        if (!usable((PyArrayObject *)a, size)) return PyLong_FromLong(-2);
        job.ptr[i] = PyArray_BYTES((PyArrayObject *)a);
        job.itemsize[i] = PyArray_ITEMSIZE((PyArrayObject *)a);
        types[i] = PyArray_TYPE((PyArrayObject *)a);
    }
    job.ptr[nin] = PyArray_BYTES(out);
    job.itemsize[nin] = PyArray_ITEMSIZE(out);
    types[nin] = PyArray_TYPE(out);
    if (!find_loop(ufunc, types, job.nargs, &job.loop, &job.data)) return PyLong_FromLong(-3);
    job.size = size;
    job.block = block;
    job.rounding = fegetround();
    job.nblocks = size / block + (size % block != 0);
    if (job.nblocks > 0xffffffffLL) {
        PyErr_SetString(PyExc_ValueError, "run() needs fewer than 2**32 blocks");
        return NULL;
    }
    int raised;
    if (run_job(&job, threads, &raised) < 0) return NULL;
    if (raised == -1) return PyLong_FromLong(-1);
    if (PyErr_Occurred()) return NULL; /* a loop that raised on this thread (see sharding._PYTHON_API) */
    return PyLong_FromLong(raised);
}


/* ---------------------------------------------------------------- max pooling
 *
 * MaxPool and MaxPoolGrad over NHWC input in one pass over the windows (numpy needs a
 * pass per window tap).  The channels go CN at a time, CN a constant (32, 16, 8 or 4,
 * the largest dividing c) held in 16-byte vectors (GCC/Clang vector extensions: SSE2
 * on every x86-64, NEON on arm64; wider generic vectors than the target's registers
 * are split badly by the compilers), so that a tap is a few compares and selects
 * without branches; other channel counts take a scalar loop.  Tap numbers are as wide
 * as T so that they vectorize with the values.
 *
 * MaxPool: TensorFlow's CPU rule, a running maximum of each window's real (non-padding)
 * taps from the lowest finite value, which only a greater number replaces (NaN and -inf
 * never win; a window of NaN or of padding only gives the lowest value).  MaxPoolGrad: each window's gradient goes to its maximum, the
 * first real tap in row-major order unless a later tap is strictly greater (a nan
 * first tap keeps it; a later nan never wins): TensorFlow's CPU rule, and the rule of
 * nn_kernels._argmax_tap.  When the windows tile the input exactly (``assign``), every
 * tap of a window is written (its gradient or 0); otherwise dx starts at zero and each
 * window adds its gradient at its maximum. */

typedef struct {
    npy_intp n, h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
} Geometry;

/* The taps [*lo, *hi) of a window starting at ``start`` (k taps, d apart) that lie in
 * [0, size): the loops below visit only those, so the work per window is bounded by
 * the input's extent however large the window (a 2**31-tap window of padding around a
 * 1x1 input is one tap). */
static inline void real_taps(npy_intp start, npy_intp k, npy_intp d, npy_intp size, npy_intp *lo, npy_intp *hi) {
    if (d == 1) { /* pooling: no divisions */
        *lo = start >= 0 ? 0 : -start;
        *hi = size - start;
    } else {
        *lo = start >= 0 ? 0 : (-start + d - 1) / d;
        *hi = size - start <= 0 ? 0 : (size - start + d - 1) / d;
    }
    if (*hi > k) *hi = k;
    if (*lo > *hi) *lo = *hi;
}

/* The most real taps any window can have: at most min(k, size) per dimension. */
static npy_intp max_real_taps(const Geometry *g) {
    return (g->kh < g->h ? g->kh : g->h) * (g->kw < g->w ? g->kw : g->w);
}

/* The offsets in x of window (b, oy, ox)'s real taps, row-major; returns how many. */
static inline npy_intp window_offsets(const Geometry *g, npy_intp b, npy_intp oy, npy_intp ox, npy_intp *offs) {
    npy_intp taps = 0;
    /* A window no larger than x has at most h * w taps to test, and this loop compiles to
     * faster kernels than the clamped one below (up to 1.6x for MaxPoolGrad by channel);
     * only a larger window, whose taps may be mostly padding, is clamped. */
    if (g->kh <= g->h && g->kw <= g->w) {
        for (npy_intp i = 0; i < g->kh; i++) {
            npy_intp r = oy * g->sh + i * g->dh - g->pt;
            if (r < 0 || r >= g->h) continue;
            for (npy_intp j = 0; j < g->kw; j++) {
                npy_intp q = ox * g->sw + j * g->dw - g->pl;
                if (q >= 0 && q < g->w) offs[taps++] = ((b * g->h + r) * g->w + q) * g->c;
            }
        }
        return taps;
    }
    npy_intp i0, i1, j0, j1, r0 = oy * g->sh - g->pt, q0 = ox * g->sw - g->pl;
    real_taps(r0, g->kh, g->dh, g->h, &i0, &i1);
    real_taps(q0, g->kw, g->dw, g->w, &j0, &j1);
    for (npy_intp i = i0; i < i1; i++) {
        npy_intp row = (b * g->h + r0 + i * g->dh) * g->w;
        for (npy_intp j = j0; j < j1; j++) offs[taps++] = (row + q0 + j * g->dw) * g->c;
    }
    return taps;
}

#define FOR_EACH_WINDOW(g, offs)                                  \
    for (npy_intp b = 0; b < (g)->n; b++)                         \
        for (npy_intp oy = 0; oy < (g)->oh; oy++)                 \
            for (npy_intp ox = 0; ox < (g)->ow; ox++)             \
                for (npy_intp taps = window_offsets((g), b, oy, ox, (offs)), \
                              out = ((b * (g)->oh + oy) * (g)->ow + ox) * (g)->c, once = 1; \
                     once; once = 0) /* the body sees taps == 0 for a window of padding only */

#define POOL_KERNELS(S, T, IT, LOWEST)                                                                  \
    typedef T S##_vt __attribute__((vector_size(16)));                                                  \
    typedef IT S##_vi __attribute__((vector_size(16)));                                                 \
    enum { S##_VL = 16 / sizeof(T) };                                                                   \
                                                                                                         \
    static inline void S##_load(S##_vt *v, const T *p) { memcpy(v, p, sizeof *v); }                    \
    static inline S##_vt S##_select(S##_vi m, S##_vt a, S##_vt b) {                                     \
        return (S##_vt)(((S##_vi)a & m) | ((S##_vi)b & ~m));                                            \
    }                                                                                                   \
                                                                                                         \
    /* MaxPool, CN channels at a time: TensorFlow's CPU rule, a running max from the lowest    */     \
    /* finite value that only a greater number replaces, so NaN and -inf never win             */     \
    static inline void S##_pool_cn(const T *x, T *y, const Geometry *g, const npy_intp *offs,           \
                                   npy_intp taps, npy_intp c0, int nv) {                                \
        S##_vt best[32 / S##_VL * 2], v;                                                                 \
        for (int u = 0; u < nv; u++) best[u] = (S##_vt){0} + (T)(LOWEST);                               \
        for (npy_intp t = 0; t < taps; t++)                                                             \
            for (int u = 0; u < nv; u++) {                                                              \
                S##_load(&v, x + offs[t] + c0 + u * S##_VL);                                            \
                best[u] = S##_select((S##_vi)(v > best[u]), v, best[u]);                                \
            }                                                                                           \
        memcpy(y + c0, best, (size_t)nv * sizeof best[0]);                                              \
    }                                                                                                   \
                                                                                                         \
    /* MaxPoolGrad, CN channels at a time */                                                            \
    static inline void S##_grad_cn(const T *x, const T *gy, T *dx, const npy_intp *offs, npy_intp taps, \
                                   npy_intp c0, int nv, int assign) {                                   \
        S##_vt best[32 / S##_VL * 2], v, gv;                                                             \
        S##_vi at[32 / S##_VL * 2], m;                                                                   \
        for (int u = 0; u < nv; u++) {                                                                  \
            S##_load(&best[u], x + offs[0] + c0 + u * S##_VL);                                          \
            at[u] = (S##_vi){0};                                                                        \
        }                                                                                               \
        for (IT t = 1; t < (IT)taps; t++)                                                               \
            for (int u = 0; u < nv; u++) {                                                              \
                S##_load(&v, x + offs[t] + c0 + u * S##_VL);                                            \
                m = (S##_vi)(v > best[u]);                                                              \
                best[u] = S##_select(m, v, best[u]);                                                    \
                at[u] = (at[u] & ~m) | (t & m);                                                         \
            }                                                                                           \
        for (int u = 0; u < nv; u++) {                                                                  \
            S##_load(&gv, gy + c0 + u * S##_VL);                                                        \
            gv = gv + (T)0; /* the sum TensorFlow forms: a -0.0 gradient lands as +0.0 */              \
            if (assign)                                                                                 \
                for (IT t = 0; t < (IT)taps; t++) {                                                     \
                    S##_vt out = (S##_vt)((S##_vi)gv & (S##_vi)(at[u] == t));                           \
                    memcpy(dx + offs[t] + c0 + u * S##_VL, &out, sizeof out);                           \
                }                                                                                       \
            else                                                                                        \
                for (int k = 0; k < S##_VL; k++) dx[offs[at[u][k]] + c0 + u * S##_VL + k] += gv[k];     \
        }                                                                                               \
    }                                                                                                   \
                                                                                                         \
    /* The channels a vector loop leaves (c not a multiple of the vector), one at a time */             \
    static inline void S##_pool_1(const T *x, T *y, const npy_intp *offs, npy_intp taps, npy_intp k) {  \
        T best = (T)(LOWEST);                                                                           \
        for (npy_intp t = 0; t < taps; t++) {                                                           \
            T v = x[offs[t] + k];                                                                       \
            best = v > best ? v : best;                                                                 \
        }                                                                                               \
        y[k] = best;                                                                                    \
    }                                                                                                   \
    static inline void S##_grad_1(const T *x, const T *gy, T *dx, const npy_intp *offs, npy_intp taps,  \
                                  npy_intp k, int assign) {                                             \
        T best = x[offs[0] + k];                                                                        \
        npy_intp at = 0;                                                                                \
        for (npy_intp t = 1; t < taps; t++) {                                                           \
            T v = x[offs[t] + k];                                                                       \
            if (v > best) {                                                                             \
                best = v;                                                                               \
                at = t;                                                                                 \
            }                                                                                           \
        }                                                                                               \
        if (assign)                                                                                     \
            for (npy_intp t = 0; t < taps; t++) dx[offs[t] + k] = t == at ? gy[k] + (T)0 : (T)0;       \
        else                                                                                            \
            dx[offs[at] + k] += gy[k];                                                                  \
    }                                                                                                   \
                                                                                                         \
    /* MaxPoolWithArgmax, CN channels at a time: MaxPool's value and MaxPoolGrad's tap */             \
    static inline void S##_argmax_cn(const T *x, T *y, int64_t *arg, const npy_intp *offs, npy_intp taps, \
                                     npy_intp c0, int nv, npy_intp shift) {                             \
        S##_vt top[32 / S##_VL * 2], best[32 / S##_VL * 2], v;                                           \
        S##_vi at[32 / S##_VL * 2], m;                                                                   \
        for (int u = 0; u < nv; u++) {                                                                  \
            S##_load(&best[u], x + offs[0] + c0 + u * S##_VL);                                          \
            top[u] = best[u];                                                                           \
            at[u] = (S##_vi){0};                                                                        \
        }                                                                                               \
        for (IT t = 1; t < (IT)taps; t++)                                                               \
            for (int u = 0; u < nv; u++) {                                                              \
                S##_load(&v, x + offs[t] + c0 + u * S##_VL);                                            \
                top[u] = S##_select((S##_vi)(v > top[u]) | (S##_vi)(v != v), v, top[u]);                \
                m = (S##_vi)(v > best[u]);                                                              \
                best[u] = S##_select(m, v, best[u]);                                                    \
                at[u] = (at[u] & ~m) | (t & m);                                                         \
            }                                                                                           \
        memcpy(y + c0, top, (size_t)nv * sizeof top[0]);                                                \
        for (int u = 0; u < nv; u++)                                                                    \
            for (int k = 0; k < S##_VL; k++)                                                            \
                arg[c0 + u * S##_VL + k] = (int64_t)(offs[at[u][k]] + c0 + u * S##_VL + k - shift);     \
    }                                                                                                   \
    static inline void S##_argmax_1(const T *x, T *y, int64_t *arg, const npy_intp *offs, npy_intp taps,\
                                    npy_intp k, npy_intp shift) {                                       \
        T top = x[offs[0] + k], best = top;                                                             \
        npy_intp at = 0;                                                                                \
        for (npy_intp t = 1; t < taps; t++) {                                                           \
            T v = x[offs[t] + k];                                                                       \
            top = (v > top || v != v) ? v : top;                                                        \
            if (v > best) {                                                                             \
                best = v;                                                                               \
                at = t;                                                                                 \
            }                                                                                           \
        }                                                                                               \
        y[k] = top;                                                                                     \
        arg[k] = (int64_t)(offs[at] + k - shift);                                                       \
    }                                                                                                   \
    static npy_intp S##_max_pool_with_argmax(const T *x, T *y, int64_t *arg, const Geometry *g,         \
                                             npy_intp *offs, int include_batch) {                       \
        npy_intp empty = 0;                                                                             \
        npy_intp c = g->c, cv = c % 4 == 0 ? c : 0;                                                     \
        int nv = c % 32 == 0 ? 32 / S##_VL : c % 16 == 0 ? 16 / S##_VL : c % 8 == 0 ? 8 / S##_VL         \
                                                                         : 4 / S##_VL;                   \
        FOR_EACH_WINDOW(g, offs) {                                                                      \
            if (taps == 0) { /* no real tap to point at: the caller decides (see below) */             \
                empty++;                                                                                \
                continue;                                                                               \
            }                                                                                           \
            npy_intp shift = include_batch ? 0 : b * g->h * g->w * c; /* an index within the image */   \
            for (npy_intp c0 = 0; c0 < cv; c0 += nv * S##_VL) switch (nv) {                             \
                    case 16: S##_argmax_cn(x, y + out, arg + out, offs, taps, c0, 16, shift); break;      \
                    case 8: S##_argmax_cn(x, y + out, arg + out, offs, taps, c0, 8, shift); break;        \
                    case 4: S##_argmax_cn(x, y + out, arg + out, offs, taps, c0, 4, shift); break;        \
                    case 2: S##_argmax_cn(x, y + out, arg + out, offs, taps, c0, 2, shift); break;        \
                    default: S##_argmax_cn(x, y + out, arg + out, offs, taps, c0, 1, shift); break;       \
                }                                                                                       \
            for (npy_intp k = cv; k < c; k++) S##_argmax_1(x, y + out, arg + out, offs, taps, k, shift);\
        }                                                                                               \
        return empty;                                                                                   \
    }                                                                                                   \
                                                                                                         \
    /* The channel blocks: nv vectors per block, nv a constant in each branch */                       \
    static void S##_max_pool(const T *x, T *y, const Geometry *g, npy_intp *offs) {                     \
        npy_intp c = g->c, cv = c % 4 == 0 ? c : 0; /* vectorized channels */                           \
        int nv = c % 32 == 0 ? 32 / S##_VL : c % 16 == 0 ? 16 / S##_VL : c % 8 == 0 ? 8 / S##_VL         \
                                                                         : 4 / S##_VL;                   \
        FOR_EACH_WINDOW(g, offs) {                                                                      \
            if (taps == 0) { /* a window of padding only: the running max's start */                    \
                for (npy_intp k = 0; k < c; k++) y[out + k] = (T)(LOWEST);                              \
                continue;                                                                               \
            }                                                                                           \
            for (npy_intp c0 = 0; c0 < cv; c0 += nv * S##_VL) switch (nv) {                             \
                    case 16: S##_pool_cn(x, y + out, g, offs, taps, c0, 16); break;                      \
                    case 8: S##_pool_cn(x, y + out, g, offs, taps, c0, 8); break;                        \
                    case 4: S##_pool_cn(x, y + out, g, offs, taps, c0, 4); break;                        \
                    case 2: S##_pool_cn(x, y + out, g, offs, taps, c0, 2); break;                        \
                    default: S##_pool_cn(x, y + out, g, offs, taps, c0, 1); break;                       \
                }                                                                                       \
            for (npy_intp k = cv; k < c; k++) S##_pool_1(x, y + out, offs, taps, k);                    \
        }                                                                                               \
    }                                                                                                   \
    static void S##_max_pool_grad(const T *x, const T *dy, T *dx, const Geometry *g, npy_intp *offs,    \
                                  int assign) {                                                         \
        npy_intp c = g->c, cv = c % 4 == 0 ? c : 0;                                                     \
        int nv = c % 32 == 0 ? 32 / S##_VL : c % 16 == 0 ? 16 / S##_VL : c % 8 == 0 ? 8 / S##_VL         \
                                                                         : 4 / S##_VL;                   \
        FOR_EACH_WINDOW(g, offs) {                                                                      \
            if (taps == 0) continue; /* nothing to route: the gradient of padding is dropped */         \
            const T *gy = dy + out;                                                                     \
            for (npy_intp c0 = 0; c0 < cv; c0 += nv * S##_VL) switch (nv) {                             \
                    case 16: S##_grad_cn(x, gy, dx, offs, taps, c0, 16, assign); break;                  \
                    case 8: S##_grad_cn(x, gy, dx, offs, taps, c0, 8, assign); break;                    \
                    case 4: S##_grad_cn(x, gy, dx, offs, taps, c0, 4, assign); break;                    \
                    case 2: S##_grad_cn(x, gy, dx, offs, taps, c0, 2, assign); break;                    \
                    default: S##_grad_cn(x, gy, dx, offs, taps, c0, 1, assign); break;                   \
                }                                                                                       \
            for (npy_intp k = cv; k < c; k++) S##_grad_1(x, gy, dx, offs, taps, k, assign);             \
        }                                                                                               \
    }

POOL_KERNELS(f32, float, int32_t, -FLT_MAX)
POOL_KERNELS(f64, double, int64_t, -DBL_MAX)

/* Whether every one of ``count`` window parameters lies in [0, 2**31): with them, no
 * index arithmetic below (a stride times an output position, a dilation times a tap)
 * can overflow. */
static int window_in_range(const npy_intp *v, int count) {
    for (int i = 0; i < count; i++)
        if (v[i] < 0 || v[i] > INT32_MAX) return 0;
    return 1;
}

/* Check ``arrays`` (rank 4, C-contiguous, aligned, native, all float32 or all float64)
 * and fill ``g`` from x (arrays[0]), the output-shaped arrays[1] and the window
 * parameters; returns the dtype's number, or -1 with an exception set. */
static int pool_arguments(const char *fn, PyArrayObject **arrays, int count, const npy_intp *window, Geometry *g) {
    int t = PyArray_TYPE(arrays[0]);
    for (int i = 0; i < count; i++) {
        PyArrayObject *a = arrays[i];
        if (PyArray_NDIM(a) != 4 || PyArray_TYPE(a) != t || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) ||
            !PyArray_ISNOTSWAPPED(a) || (t != NPY_FLOAT32 && t != NPY_FLOAT64)) {
            PyErr_Format(PyExc_TypeError, "%s() takes rank-4 C-contiguous float32 or float64 arrays of one dtype", fn);
            return -1;
        }
    }
    const npy_intp *xs = PyArray_DIMS(arrays[0]), *ys = PyArray_DIMS(arrays[1]);
    *g = (Geometry){xs[0], xs[1], xs[2], xs[3], ys[1], ys[2], window[0], window[1], window[2], window[3],
                    window[4], window[5], window[6], window[7]};
    int ok = ys[0] == xs[0] && ys[3] == xs[3] && window_in_range(window, 8) && max_real_taps(g) <= INT32_MAX &&
             g->oh <= INT32_MAX && g->ow <= INT32_MAX;
    for (int i = 0; i < 6; i++) ok &= window[i] > 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s(): the output must be (n, oh, ow, c) of x's n and c, the window positive "
                                       "and below 2**31", fn);
        return -1;
    }
    /* r and q are checked against h and w tap by tap: any geometry stays inside x */
    return t;
}

PyDoc_STRVAR(max_pool_doc,
"max_pool(x, y, geometry) -> None\n\n"
"Write into ``y`` (n, oh, ow, c) the maximum of each window of ``x`` (n, h, w, c),\n"
"from the lowest finite value, which NaN and -inf never replace (TensorFlow's CPU rule).\n``geometry`` is "
"(kh, kw, sh, sw, dh, dw, pad_top, pad_left); taps outside x are padding.  The arrays\n"
"are C-contiguous and aligned, all float32 or all float64.");

static PyObject *max_pool(PyObject *self, PyObject *args) {
    PyArrayObject *a[2];
    npy_intp win[8];
    Geometry g;
    if (!PyArg_ParseTuple(args, "O!O!(nnnnnnnn)", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &win[0], &win[1],
                          &win[2], &win[3], &win[4], &win[5], &win[6], &win[7]))
        return NULL;
    int t = pool_arguments("max_pool", a, 2, win, &g);
    if (t < 0) return NULL;
    if (!PyArray_ISWRITEABLE(a[1])) {
        PyErr_SetString(PyExc_ValueError, "max_pool(): y must be writeable");
        return NULL;
    }
    npy_intp *offs = PyMem_RawMalloc((size_t)(max_real_taps(&g) + 1) * sizeof(npy_intp));
    if (offs == NULL) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT32)
        f32_max_pool((const float *)PyArray_DATA(a[0]), (float *)PyArray_DATA(a[1]), &g, offs);
    else
        f64_max_pool((const double *)PyArray_DATA(a[0]), (double *)PyArray_DATA(a[1]), &g, offs);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(offs);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(max_pool_with_argmax_doc,
"max_pool_with_argmax(x, y, argmax, geometry, include_batch) -> int\n\n"
"max_pool's ``y`` and, in the int64 ``argmax`` (y's shape), the flat index in x of each\n"
"window's maximum by MaxPoolGrad's rule (within its image unless ``include_batch``).\n"
"Returns how many windows lie wholly in the padding: they are left unwritten.");

static PyObject *max_pool_with_argmax(PyObject *self, PyObject *args) {
    PyArrayObject *a[3];
    npy_intp win[8];
    int include_batch;
    Geometry g;
    if (!PyArg_ParseTuple(args, "O!O!O!(nnnnnnnn)p", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &PyArray_Type, &a[2],
                          &win[0], &win[1], &win[2], &win[3], &win[4], &win[5], &win[6], &win[7], &include_batch))
        return NULL;
    int t = pool_arguments("max_pool_with_argmax", a, 2, win, &g);
    if (t < 0) return NULL;
    PyArrayObject *arg = a[2];
    int ok = PyArray_ISWRITEABLE(a[1]) && PyArray_ISWRITEABLE(arg) && PyArray_TYPE(arg) == NPY_INT64 &&
             PyArray_NDIM(arg) == 4 && PyArray_IS_C_CONTIGUOUS(arg) && PyArray_ISALIGNED(arg) &&
             PyArray_ISNOTSWAPPED(arg);
    for (int i = 0; ok && i < 4; i++) ok &= PyArray_DIMS(arg)[i] == PyArray_DIMS(a[1])[i];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "max_pool_with_argmax(): y and argmax must be writeable, argmax a "
                                          "C-contiguous int64 array of y's shape");
        return NULL;
    }
    npy_intp *offs = PyMem_RawMalloc((size_t)(max_real_taps(&g) + 1) * sizeof(npy_intp));
    if (offs == NULL) return PyErr_NoMemory();
    npy_intp empty;
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT32)
        empty = f32_max_pool_with_argmax((const float *)PyArray_DATA(a[0]), (float *)PyArray_DATA(a[1]),
                                         (int64_t *)PyArray_DATA(arg), &g, offs, include_batch);
    else
        empty = f64_max_pool_with_argmax((const double *)PyArray_DATA(a[0]), (double *)PyArray_DATA(a[1]),
                                         (int64_t *)PyArray_DATA(arg), &g, offs, include_batch);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(offs);
    return PyLong_FromSsize_t(empty);
}

PyDoc_STRVAR(max_pool_grad_doc,
"max_pool_grad(x, dy, dx, geometry, assign) -> None\n\n"
"Route each window's gradient ``dy`` (n, oh, ow, c) to the window's maximum of ``x``\n"
"(n, h, w, c), in ``dx`` (x's shape).  ``geometry`` is as max_pool's.  With ``assign``\n"
"false, dx must hold zeros and the gradients are added; with it true the windows must\n"
"tile x exactly (stride = size, no padding or dilation, oh * kh = h, ow * kw = w) and\n"
"every element of dx is written.");

static PyObject *max_pool_grad(PyObject *self, PyObject *args) {
    PyArrayObject *a[3];
    npy_intp win[8];
    int assign;
    Geometry g;
    if (!PyArg_ParseTuple(args, "O!O!O!(nnnnnnnn)p", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &PyArray_Type, &a[2],
                          &win[0], &win[1], &win[2], &win[3], &win[4], &win[5], &win[6], &win[7], &assign))
        return NULL;
    int t = pool_arguments("max_pool_grad", a, 3, win, &g);
    if (t < 0) return NULL;
    int ok = PyArray_ISWRITEABLE(a[2]);
    for (int i = 0; i < 4; i++) ok &= PyArray_DIMS(a[2])[i] == PyArray_DIMS(a[0])[i];
    if (assign)
        ok &= g.sh == g.kh && g.sw == g.kw && g.dh == 1 && g.dw == 1 && g.pt == 0 && g.pl == 0 && g.oh * g.kh == g.h &&
              g.ow * g.kw == g.w;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "max_pool_grad(): dx must be writeable and of x's shape, and with assign "
                                          "the windows must tile x");
        return NULL;
    }
    npy_intp *offs = PyMem_RawMalloc((size_t)(max_real_taps(&g) + 1) * sizeof(npy_intp));
    if (offs == NULL) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT32)
        f32_max_pool_grad((const float *)PyArray_DATA(a[0]), (const float *)PyArray_DATA(a[1]),
                          (float *)PyArray_DATA(a[2]), &g, offs, assign);
    else
        f64_max_pool_grad((const double *)PyArray_DATA(a[0]), (const double *)PyArray_DATA(a[1]),
                          (double *)PyArray_DATA(a[2]), &g, offs, assign);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(offs);
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- im2col
 *
 * The rows of a convolution's GEMM: row (b, oy, ox) holds window (b, oy, ox) of the
 * NHWC input, tap after tap, each tap's c channels, zeros for padding.  numpy copies
 * the strided window view a channel run at a time (c elements: one with one channel);
 * here the taps of a window row that lie in x are one copy (with dilation 1 they are
 * contiguous), for any dtype (the copy moves bytes). */

/* memcpy with the small sizes of one or a few taps' channels inlined */
static inline void copy_run(char *dst, const char *src, size_t bytes) {
    switch (bytes) {
        case 4: memcpy(dst, src, 4); break;
        case 8: memcpy(dst, src, 8); break;
        case 12: memcpy(dst, src, 12); break;
        case 16: memcpy(dst, src, 16); break;
        case 24: memcpy(dst, src, 24); break;
        case 32: memcpy(dst, src, 32); break;
        default: memcpy(dst, src, bytes);
    }
}

/* ``count`` copies of ``bytes``, the k-th from src + k * sstride to dst + k * dstride:
 * a constant size in the common cases, so each copy is a move or two, not a call. */
#define COPY_SPANS_CASE(N) \
    case N: for (npy_intp k = 0; k < count; k++) memcpy(dst + k * dstride, src + k * sstride, N); break;
static inline void copy_spans(char *dst, npy_intp dstride, const char *src, npy_intp sstride, npy_intp count,
                              size_t bytes) {
    switch (bytes) {
        COPY_SPANS_CASE(4)
        COPY_SPANS_CASE(8)
        COPY_SPANS_CASE(12)
        COPY_SPANS_CASE(16)
        COPY_SPANS_CASE(20)
        COPY_SPANS_CASE(24)
        COPY_SPANS_CASE(28)
        COPY_SPANS_CASE(32)
        COPY_SPANS_CASE(36)
        COPY_SPANS_CASE(48)
        COPY_SPANS_CASE(64)
        default: for (npy_intp k = 0; k < count; k++) memcpy(dst + k * dstride, src + k * sstride, bytes);
    }
}

/* Window (b, oy, ox)'s kernel row i, taps j0 <= j < j1 inside x, the rest zeros. */
static inline void im2col_piece(const char *src_row, char *dst, const Geometry *g, npy_intp ox, npy_intp tap) {
    npy_intp q0 = ox * g->sw - g->pl; /* the column of tap j: q0 + j * dw */
    npy_intp j0, j1;
    if (g->dw == 1) { /* no divisions: they would cost more than a small window's copy */
        j0 = q0 >= 0 ? 0 : -q0;
        j1 = g->w - q0;
    } else {
        j0 = q0 >= 0 ? 0 : (-q0 + g->dw - 1) / g->dw;
        j1 = g->w - q0 <= 0 ? 0 : (g->w - q0 + g->dw - 1) / g->dw;
    }
    if (j1 < 0) j1 = 0;
    if (j1 > g->kw) j1 = g->kw;
    if (j0 > j1) j0 = j1;
    if (j0 > 0) memset(dst, 0, (size_t)(j0 * tap));
    const char *src = src_row + (q0 + j0 * g->dw) * tap;
    if (g->dw == 1)
        copy_run(dst + j0 * tap, src, (size_t)((j1 - j0) * tap));
    else
        for (npy_intp j = j0; j < j1; j++) copy_run(dst + j * tap, src + (j - j0) * g->dw * tap, (size_t)tap);
    if (j1 < g->kw) memset(dst + j1 * tap, 0, (size_t)((g->kw - j1) * tap));
}

/* By kernel row: for each (b, oy, i) the windows whose row i lies wholly inside x
 * (with dilation 1: one span of kw taps each) are copied in one tight loop; the
 * windows at the edges, and every dilated one, piece by piece. */
static void im2col_rows(const char *x, char *cols, const Geometry *g, npy_intp item) {
    npy_intp tap = g->c * item, row = g->kh * g->kw * tap, span = g->kw * tap;
    /* windows lo <= ox < hi have every column in x: q0 >= 0 and q0 + (kw - 1) dw < w */
    npy_intp lo = (g->pl + g->sw - 1) / g->sw, last = g->w - 1 - (g->kw - 1) * g->dw + g->pl;
    npy_intp hi = last < 0 ? 0 : last / g->sw + 1;
    if (hi > g->ow) hi = g->ow;
    if (lo > hi) lo = hi;
    if (g->dw != 1) lo = hi = 0;
    for (npy_intp b = 0; b < g->n; b++)
        for (npy_intp oy = 0; oy < g->oh; oy++) {
            char *first = cols + (b * g->oh + oy) * g->ow * row;
            for (npy_intp i = 0; i < g->kh; i++) {
                char *dst = first + i * span;
                npy_intp r = oy * g->sh + i * g->dh - g->pt;
                if (r < 0 || r >= g->h) {
                    for (npy_intp ox = 0; ox < g->ow; ox++) memset(dst + ox * row, 0, (size_t)span);
                    continue;
                }
                const char *src_row = x + (b * g->h + r) * g->w * tap;
                for (npy_intp ox = 0; ox < lo; ox++) im2col_piece(src_row, dst + ox * row, g, ox, tap);
                copy_spans(dst + lo * row, row, src_row + (lo * g->sw - g->pl) * tap, g->sw * tap, hi - lo,
                           (size_t)span);
                for (npy_intp ox = hi; ox < g->ow; ox++) im2col_piece(src_row, dst + ox * row, g, ox, tap);
            }
        }
}

PyDoc_STRVAR(im2col_doc,
"im2col(x, cols, geometry) -> None\n\n"
"Write into ``cols`` (n * oh * ow, kh * kw * c) each window of the NHWC array ``x`` (n,\n"
"h, w, c), taps row-major, zeros for padding.  ``geometry`` is (kh, kw, sh, sw, dh, dw,\n"
"pad_top, pad_left, oh, ow).  Both arrays C-contiguous and aligned, of one dtype.");

/* The geometry of im2col and col2im from the NHWC ``image`` (x or dx), ``cols`` and the
 * parameters ``v`` (kh, kw, sh, sw, dh, dw, pad_top, pad_left, oh, ow): 0, or -1 with a
 * ValueError when cols is not (n * oh * ow, kh * kw * c) or a parameter is out of range. */
static int cols_geometry(const char *fn, PyArrayObject *image, PyArrayObject *cols, const npy_intp *v, Geometry *g) {
    const npy_intp *xs = PyArray_DIMS(image), *cs = PyArray_DIMS(cols);
    *g = (Geometry){xs[0], xs[1], xs[2], xs[3], v[8], v[9], v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    npy_intp rows, width;
    int ok = window_in_range(v, 10) && !__builtin_mul_overflow(g->n, g->oh, &rows) &&
             !__builtin_mul_overflow(rows, g->ow, &rows) && !__builtin_mul_overflow(g->kh * g->kw, g->c, &width) &&
             cs[0] == rows && cs[1] == width;
    for (int i = 0; i < 6; i++) ok &= v[i] > 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s(): cols must be (n * oh * ow, kh * kw * c); the window positive, the "
                                       "padding and output sizes not negative, all below 2**31", fn);
        return -1;
    }
    return 0;
}

static PyObject *im2col(PyObject *self, PyObject *args) {
    PyArrayObject *x, *cols;
    npy_intp v[10];
    if (!PyArg_ParseTuple(args, "O!O!(nnnnnnnnnn)", &PyArray_Type, &x, &PyArray_Type, &cols, &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]))
        return NULL;
    if (PyArray_NDIM(x) != 4 || PyArray_NDIM(cols) != 2 || !PyArray_EquivTypes(PyArray_DESCR(x), PyArray_DESCR(cols)) ||
        !PyArray_IS_C_CONTIGUOUS(x) || !PyArray_IS_C_CONTIGUOUS(cols) || !PyArray_ISALIGNED(x) ||
        !PyArray_ISALIGNED(cols) || PyDataType_REFCHK(PyArray_DESCR(x))) {
        PyErr_SetString(PyExc_TypeError, "im2col() takes a rank-4 x and a rank-2 cols, C-contiguous, of one plain dtype");
        return NULL;
    }
    Geometry g;
    if (cols_geometry("im2col", x, cols, v, &g) < 0) return NULL;
    if (!PyArray_ISWRITEABLE(cols)) {
        PyErr_SetString(PyExc_ValueError, "im2col(): cols must be writeable");
        return NULL;
    }
    npy_intp item = PyArray_ITEMSIZE(x);
    Py_BEGIN_ALLOW_THREADS
    im2col_rows(PyArray_BYTES(x), PyArray_BYTES(cols), &g, item);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- col2im
 *
 * The reverse of im2col, for an input gradient: each row of ``cols`` (one window's taps,
 * as im2col lays them out) is added into the window's positions of dx, padding dropped.
 * Windows go in row-major order, so an element several windows share sums their taps in
 * that order. */

#define COL2IM_KERNEL(S, T)                                                                              \
    static void S##_col2im(const T *cols, T *dx, const Geometry *g) {                                   \
        npy_intp c = g->c, row = g->kh * g->kw * c;                                                     \
        for (npy_intp b = 0; b < g->n; b++)                                                             \
            for (npy_intp oy = 0; oy < g->oh; oy++)                                                     \
                for (npy_intp ox = 0; ox < g->ow; ox++) {                                               \
                    const T *src = cols + ((b * g->oh + oy) * g->ow + ox) * row;                         \
                    for (npy_intp i = 0; i < g->kh; i++) {                                              \
                        npy_intp r = oy * g->sh + i * g->dh - g->pt;                                    \
                        if (r < 0 || r >= g->h) continue;                                               \
                        for (npy_intp j = 0; j < g->kw; j++) {                                          \
                            npy_intp q = ox * g->sw + j * g->dw - g->pl;                                \
                            if (q < 0 || q >= g->w) continue;                                           \
                            T *d = dx + ((b * g->h + r) * g->w + q) * c;                                \
                            const T *t = src + (i * g->kw + j) * c;                                     \
                            for (npy_intp k = 0; k < c; k++) d[k] += t[k];                              \
                        }                                                                               \
                    }                                                                                   \
                }                                                                                       \
    }

COL2IM_KERNEL(f32, float)
COL2IM_KERNEL(f64, double)

PyDoc_STRVAR(col2im_doc,
"col2im(cols, dx, geometry) -> None\n\n"
"Add each row of ``cols`` (n * oh * ow, kh * kw * c), one window's taps as im2col lays\n"
"them out, into the window's positions of the NHWC ``dx`` (n, h, w, c); taps in the\n"
"padding are dropped.  ``geometry`` is im2col's.  Both C-contiguous and aligned, float32\n"
"or float64.");

static PyObject *col2im(PyObject *self, PyObject *args) {
    PyArrayObject *cols, *dx;
    npy_intp v[10];
    if (!PyArg_ParseTuple(args, "O!O!(nnnnnnnnnn)", &PyArray_Type, &cols, &PyArray_Type, &dx, &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]))
        return NULL;
    int t = PyArray_TYPE(dx);
    if (PyArray_NDIM(dx) != 4 || PyArray_NDIM(cols) != 2 || PyArray_TYPE(cols) != t || !PyArray_IS_C_CONTIGUOUS(dx) ||
        !PyArray_IS_C_CONTIGUOUS(cols) || !PyArray_ISALIGNED(dx) || !PyArray_ISALIGNED(cols) ||
        !PyArray_ISNOTSWAPPED(dx) || !PyArray_ISNOTSWAPPED(cols) || (t != NPY_FLOAT32 && t != NPY_FLOAT64)) {
        PyErr_SetString(PyExc_TypeError, "col2im() takes a rank-2 cols and a rank-4 dx, C-contiguous float32 or float64");
        return NULL;
    }
    Geometry g;
    if (cols_geometry("col2im", dx, cols, v, &g) < 0) return NULL;
    if (!PyArray_ISWRITEABLE(dx)) {
        PyErr_SetString(PyExc_ValueError, "col2im(): dx must be writeable");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT32)
        f32_col2im((const float *)PyArray_DATA(cols), (float *)PyArray_DATA(dx), &g);
    else
        f64_col2im((const double *)PyArray_DATA(cols), (double *)PyArray_DATA(dx), &g);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- ReluGrad
 *
 * gradients * (features > 0) in one pass (numpy: a boolean temporary, then a product
 * that casts it).  A product, not a select, as the numpy path: a nan gradient stays nan
 * where the feature is not positive, as in TensorFlow. */

#define RELU_GRAD_KERNEL(S, T)                                                                  \
    static void S##_relu_grad(const T *restrict g, const T *restrict x, T *restrict out, npy_intp n) { \
        for (npy_intp i = 0; i < n; i++) out[i] = g[i] * (T)(x[i] > 0);                         \
    }

RELU_GRAD_KERNEL(f32, float)
RELU_GRAD_KERNEL(f64, double)

PyDoc_STRVAR(relu_grad_doc,
"relu_grad(gradients, features, out) -> None\n\n"
"Write ``gradients * (features > 0)`` into ``out``: three C-contiguous, aligned arrays of\n"
"one size, all float32 or all float64.");

static PyObject *relu_grad(PyObject *self, PyObject *args) {
    PyArrayObject *a[3];
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &PyArray_Type, &a[2]))
        return NULL;
    int t = PyArray_TYPE(a[2]);
    npy_intp n = PyArray_SIZE(a[2]);
    for (int i = 0; i < 3; i++)
        if (PyArray_TYPE(a[i]) != t || PyArray_SIZE(a[i]) != n || !PyArray_IS_C_CONTIGUOUS(a[i]) ||
            !PyArray_ISALIGNED(a[i]) || !PyArray_ISNOTSWAPPED(a[i]) || (t != NPY_FLOAT32 && t != NPY_FLOAT64)) {
            PyErr_SetString(PyExc_TypeError, "relu_grad() takes three C-contiguous float32 or float64 arrays of one size");
            return NULL;
        }
    if (!PyArray_ISWRITEABLE(a[2])) {
        PyErr_SetString(PyExc_ValueError, "relu_grad(): out must be writeable");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT32)
        f32_relu_grad((const float *)PyArray_DATA(a[0]), (const float *)PyArray_DATA(a[1]), (float *)PyArray_DATA(a[2]), n);
    else
        f64_relu_grad((const double *)PyArray_DATA(a[0]), (const double *)PyArray_DATA(a[1]),
                      (double *)PyArray_DATA(a[2]), n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}


/* ---------------------------------------------------------------- segment sums
 *
 * ``segment_sum(data, ids, out)``: out[ids[i]] += data[i] for each row i in order, rows
 * whose id is negative skipped: what ``np.add.at(out, ids, data)`` computes, the same
 * additions in the same order (so the same bits), without its per-row indexing machinery
 * (UnsortedSegmentSum of an embedding's gradient, [2048, 64] rows into 96: 1.6 ms with
 * np.add.at).  The caller checks the ids against out's rows; an id past them makes the
 * call return -2 before anything is added. */

static int norm_array_ok(PyArrayObject *a, int type, int writeable); /* (layer normalization, below) */

#define SEGMENT_SUM(NAME, T)                                                                       \
static void NAME(const T *restrict data, const npy_intp *restrict ids, T *restrict out, npy_intp rows,   \
                 npy_intp inner) {                                                                 \
    for (npy_intp i = 0; i < rows; i++) {                                                          \
        if (ids[i] < 0) continue;                                                                  \
        T *restrict o = out + ids[i] * inner;                                                      \
        const T *restrict d = data + i * inner;                                                    \
        for (npy_intp j = 0; j < inner; j++) o[j] += d[j];                                         \
    }                                                                                              \
}
SEGMENT_SUM(segment_sum_f32, float)
SEGMENT_SUM(segment_sum_f64, double)

PyDoc_STRVAR(segment_sum_doc,
"segment_sum(data, ids, out) -> int\n\n"
"out[ids[i]] += data[i] for each row i of ``data`` ([rows, inner], C-contiguous float32 or\n"
"float64) in order, negative ids skipped (np.add.at's sums, bit for bit).  ``ids``: int32 or\n"
"int64, C-contiguous, ``rows`` of them; ``out``: [segments, inner], data's type, writeable.\n"
"Returns 0, or -2 when the arrays are not as described or an id is >= segments (nothing added).");

static PyObject *segment_sum(PyObject *self, PyObject *args) {
    PyArrayObject *data, *ids, *out;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyArray_Type, &data, &PyArray_Type, &ids, &PyArray_Type, &out))
        return NULL;
    int t = PyArray_TYPE(data), it = PyArray_TYPE(ids);
    if ((t != NPY_FLOAT && t != NPY_DOUBLE) || (it != NPY_INT32 && it != NPY_INT64) || PyArray_NDIM(data) != 2 ||
        PyArray_NDIM(out) != 2 || PyArray_TYPE(out) != t || !norm_array_ok(data, t, 0) || !norm_array_ok(out, t, 1) ||
        !norm_array_ok(ids, it, 0) || PyArray_SIZE(ids) != PyArray_DIM(data, 0) ||
        PyArray_DIM(out, 1) != PyArray_DIM(data, 1))
        return PyLong_FromLong(-2);
    npy_intp rows = PyArray_DIM(data, 0), inner = PyArray_DIM(data, 1), segments = PyArray_DIM(out, 0);
    /* The ids are read once into a checked copy, which alone is used as an index: the
     * caller's array may be changed by another thread while the GIL is released. */
    npy_intp *copy = PyMem_RawMalloc((size_t)(rows + 1) * sizeof(npy_intp));
    if (copy == NULL) return PyErr_NoMemory();
    int fits = 1;
    Py_BEGIN_ALLOW_THREADS
    for (npy_intp i = 0; i < rows; i++) {
        npy_intp id = it == NPY_INT32 ? (npy_intp)((const volatile int32_t *)PyArray_DATA(ids))[i]
                                      : (npy_intp)((const volatile int64_t *)PyArray_DATA(ids))[i];
        if (id >= segments) {
            fits = 0;
            break;
        }
        copy[i] = id;
    }
    if (fits && t == NPY_FLOAT) segment_sum_f32(PyArray_DATA(data), copy, PyArray_DATA(out), rows, inner);
    else if (fits) segment_sum_f64(PyArray_DATA(data), copy, PyArray_DATA(out), rows, inner);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(copy);
    if (!fits) return PyLong_FromLong(-2);
    return PyLong_FromLong(0);
}

/* ---------------------------------------------------------------- Adam
 *
 * ``adam(var, m, v, grad, lr_t, c1, c2, beta1, eps, nesterov)``: ApplyAdam's update in one
 * pass, with the numpy path's operations in its order and in the arrays' precision, so the
 * same bits: m' = (g - m) * c1 + m, v' = (g * g - v) * c2 + v (c1 = 1 - beta1, c2 = 1 - beta2,
 * computed by the caller in the arrays' type), var -= lr_t * d / (sqrt(v') + eps), d = m'
 * or, with Nesterov, m' * beta1 + g * c1.  The numpy path makes a dozen passes and as many
 * temporary arrays: 30 of its calls took 1.4-2 ms of a transformer's training step.  No
 * fused multiply-add (fp-contract off), as in numpy's loops; sqrt and division are
 * correctly rounded at every vector width.  The four arrays must not overlap (the caller
 * takes the numpy path for the same array passed twice). */

#define ADAM_LOOP(T, SQRT, D)                                                                          \
    for (; i < n; i++) {                                                                               \
        T g = grad[i], mi = m[i], vi = v[i];                                                           \
        T nm = (g - mi) * c1;                                                                          \
        nm += mi;                                                                                      \
        T nv = (g * g - vi) * c2;                                                                      \
        nv += vi;                                                                                      \
        T step = lr_t * (D) / (SQRT(nv) + eps);                                                        \
        m[i] = nm;                                                                                     \
        v[i] = nv;                                                                                     \
        var[i] -= step;                                                                                \
    }

/* x86-64: SSE2 vectors (every x86-64 has them), whose sqrt and division GCC will not emit
 * for sqrtf/sqrt while errno may be set (a scalar call per element: 3.6 ns an element). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#define ADAM_SSE(PS, VT, W, D)                                                                          \
    {                                                                                                  \
        VT C1 = _mm_set1_##PS(c1), C2 = _mm_set1_##PS(c2), LR = _mm_set1_##PS(lr_t), EPS = _mm_set1_##PS(eps), \
           B1 = _mm_set1_##PS(beta1);                                                                  \
        (void)B1;                                                                                      \
        for (; i + W <= n; i += W) {                                                                   \
            VT g = _mm_loadu_##PS(grad + i), mi = _mm_loadu_##PS(m + i), vi = _mm_loadu_##PS(v + i);   \
            VT nm = _mm_add_##PS(_mm_mul_##PS(_mm_sub_##PS(g, mi), C1), mi);                           \
            VT nv = _mm_add_##PS(_mm_mul_##PS(_mm_sub_##PS(_mm_mul_##PS(g, g), vi), C2), vi);          \
            VT step = _mm_div_##PS(_mm_mul_##PS(LR, D), _mm_add_##PS(_mm_sqrt_##PS(nv), EPS));         \
            _mm_storeu_##PS(m + i, nm);                                                                \
            _mm_storeu_##PS(v + i, nv);                                                                \
            _mm_storeu_##PS(var + i, _mm_sub_##PS(_mm_loadu_##PS(var + i), step));                    \
        }                                                                                              \
    }
#define ADAM_NESTEROV_SSE(PS) _mm_add_##PS(_mm_mul_##PS(nm, B1), _mm_mul_##PS(g, C1))
#else
#define ADAM_SSE(PS, VT, W, D)
#endif

#define ADAM_KERNEL(NAME, T, SQRT, PS, VT, W)                                                          \
__attribute__((optimize("fp-contract=off")))                                                           \
static void NAME(T *restrict var, T *restrict m, T *restrict v, const T *restrict grad, npy_intp n,    \
                 T lr_t, T c1, T c2, T beta1, T eps, int nesterov) {                                   \
    npy_intp i = 0;                                                                                    \
    if (nesterov) {                                                                                    \
        ADAM_SSE(PS, VT, W, ADAM_NESTEROV_SSE(PS))                                                     \
        ADAM_LOOP(T, SQRT, nm * beta1 + g * c1)                                                        \
    } else {                                                                                           \
        ADAM_SSE(PS, VT, W, nm)                                                                        \
        ADAM_LOOP(T, SQRT, nm)                                                                         \
    }                                                                                                  \
}
ADAM_KERNEL(adam_f32, float, sqrtf, ps, __m128, 4)
ADAM_KERNEL(adam_f64, double, sqrt, pd, __m128d, 2)

PyDoc_STRVAR(adam_doc,
"adam(var, m, v, grad, lr_t, c1, c2, beta1, eps, nesterov) -> int\n\n"
"ApplyAdam's update of ``var``, ``m`` and ``v`` in place from ``grad`` (four C-contiguous\n"
"arrays of one size, all float32 or all float64; the first three writeable), with the\n"
"scalars given as Python floats holding values of the arrays' type.  Returns 0, or -2\n"
"when the arrays are not as described or two of them overlap (nothing written).");

static PyObject *adam(PyObject *self, PyObject *args) {
    PyArrayObject *a[4];
    double lr_t, c1, c2, beta1, eps;
    int nesterov;
    if (!PyArg_ParseTuple(args, "O!O!O!O!dddddp", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &PyArray_Type, &a[2],
                          &PyArray_Type, &a[3], &lr_t, &c1, &c2, &beta1, &eps, &nesterov))
        return NULL;
    int t = PyArray_TYPE(a[0]);
    npy_intp n = PyArray_SIZE(a[0]);
    if (t != NPY_FLOAT && t != NPY_DOUBLE) return PyLong_FromLong(-2);
    for (int i = 0; i < 4; i++)
        if (!norm_array_ok(a[i], t, i < 3) || PyArray_SIZE(a[i]) != n) return PyLong_FromLong(-2);
    npy_intp bytes = n * (npy_intp)PyArray_ITEMSIZE(a[0]);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) {
            char *p = PyArray_DATA(a[i]), *q = PyArray_DATA(a[j]);
            if (p < q + bytes && q < p + bytes) return PyLong_FromLong(-2);
        }
    Py_BEGIN_ALLOW_THREADS
    if (t == NPY_FLOAT)
        adam_f32(PyArray_DATA(a[0]), PyArray_DATA(a[1]), PyArray_DATA(a[2]), PyArray_DATA(a[3]), n, (float)lr_t,
                 (float)c1, (float)c2, (float)beta1, (float)eps, nesterov);
    else
        adam_f64(PyArray_DATA(a[0]), PyArray_DATA(a[1]), PyArray_DATA(a[2]), PyArray_DATA(a[3]), n, lr_t, c1, c2,
                 beta1, eps, nesterov);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(0);
}

/* ---------------------------------------------------------------- sparse softmax cross-entropy
 *
 * Per row of logits: loss = log(sum(exp(x - max))) - (x[label] - max), and the gradient
 * softmax - one_hot(label), the numpy path's operations in its order, in one
 * pass per row instead of a dozen numpy calls over the batch.  float64: exp and log are
 * the C library's (numpy's own SIMD loops may round the last bit differently); float32
 * below, with the row kernels' vectorized exp. */

#define XENT_KERNEL(S, T, EXP, LOG)                                                                      \
    static void S##_sparse_xent(const T *x, const npy_intp *labels, T *loss, T *grad, npy_intp batch,   \
                                npy_intp classes) {                                                     \
        for (npy_intp b = 0; b < batch; b++) {                                                          \
            const T *row = x + b * classes;                                                             \
            T *g = grad + b * classes;                                                                  \
            npy_intp label = labels[b];                                                                 \
            T top = row[0];                                                                             \
            for (npy_intp k = 1; k < classes; k++) top = (row[k] > top || row[k] != row[k]) ? row[k] : top; \
            T total = 0;                                                                                \
            for (npy_intp k = 0; k < classes; k++) total += g[k] = EXP(row[k] - top);                   \
            loss[b] = LOG(total) - (row[label] - top);                                                  \
            for (npy_intp k = 0; k < classes; k++) g[k] = g[k] / total;                                 \
            g[label] -= 1;                                                                              \
        }                                                                                               \
    }

XENT_KERNEL(f64, double, exp, log)

/* float32: the row kernels' vectorized pieces (below): the maximum, exp of x - max by the
 * Cephes expf (within 2.5 ulp; 0 where it would be subnormal, as in Softmax), the sum in
 * lanes; the C library's logf.  A [2048, 96] batch in about a fifth of the scalar expf
 * loop's time.  NaN and +-inf rows give NaN as before (x - max is NaN there). */
static void f32_sparse_xent(const float *x, const npy_intp *labels, float *loss, float *grad, npy_intp batch,
                            npy_intp classes);

/* Copy the labels into ``to``, each read once, and check the copy: the caller's array
 * may be changed by another thread while the GIL is released, so only the checked copy
 * is ever used as an index.  Returns the first row whose label lies outside
 * [0, classes), with its label in ``*bad``, or -1. */
static npy_intp checked_labels(const void *labels, int wide, npy_intp batch, npy_intp classes, npy_intp *to,
                               npy_intp *bad) {
    for (npy_intp b = 0; b < batch; b++) {
        /* volatile: one load per label, which the compiler may not repeat after the check */
        npy_intp label = wide ? (npy_intp)((const volatile int64_t *)labels)[b] : (npy_intp)((const volatile int32_t *)labels)[b];
        if (label < 0 || label >= classes) {
            *bad = label;
            return b;
        }
        to[b] = label;
    }
    return -1;
}

PyDoc_STRVAR(sparse_xent_doc,
"sparse_xent(features, labels, loss, grad) -> tuple[int, int] | None\n\n"
"For logits ``features`` (batch, classes) and int32 or int64 ``labels`` (batch,), write\n"
"each row's softmax cross-entropy into ``loss`` (batch,) and softmax - one_hot into\n"
"``grad`` (batch, classes); float32 or float64, C-contiguous.  Returns None, or\n"
"(row, label) for the first label outside [0, classes): nothing is computed then.  The\n"
"labels are copied and checked once, so a label changed meanwhile by another thread is\n"
"either caught or never read.");

static PyObject *sparse_xent(PyObject *self, PyObject *args) {
    PyArrayObject *x, *labels, *loss, *grad;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyArray_Type, &x, &PyArray_Type, &labels, &PyArray_Type, &loss,
                          &PyArray_Type, &grad))
        return NULL;
    int t = PyArray_TYPE(x), lt = PyArray_TYPE(labels);
    PyArrayObject *all[4] = {x, labels, loss, grad};
    int ok = (t == NPY_FLOAT32 || t == NPY_FLOAT64) && PyTypeNum_ISSIGNED(lt) &&
             (PyArray_ITEMSIZE(labels) == 4 || PyArray_ITEMSIZE(labels) == 8) &&
             PyArray_TYPE(loss) == t && PyArray_TYPE(grad) == t && PyArray_NDIM(x) == 2 && PyArray_NDIM(grad) == 2 &&
             PyArray_NDIM(labels) == 1 && PyArray_NDIM(loss) == 1;
    for (int i = 0; ok && i < 4; i++)
        ok &= PyArray_IS_C_CONTIGUOUS(all[i]) && PyArray_ISALIGNED(all[i]) && PyArray_ISNOTSWAPPED(all[i]);
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "sparse_xent() takes C-contiguous float32 or float64 features (2-D), loss (1-D) "
                                         "and grad (2-D) of one dtype, and int32 or int64 labels (1-D)");
        return NULL;
    }
    npy_intp batch = PyArray_DIM(x, 0), classes = PyArray_DIM(x, 1);
    if (PyArray_DIM(labels, 0) != batch || PyArray_DIM(loss, 0) != batch || PyArray_DIM(grad, 0) != batch ||
        PyArray_DIM(grad, 1) != classes || (batch > 0 && classes == 0) || !PyArray_ISWRITEABLE(loss) ||
        !PyArray_ISWRITEABLE(grad)) {
        PyErr_SetString(PyExc_ValueError, "sparse_xent(): labels and loss must be (batch,), grad features' shape, with classes");
        return NULL;
    }
    npy_intp *copy = PyMem_RawMalloc((size_t)(batch + 1) * sizeof(npy_intp));
    if (copy == NULL) return PyErr_NoMemory();
    npy_intp bad_row, bad_label = 0;
    Py_BEGIN_ALLOW_THREADS
    bad_row = checked_labels(PyArray_DATA(labels), PyArray_ITEMSIZE(labels) == 8, batch, classes, copy, &bad_label);
    if (bad_row < 0 && t == NPY_FLOAT32)
        f32_sparse_xent((const float *)PyArray_DATA(x), copy, (float *)PyArray_DATA(loss), (float *)PyArray_DATA(grad),
                        batch, classes);
    else if (bad_row < 0)
        f64_sparse_xent((const double *)PyArray_DATA(x), copy, (double *)PyArray_DATA(loss),
                        (double *)PyArray_DATA(grad), batch, classes);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(copy);
    if (bad_row >= 0) return Py_BuildValue("(nn)", bad_row, bad_label);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(flags_doc, "The values of FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW and FE_INVALID on this platform.");


/* ---------------------------------------------------------------- row kernels
 *
 * Softmax, LogSoftmax and Sum over the last axis of a C-contiguous float32 or float64
 * array, one pass over each row where numpy makes several passes over the whole array
 * (and its reductions over short rows pay a setup per row).  Rows are shared out on the
 * pool like elementwise blocks: the job's elements are rows (itemsize = a row's bytes).
 *
 * The sums keep 8 partial sums (in T), added pairwise at the end, as numpy's pairwise
 * summation does within its blocks; the order differs from numpy's and TensorFlow's (Eigen's
 * tree), within the reductions' tolerance.  Softmax: y = exp(x - max) / sum; LogSoftmax:
 * (x - max) - log(sum), TensorFlow's formulas.  exp here is Cephes's expf (1 ulp) on
 * arguments that are never positive; below -87.34 (where expf's result leaves the normal
 * floats) it gives 0, as TensorFlow's CPU threads (which flush denormals to zero) do. */

typedef struct {
    npy_intp n;  /* row length */
    int kind;    /* ROW_* */
} RowJob;

enum { ROW_SOFTMAX = 0, ROW_LOG_SOFTMAX = 1, ROW_SUM = 2 };
#define LANES 8

/* Cephes's expf reduced: n = round(c / ln 2) (into *n) and exp(c - n ln 2) by its polynomial,
 * for finite c in [-87.34, 88.73]; the callers scale by 2^n. */
static inline __attribute__((always_inline)) float cephes_exp_reduced(float c, float *n) {
    float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(c / ln 2) */
    float r = (c - k * 0.693359375f) - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    *n = k;
    return p * (r * r) + r + 1.0f;
}

/* exp(x) for x <= 0 or NaN, branch-free (vectorizes): Cephes's expf. */
static inline float exp_nonpositive_f32(float x) {
    float c = x > -87.33654f ? x : -87.33654f; /* NaN: -87.3 here, NaN from the select below */
    float n;
    float e = cephes_exp_reduced(c, &n);
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = e * scale;
    y = x > -87.33654f ? y : 0.0f;
    return x == x ? y : x;
}

static inline float sum_f32(const float *x, npy_intp n) {
    float acc[LANES] = {0};
    npy_intp i = 0, whole = n - n % LANES;
    for (; i < whole; i += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += x[i + k];
    float total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) total += x[i];
    return total;
}

/* The row's maximum, NaN ignored (a NaN reaches every output through its exp anyway). */
static inline float max_f32(const float *x, npy_intp n) {
    float m[LANES];
    for (int k = 0; k < LANES; k++) m[k] = -INFINITY;
    npy_intp i = 0, whole = n - n % LANES;
    for (; i < whole; i += LANES)
        for (int k = 0; k < LANES; k++) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    float mx = -INFINITY;
    for (int k = 0; k < LANES; k++) mx = m[k] > mx ? m[k] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void rows_f32(const float *x, float *y, npy_intp rows, npy_intp n, int kind) {
    for (npy_intp r = 0; r < rows; r++, x += n) {
        if (kind == ROW_SUM) {
            y[r] = sum_f32(x, n);
            continue;
        }
        float *yr = y + r * n;
        float mx = max_f32(x, n);
        if (mx == -INFINITY) mx = x[0]; /* every element -inf: -inf - -inf is NaN, as numpy's */
        for (npy_intp i = 0; i < n; i++) yr[i] = exp_nonpositive_f32(x[i] - mx);
        float total = sum_f32(yr, n);
        if (kind == ROW_SOFTMAX) {
            float inv = 1.0f / total;
            for (npy_intp i = 0; i < n; i++) yr[i] *= inv;
        } else {
            float lse = logf(total); /* (x - max) - lse: x - (max + lse) would round at max's scale */
            for (npy_intp i = 0; i < n; i++) yr[i] = (x[i] - mx) - lse;
        }
    }
}

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void f32_sparse_xent(const float *x, const npy_intp *labels, float *loss, float *grad, npy_intp batch,
                            npy_intp classes) {
    for (npy_intp b = 0; b < batch; b++) {
        const float *row = x + b * classes;
        float *g = grad + b * classes;
        float top = max_f32(row, classes);
        if (top == -INFINITY) top = row[0]; /* every logit -inf: -inf - -inf is NaN, as before */
        for (npy_intp k = 0; k < classes; k++) g[k] = exp_nonpositive_f32(row[k] - top);
        float total = sum_f32(g, classes);
        loss[b] = logf(total) - (row[labels[b]] - top);
        for (npy_intp k = 0; k < classes; k++) g[k] = g[k] / total;
        g[labels[b]] -= 1.0f;
    }
}

/* float64: the same, with the C library's exp and log (numpy's double exp is no faster). */
static void rows_f64(const double *x, double *y, npy_intp rows, npy_intp n, int kind) {
    for (npy_intp r = 0; r < rows; r++, x += n) {
        double acc[LANES] = {0};
        npy_intp i = 0, whole = n - n % LANES;
        if (kind == ROW_SUM) {
            for (; i < whole; i += LANES)
                for (int k = 0; k < LANES; k++) acc[k] += x[i + k];
            double total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; i < n; i++) total += x[i];
            y[r] = total;
            continue;
        }
        double mx = -INFINITY;
        for (i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
        if (mx == -INFINITY) mx = x[0];
        double *yr = y + r * n;
        double total = 0.0;
        for (i = 0; i < n; i++) {
            double e = exp(x[i] - mx);
            if (kind == ROW_SOFTMAX) yr[i] = e;
            total += e;
        }
        if (kind == ROW_SOFTMAX) {
            double inv = 1.0 / total;
            for (i = 0; i < n; i++) yr[i] *= inv;
        } else {
            double lse = log(total);
            for (i = 0; i < n; i++) yr[i] = (x[i] - mx) - lse;
        }
    }
}

/* The pool's view of a row kernel: args[0] the rows' input, args[1] their output, *count rows. */
static void rows_loop_f32(char **args, npy_intp const *count, npy_intp const *steps, void *data) {
    (void)steps;
    const RowJob *job = (const RowJob *)data;
    rows_f32((const float *)args[0], (float *)args[1], *count, job->n, job->kind);
}

static void rows_loop_f64(char **args, npy_intp const *count, npy_intp const *steps, void *data) {
    (void)steps;
    const RowJob *job = (const RowJob *)data;
    rows_f64((const double *)args[0], (double *)args[1], *count, job->n, job->kind);
}

/* A row kernel's job over ``nrows`` rows of ``n`` values (loop, data, args and their row
 * sizes set by the caller): blocks of about 16 K elements, so that a late thread still
 * finds some, shared out on the pool when ``threads`` > 1, else (or when the pool is busy)
 * all here.  Returns the floating-point flags raised, or -1 with an exception set. */
static int run_rows(Job *job, npy_intp nrows, npy_intp n, int threads) {
    job->size = nrows;
    job->block = (1 << 14) / n > 1 ? (1 << 14) / n : 1;
    job->nblocks = nrows / job->block + (nrows % job->block != 0);
    job->rounding = fegetround();
    int raised = -1;
    if (threads > 1 && job->nblocks > 1 && job->nblocks <= 0xffffffffLL) {
        if (run_job(job, threads, &raised) < 0) return -1;
    }
    if (raised == -1) {
        Py_BEGIN_ALLOW_THREADS
        feclearexcept(FPE_FLAGS);
        job->loop(job->ptr, &nrows, job->itemsize, job->data);
        raised = fetestexcept(FPE_FLAGS);
        feclearexcept(FPE_FLAGS);
        Py_END_ALLOW_THREADS
    }
    return raised;
}

PyDoc_STRVAR(rows_doc,
"rows(kind, x, out, threads) -> int\n\n"
"Over the last axis of ``x`` (C-contiguous float32 or float64, rank >= 1, non-empty rows):\n"
"kind 0 writes softmax into ``out`` (x's shape), 1 log-softmax, 2 the sums (``out``: one\n"
"value a row).  Rows are shared out among the calling thread and ``threads - 1`` pool\n"
"threads.  Returns 0, or -2 when the arrays are not as described (nothing computed).");

static PyObject *rows(PyObject *self, PyObject *args) {
    int kind, threads;
    PyArrayObject *x, *out;
    if (!PyArg_ParseTuple(args, "iO!O!i", &kind, &PyArray_Type, &x, &PyArray_Type, &out, &threads)) return NULL;
    if (kind < ROW_SOFTMAX || kind > ROW_SUM) {
        PyErr_SetString(PyExc_ValueError, "rows(): kind is 0 (softmax), 1 (log-softmax) or 2 (sum)");
        return NULL;
    }
    int t = PyArray_TYPE(x);
    if ((t != NPY_FLOAT && t != NPY_DOUBLE) || PyArray_TYPE(out) != t || PyArray_NDIM(x) < 1 ||
        !PyArray_IS_C_CONTIGUOUS(x) || !PyArray_IS_C_CONTIGUOUS(out) || !PyArray_ISALIGNED(x) ||
        !PyArray_ISALIGNED(out) || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISNOTSWAPPED(out) || !PyArray_ISWRITEABLE(out))
        return PyLong_FromLong(-2);
    npy_intp n = PyArray_DIM(x, PyArray_NDIM(x) - 1);
    npy_intp size = PyArray_SIZE(x);
    if (n < 1) return PyLong_FromLong(-2);
    npy_intp nrows = size / n;
    if (PyArray_SIZE(out) != (kind == ROW_SUM ? nrows : size)) return PyLong_FromLong(-2);
    if (nrows == 0) return PyLong_FromLong(0);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    npy_intp itemsize = PyArray_ITEMSIZE(x);
    RowJob spec = {n, kind};
    Job job = {0};
    job.loop = t == NPY_FLOAT ? rows_loop_f32 : rows_loop_f64;
    job.data = &spec;
    job.nargs = 2;
    job.ptr[0] = PyArray_BYTES(x);
    job.ptr[1] = PyArray_BYTES(out);
    job.itemsize[0] = n * itemsize;
    job.itemsize[1] = (kind == ROW_SUM ? 1 : n) * itemsize;
    if (run_rows(&job, nrows, n, threads) < 0) return NULL;
    return PyLong_FromLong(0);
}


/* ---------------------------------------------------------------- softmax gradient
 *
 * ``softmax_grad(g, s, out, threads)``: per row of the last axis, out = (g - sum(g * s)) * s,
 * the sum in lanes as the row kernels' (one pass), then the result (a second): SoftmaxGrad,
 * which the composition computed in four ops and four passes over [batch, heads, t, t]. */

#define SOFTMAX_GRAD(NAME, T)                                                                      \
WIDE_CLONES __attribute__((optimize("fp-contract=fast")))                                          \
static void NAME(const T *g, const T *s, T *out, npy_intp rows, npy_intp n) {                     \
    for (npy_intp r = 0; r < rows; r++, g += n, s += n, out += n) {                               \
        T acc[LANES] = {0};                                                                        \
        npy_intp i = 0, whole = n - n % LANES;                                                     \
        for (; i < whole; i += LANES)                                                              \
            for (int k = 0; k < LANES; k++) acc[k] += g[i + k] * s[i + k];                         \
        T dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
        for (; i < n; i++) dot += g[i] * s[i];                                                     \
        for (i = 0; i < n; i++) out[i] = (g[i] - dot) * s[i];                                      \
    }                                                                                              \
}                                                                                                  \
static void NAME##_loop(char **args, npy_intp const *count, npy_intp const *steps, void *data) {  \
    (void)steps;                                                                                   \
    NAME((const T *)args[0], (const T *)args[1], (T *)args[2], *count, *(const npy_intp *)data);  \
}
SOFTMAX_GRAD(softmax_grad_f32, float)
SOFTMAX_GRAD(softmax_grad_f64, double)

PyDoc_STRVAR(softmax_grad_doc,
"softmax_grad(g, s, out, threads) -> int\n\n"
"Over the last axis: out = (g - sum(g * s, -1)) * s, for three C-contiguous arrays of one\n"
"shape (rank >= 1, non-empty rows), all float32 or all float64, ``out`` writeable and\n"
"overlapping neither input.  Rows are shared out among the calling thread and\n"
"``threads - 1`` pool threads.  Returns the floating-point flags raised (0: none), or -2\n"
"when the arrays are not as described (nothing computed).");

static PyObject *softmax_grad(PyObject *self, PyObject *args) {
    PyArrayObject *a[3];
    int threads;
    if (!PyArg_ParseTuple(args, "O!O!O!i", &PyArray_Type, &a[0], &PyArray_Type, &a[1], &PyArray_Type, &a[2], &threads))
        return NULL;
    int t = PyArray_TYPE(a[0]);
    if ((t != NPY_FLOAT && t != NPY_DOUBLE) || PyArray_NDIM(a[0]) < 1) return PyLong_FromLong(-2);
    npy_intp size = PyArray_SIZE(a[0]), n = PyArray_DIM(a[0], PyArray_NDIM(a[0]) - 1);
    for (int i = 0; i < 3; i++)
        if (!norm_array_ok(a[i], t, i == 2) || PyArray_SIZE(a[i]) != size || PyArray_NDIM(a[i]) < 1 ||
            PyArray_DIM(a[i], PyArray_NDIM(a[i]) - 1) != n)
            return PyLong_FromLong(-2);
    npy_intp bytes = size * (npy_intp)PyArray_ITEMSIZE(a[0]);
    for (int i = 0; i < 2; i++) {
        char *p = PyArray_DATA(a[i]), *q = PyArray_DATA(a[2]);
        if (p < q + bytes && q < p + bytes) return PyLong_FromLong(-2);
    }
    if (n < 1) return PyLong_FromLong(-2);
    npy_intp nrows = size / n;
    if (nrows == 0) return PyLong_FromLong(0);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    npy_intp itemsize = PyArray_ITEMSIZE(a[0]);
    Job job = {0};
    job.loop = t == NPY_FLOAT ? softmax_grad_f32_loop : softmax_grad_f64_loop;
    job.data = &n;
    job.nargs = 3;
    for (int i = 0; i < 3; i++) {
        job.ptr[i] = PyArray_BYTES(a[i]);
        job.itemsize[i] = n * itemsize;
    }
    int raised = run_rows(&job, nrows, n, threads);
    return raised < 0 ? NULL : PyLong_FromLong(raised);
}

/* ---------------------------------------------------------------- layer normalization
 *
 * ``layer_norm`` normalizes each row (the last axis, n values) in three passes: the mean
 * and the uncorrected variance (lane-wise sums, as the row kernels above), then
 * y = (x - mean) * rstd * scale + offset with rstd = 1 / sqrt(var + eps).  The gradient
 * (dy given; its second pass also sums g and g * (x - mean)) writes dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale,
 * xhat = (x - mean) * rstd, keeps each row's (mean, rstd), and, given ``partials``, adds
 * each row's dy * xhat and dy into the partial column sums of its block of rows (one
 * [2, n] slice per block, so that threads never share one; the caller sums the blocks'
 * slices: the scale's and offset's gradients). */

typedef struct {
    npy_intp n;
    int backward;
    const char *scale, *offset;
    double eps;
    const char *x_base;  /* the first row: a row's index is its distance from here */
    char *partials;      /* NULL, or [nblocks, 2, n]: per block of rows, sum(dy * xhat), sum(dy) */
    npy_intp block;      /* rows per block */
} NormJob;

/* The row kernels keep their LANES lane-wise sums in vector registers (GCC's vector
 * extensions; written as arrays of LANES, gcc -O3 kept the gradient's three sums in memory
 * and ran the [2048, 64] gradient 3x slower).  Lane k sums elements k, k + LANES, ... and
 * the lanes are added in the same tree as the other row kernels, so the bits are those of
 * the array form; no operation is fused (ISO C mode: no contraction). */
#define NORM_LOAD(V, P) __builtin_memcpy(&(V), (P), sizeof(V))
#define NORM_HSUM(a) ((((a)[0] + (a)[1]) + ((a)[2] + (a)[3])) + (((a)[4] + (a)[5]) + ((a)[6] + (a)[7])))

#define NORM_ROWS(NAME, T, SQRT)                                                                       \
typedef T NAME##_v __attribute__((vector_size(LANES * sizeof(T))));                                    \
static inline __attribute__((always_inline)) void NAME##_row(                                          \
        const T *restrict xr, const T *restrict dr, const T *restrict s, const T *restrict o,           \
        T *restrict yr, T *restrict ps, T *restrict pb, T *restrict st, npy_intp n, T eps) {            \
    typedef NAME##_v V;                                                                                \
    V acc = {0}, a, b, c;                                                                              \
    npy_intp i = 0, whole = n - n % LANES;                                                             \
    for (; i < whole; i += LANES) { NORM_LOAD(a, xr + i); acc += a; }                                  \
    T total = NORM_HSUM(acc);                                                                          \
    for (; i < n; i++) total += xr[i];                                                                 \
    const T mean = total / (T)n;                                                                       \
    V vs = {0};                                                                                        \
    acc = vs;                                                                                          \
    if (!dr) {                                                                                         \
        for (i = 0; i < whole; i += LANES) { NORM_LOAD(a, xr + i); a -= mean; acc += a * a; }          \
        T var = NORM_HSUM(acc);                                                                        \
        for (; i < n; i++) { T d = xr[i] - mean; var += d * d; }                                       \
        const T rstd = (T)1 / SQRT(var / (T)n + eps);                                                  \
        for (i = 0; i < n; i++) yr[i] = (xr[i] - mean) * rstd * s[i] + o[i];                           \
        return;                                                                                        \
    }                                                                                                  \
    /* The gradient's second pass: the variance, sum(g) and sum(g * (x - mean)) at once. */            \
    V sg = vs, sgc = vs;                                                                               \
    for (i = 0; i < whole; i += LANES) {                                                               \
        NORM_LOAD(a, xr + i);                                                                          \
        NORM_LOAD(b, dr + i);                                                                          \
        NORM_LOAD(c, s + i);                                                                           \
        a -= mean;                                                                                     \
        b *= c;                                                                                        \
        acc += a * a;                                                                                  \
        sg += b;                                                                                       \
        sgc += b * a;                                                                                  \
    }                                                                                                  \
    T var = NORM_HSUM(acc), mg = NORM_HSUM(sg), mgx = NORM_HSUM(sgc);                                  \
    for (; i < n; i++) { T d = xr[i] - mean, g = dr[i] * s[i]; var += d * d; mg += g; mgx += g * d; } \
    const T rstd = (T)1 / SQRT(var / (T)n + eps);                                                      \
    mg /= (T)n;                                                                                        \
    mgx *= rstd / (T)n;  /* mean(g * xhat) */                                                          \
    if (ps) {                                                                                          \
        for (i = 0; i < n; i++) {                                                                      \
            T xh = (xr[i] - mean) * rstd;                                                              \
            yr[i] = rstd * ((dr[i] * s[i] - mg) - xh * mgx);                                           \
            ps[i] += dr[i] * xh;                                                                       \
            pb[i] += dr[i];                                                                            \
        }                                                                                              \
    } else {                                                                                           \
        for (i = 0; i < n; i++) yr[i] = rstd * ((dr[i] * s[i] - mg) - (xr[i] - mean) * rstd * mgx);    \
    }                                                                                                  \
    st[0] = mean;                                                                                      \
    st[1] = rstd;                                                                                      \
}                                                                                                      \
WIDE_CLONES                                                                                            \
static void NAME(const T *x, const T *dy, T *out, T *stats, npy_intp rows, const NormJob *job) {       \
    const npy_intp n = job->n;                                                                         \
    const T *s = (const T *)job->scale, *o = (const T *)job->offset;                                   \
    const npy_intp r0 = (npy_intp)(((const char *)x - job->x_base) / (npy_intp)(n * sizeof(T)));       \
    for (npy_intp r = 0; r < rows; r++) {                                                              \
        T *ps = job->partials ? (T *)job->partials + ((r0 + r) / job->block) * 2 * n : NULL;           \
        NAME##_row(x + r * n, job->backward ? dy + r * n : NULL, s, o, out + r * n, ps, ps ? ps + n : NULL,\
                   job->backward ? stats + 2 * r : NULL, n, (T)job->eps);                              \
    }                                                                                                  \
}

NORM_ROWS(norm_rows_f32, float, sqrtf)
NORM_ROWS(norm_rows_f64, double, sqrt)

/* The pool's view: args x, dy, out, stats (rows of n, n, n and 2 values). */
static void norm_loop_f32(char **args, npy_intp const *count, npy_intp const *steps, void *data) {
    (void)steps;
    norm_rows_f32((const float *)args[0], (const float *)args[1], (float *)args[2], (float *)args[3], *count,
                  (const NormJob *)data);
}

static void norm_loop_f64(char **args, npy_intp const *count, npy_intp const *steps, void *data) {
    (void)steps;
    norm_rows_f64((const double *)args[0], (const double *)args[1], (double *)args[2], (double *)args[3], *count,
                  (const NormJob *)data);
}

static int norm_array_ok(PyArrayObject *a, int type, int writeable) {
    return PyArray_TYPE(a) == type && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a) &&
           (!writeable || PyArray_ISWRITEABLE(a));
}

PyDoc_STRVAR(layer_norm_doc,
"layer_norm(x, dy, scale, offset, out, stats, eps, threads, partials=None) -> int\n\n"
"Layer normalization of the rows (last axis) of ``x`` (C-contiguous float32 or float64):\n"
"with ``dy`` None, ``out`` = (x - mean) * rstd * scale + offset (``offset`` a vector like\n"
"``scale``); with ``dy`` (x's shape), ``out`` = the gradient with respect to x and\n"
"``stats`` (rows x 2) each row's mean and rstd, and, with ``partials`` (zeros, [blocks, 2, n],\n"
"blocks of max(16384 // n, 1) rows), each block's column sums of dy * xhat and of dy added\n"
"into its [2, n] slice.  Rows are shared out among the calling\n"
"thread and ``threads - 1`` pool threads.  Returns 0, or -2 when the arrays are not as\n"
"described (nothing computed).");

static PyObject *layer_norm(PyObject *self, PyObject *args) {
    PyArrayObject *x, *scale, *out;
    PyObject *dy_obj, *offset_obj, *stats_obj, *partials_obj = Py_None;
    double eps;
    int threads;
    if (!PyArg_ParseTuple(args, "O!OO!OO!Odi|O", &PyArray_Type, &x, &dy_obj, &PyArray_Type, &scale, &offset_obj,
                          &PyArray_Type, &out, &stats_obj, &eps, &threads, &partials_obj))
        return NULL;
    int t = PyArray_TYPE(x);
    int backward = dy_obj != Py_None;
    if ((t != NPY_FLOAT && t != NPY_DOUBLE) || PyArray_NDIM(x) < 1 || !norm_array_ok(x, t, 0) ||
        !norm_array_ok(scale, t, 0) || !norm_array_ok(out, t, 1))
        return PyLong_FromLong(-2);
    npy_intp n = PyArray_DIM(x, PyArray_NDIM(x) - 1), size = PyArray_SIZE(x);
    if (n < 1 || PyArray_SIZE(scale) != n || PyArray_SIZE(out) != size) return PyLong_FromLong(-2);
    npy_intp nrows = size / n;
    PyArrayObject *dy = NULL, *offset = NULL, *stats = NULL;
    if (backward) {
        if (!PyArray_Check(dy_obj) || !PyArray_Check(stats_obj)) return PyLong_FromLong(-2);
        dy = (PyArrayObject *)dy_obj;
        stats = (PyArrayObject *)stats_obj;
        if (!norm_array_ok(dy, t, 0) || PyArray_SIZE(dy) != size || !norm_array_ok(stats, t, 1) ||
            PyArray_SIZE(stats) != 2 * nrows)
            return PyLong_FromLong(-2);
    } else {
        if (!PyArray_Check(offset_obj)) return PyLong_FromLong(-2);
        offset = (PyArrayObject *)offset_obj;
        if (!norm_array_ok(offset, t, 0) || PyArray_SIZE(offset) != n) return PyLong_FromLong(-2);
    }
    npy_intp block = (1 << 14) / n > 1 ? (1 << 14) / n : 1;
    npy_intp nblocks = nrows / block + (nrows % block != 0);
    PyArrayObject *partials = NULL;
    if (partials_obj != Py_None) {
        if (!backward || !PyArray_Check(partials_obj)) return PyLong_FromLong(-2);
        partials = (PyArrayObject *)partials_obj;
        if (!norm_array_ok(partials, t, 1) || PyArray_SIZE(partials) != 2 * n * nblocks) return PyLong_FromLong(-2);
    }
    if (nrows == 0) return PyLong_FromLong(0);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    npy_intp itemsize = PyArray_ITEMSIZE(x);
    NormJob spec = {n, backward, PyArray_BYTES(scale), offset ? PyArray_BYTES(offset) : NULL, eps,
                    PyArray_BYTES(x), partials ? PyArray_BYTES(partials) : NULL, block};
    Job job = {0};
    job.loop = t == NPY_FLOAT ? norm_loop_f32 : norm_loop_f64;
    job.data = &spec;
    job.nargs = 4;
    job.ptr[0] = PyArray_BYTES(x);
    job.ptr[1] = backward ? PyArray_BYTES(dy) : PyArray_BYTES(x);
    job.ptr[2] = PyArray_BYTES(out);
    job.ptr[3] = backward ? PyArray_BYTES(stats) : PyArray_BYTES(out);
    job.itemsize[0] = job.itemsize[1] = job.itemsize[2] = n * itemsize;
    job.itemsize[3] = backward ? 2 * itemsize : 0;
    job.size = nrows;
    job.block = block;
    job.nblocks = nblocks;
    job.rounding = fegetround();
    int raised = -1;
    if (threads > 1 && job.nblocks > 1 && job.nblocks <= 0xffffffffLL) {
        if (run_job(&job, threads, &raised) < 0) return NULL;
    }
    if (raised == -1) {
        Py_BEGIN_ALLOW_THREADS
        char *ptrs[4] = {job.ptr[0], job.ptr[1], job.ptr[2], job.ptr[3]};
        job.loop(ptrs, &nrows, job.itemsize, job.data);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(0);
}


/* ---------------------------------------------------------------- fused elementwise programs
 *
 * ``fused`` runs a chain of elementwise ufuncs (a program that ok.function's fusion found in
 * a traced graph) in one pass: the flattened output is cut into sub-blocks of FUSED_SUB
 * elements, and each instruction runs over a sub-block with numpy's own inner loop for its
 * ufunc and types (the loop ``run`` would pick), its operands and result in buffers that stay
 * in the L1 cache.  Every element is computed by the very loops the unfused ops would run,
 * so the results are bit-identical to them; what is saved is a pass over memory and an
 * output array per op, and a Python call per op.
 *
 * Operands are slots: first the inputs, then one per instruction's result.  An input has the
 * output's size, or is broadcast to it: element ``i`` of the output reads element
 * ``(i / inner) % mod`` of the input (any shape whose kept axes are one contiguous run of the
 * output's axes: a scalar (mod 1), a row of the last axes (inner 1), a column of the first
 * ones).  Scalars are read with a step of 0, other broadcast inputs are gathered into their
 * slot's buffer.  Results that are outputs are written into the output arrays directly.
 *
 * Blocks of sub-blocks are shared out on the pool as ``run`` shares elementwise blocks; the
 * loop learns a block's first element from a last argument whose pointer is ``fused_origin``
 * plus the offset (its itemsize is 1), never dereferenced. */

#define FUSED_SUB 256
#define MAX_FUSED_IN 16
#define MAX_FUSED_OUT 16
#define MAX_FUSED_INSTR 32
#define MAX_FUSED_SLOTS (MAX_FUSED_IN + MAX_FUSED_INSTR)

typedef struct {
    PyUFuncGenericFunction loop;
    void *data;
    int nin;
    int src[2];
    int dst;
} FusedInstr;

typedef struct {
    int n_in, n_out, n_instr;
    npy_intp itemsize;
    npy_intp inner[MAX_FUSED_IN], mod[MAX_FUSED_IN];
    int full[MAX_FUSED_IN];              /* the input has the output's size */
    int out_of_slot[MAX_FUSED_SLOTS];    /* the output a slot is written to, or -1 */
    FusedInstr instr[MAX_FUSED_INSTR];
} FusedSpec;

static char fused_origin[1];

/* dst[j] = src[((at + j) / inner) % mod] for j < m: a row (inner 1) wraps around, a column
 * repeats each element ``inner`` times. */
#define DEFINE_GATHER(NAME, T)                                                          \
    static void NAME(T *dst, const T *src, npy_intp at, npy_intp m, npy_intp inner, npy_intp mod) { \
        npy_intp q = (at / inner) % mod, r = at % inner;                               \
        npy_intp j = 0;                                                                 \
        while (j < m) {                                                                 \
            npy_intp run = inner - r < m - j ? inner - r : m - j;                       \
            T v = src[q];                                                               \
            if (inner == 1) {                                                           \
                npy_intp take = mod - q < m - j ? mod - q : m - j;                      \
                memcpy(dst + j, src + q, (size_t)take * sizeof(T));                     \
                j += take;                                                              \
                q = 0;                                                                  \
                continue;                                                               \
            }                                                                           \
            for (npy_intp t = 0; t < run; t++) dst[j + t] = v;                          \
            j += run;                                                                   \
            r = 0;                                                                      \
            if (++q == mod) q = 0;                                                      \
        }                                                                               \
    }
DEFINE_GATHER(gather_u32, uint32_t)
DEFINE_GATHER(gather_u64, uint64_t)

static void fused_loop(char **args, npy_intp const *count, npy_intp const *steps_unused, void *data) {
    (void)steps_unused;
    const FusedSpec *f = (const FusedSpec *)data;
    const npy_intp isz = f->itemsize;
    const npy_intp first = (npy_intp)(args[f->n_in + f->n_out] - fused_origin);
    const npy_intp n = *count;
    double scratch[MAX_FUSED_SLOTS * FUSED_SUB]; /* aligned for any type up to 8 bytes */
    char *buffer = (char *)scratch;
    char *ptr[MAX_FUSED_SLOTS];
    npy_intp step[MAX_FUSED_SLOTS];
    for (npy_intp o = 0; o < n; o += FUSED_SUB) {
        npy_intp m = n - o < FUSED_SUB ? n - o : FUSED_SUB;
        npy_intp at = first + o;  /* the output element this sub-block starts at */
        for (int k = 0; k < f->n_in; k++) {
            if (f->full[k]) {
                ptr[k] = args[k] + o * isz;
                step[k] = isz;
            } else if (f->mod[k] == 1) {
                ptr[k] = args[k];
                step[k] = 0;
            } else {
                char *dst = buffer + (size_t)k * FUSED_SUB * isz;
                if (isz == 4) gather_u32((uint32_t *)dst, (const uint32_t *)args[k], at, m, f->inner[k], f->mod[k]);
                else gather_u64((uint64_t *)dst, (const uint64_t *)args[k], at, m, f->inner[k], f->mod[k]);
                ptr[k] = dst;
                step[k] = isz;
            }
        }
        for (int s = f->n_in; s < f->n_in + f->n_instr; s++) {
            int out = f->out_of_slot[s];
            ptr[s] = out >= 0 ? args[f->n_in + out] + o * isz : buffer + (size_t)s * FUSED_SUB * isz;
            step[s] = isz;
        }
        for (int i = 0; i < f->n_instr; i++) {
            const FusedInstr *in = &f->instr[i];
            char *a[3];
            npy_intp st[3];
            for (int j = 0; j < in->nin; j++) {
                a[j] = ptr[in->src[j]];
                st[j] = step[in->src[j]];
            }
            a[in->nin] = ptr[in->dst];
            st[in->nin] = step[in->dst];
            in->loop(a, &m, st, in->data);
        }
    }
}

PyDoc_STRVAR(fused_doc,
"fused(program, inputs, layouts, outputs, out_slots, threads) -> int\n\n"
"Run ``program``, a sequence of ``(ufunc, sources, destination)`` over slots (the inputs,\n"
"then one per instruction: instruction k writes slot len(inputs) + k), writing slot\n"
"``out_slots[j]`` into ``outputs[j]``.  ``layouts[k]`` is input k's ``(inner, mod)``: output\n"
"element i reads its element (i // inner) % mod.  Every array is C-contiguous, aligned,\n"
"native-order and of one dtype; outputs have one size.  The work is shared by the calling\n"
"thread and ``threads - 1`` pool threads.  Returns the floating-point exception flags\n"
"the program raised (0: none; see ``run``), or -2 when the arrays are not as described,\n"
"-3 when a ufunc has no plain inner loop for these types or a limit is passed (16\n"
"inputs, 16 outputs, 32 instructions); nothing is computed then.");

static PyObject *fused(PyObject *self, PyObject *args) {
    PyObject *program, *inputs, *layouts, *outputs, *out_slots;
    int threads;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!i", &PyTuple_Type, &program, &PyTuple_Type, &inputs, &PyTuple_Type,
                          &layouts, &PyTuple_Type, &outputs, &PyTuple_Type, &out_slots, &threads))
        return NULL;
    FusedSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.n_in = (int)PyTuple_GET_SIZE(inputs);
    spec.n_out = (int)PyTuple_GET_SIZE(outputs);
    spec.n_instr = (int)PyTuple_GET_SIZE(program);
    if (spec.n_in > MAX_FUSED_IN || spec.n_out > MAX_FUSED_OUT || spec.n_instr > MAX_FUSED_INSTR || spec.n_out < 1 ||
        spec.n_instr < 1 || PyTuple_GET_SIZE(layouts) != spec.n_in || PyTuple_GET_SIZE(out_slots) != spec.n_out)
        return PyLong_FromLong(-3);
    int type = -1;
    npy_intp size = -1;
    for (int j = 0; j < spec.n_out; j++) {
        PyObject *o = PyTuple_GET_ITEM(outputs, j);
        if (!PyArray_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "fused() takes numpy arrays");
            return NULL;
        }
        PyArrayObject *a = (PyArrayObject *)o;
        if (j == 0) {
            type = PyArray_TYPE(a);
            size = PyArray_SIZE(a);
            spec.itemsize = PyArray_ITEMSIZE(a);
        }
        if (PyArray_TYPE(a) != type || !PyArray_ISWRITEABLE(a) || !usable(a, size)) return PyLong_FromLong(-2);
    }
    if (spec.itemsize > 8) return PyLong_FromLong(-3);
    for (int s = 0; s < MAX_FUSED_SLOTS; s++) spec.out_of_slot[s] = -1;
    for (int j = 0; j < spec.n_out; j++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(out_slots, j));
        if (slot == -1 && PyErr_Occurred()) return NULL;
        if (slot < spec.n_in || slot >= spec.n_in + spec.n_instr || spec.out_of_slot[slot] >= 0) return PyLong_FromLong(-3);
        spec.out_of_slot[slot] = j;
    }
    Job job = {0};
    for (int k = 0; k < spec.n_in; k++) {
        PyObject *o = PyTuple_GET_ITEM(inputs, k);
        if (!PyArray_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "fused() takes numpy arrays");
            return NULL;
        }
        PyArrayObject *a = (PyArrayObject *)o;
        npy_intp inner, mod;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(layouts, k), "nn", &inner, &mod)) return NULL;
        if (PyArray_TYPE(a) != type || inner < 1 || mod < 1 || PyArray_SIZE(a) != mod || !usable(a, mod))
            return PyLong_FromLong(-2);
        spec.inner[k] = inner;
        spec.mod[k] = mod;
        spec.full[k] = inner == 1 && mod == size;
        job.ptr[k] = PyArray_BYTES(a);
        job.itemsize[k] = spec.full[k] ? spec.itemsize : 0;
    }
    int types[3] = {type, type, type};
    for (int i = 0; i < spec.n_instr; i++) {
        PyObject *row = PyTuple_GET_ITEM(program, i);
        PyObject *ufunc_obj, *sources;
        int dst;
        if (!PyArg_ParseTuple(row, "OO!i", &ufunc_obj, &PyTuple_Type, &sources, &dst)) return NULL;
        if (!PyObject_TypeCheck(ufunc_obj, &PyUFunc_Type)) return PyLong_FromLong(-3);
        PyUFuncObject *ufunc = (PyUFuncObject *)ufunc_obj;
        FusedInstr *in = &spec.instr[i];
        in->nin = (int)PyTuple_GET_SIZE(sources);
        if (ufunc->nout != 1 || ufunc->nin != in->nin || in->nin < 1 || in->nin > 2 || ufunc->core_enabled ||
            dst != spec.n_in + i)
            return PyLong_FromLong(-3);
        for (int j = 0; j < in->nin; j++) {
            long src = PyLong_AsLong(PyTuple_GET_ITEM(sources, j));
            if (src == -1 && PyErr_Occurred()) return NULL;
            if (src < 0 || src >= dst) return PyLong_FromLong(-3);  /* an input or an earlier result */
            in->src[j] = (int)src;
        }
        in->dst = dst;
        if (!find_loop(ufunc, types, in->nin + 1, &in->loop, &in->data)) return PyLong_FromLong(-3);
        if (in->loop == quiet_loop) {
            /* a quiet ufunc's own loop, called per sub-block without the trampoline: its callers
             * ignore the flags of a program holding one (fusion.py, sharding._broadcast) */
            const QuietLoop *q = (const QuietLoop *)in->data;
            in->loop = q->loop;
            in->data = q->data;
        }
    }
    for (int j = 0; j < spec.n_out; j++) {
        job.ptr[spec.n_in + j] = PyArray_BYTES((PyArrayObject *)PyTuple_GET_ITEM(outputs, j));
        job.itemsize[spec.n_in + j] = spec.itemsize;
    }
    job.ptr[spec.n_in + spec.n_out] = fused_origin;
    job.itemsize[spec.n_in + spec.n_out] = 1;
    job.nargs = spec.n_in + spec.n_out + 1;
    job.loop = fused_loop;
    job.data = &spec;
    job.size = size;
    job.block = 16 * FUSED_SUB;
    job.nblocks = size / job.block + (size % job.block != 0);
    job.rounding = fegetround();
    if (size == 0) return PyLong_FromLong(0);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    int raised = -1;
    if (threads > 1 && job.nblocks > 1 && job.nblocks <= 0xffffffffLL) {
        if (run_job(&job, threads, &raised) < 0) return NULL;
    }
    if (raised == -1) { /* one thread, or the pool is busy: every block here */
        Py_BEGIN_ALLOW_THREADS
        char *ptrs[MAX_JOB_ARGS];
        for (int k = 0; k < job.nargs; k++) ptrs[k] = job.ptr[k];
        feclearexcept(FPE_FLAGS);
        fused_loop(ptrs, &size, job.itemsize, &spec);
        raised = fetestexcept(FPE_FLAGS);
        feclearexcept(FPE_FLAGS);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(raised);
}


/* ---------------------------------------------------------------- elementwise math
 *
 * numpy ufuncs for functions numpy lacks, so that the intra-op pool above runs them like
 * numpy's own (``run`` picks their inner loops from ``ufunc.types``) and numpy's casting,
 * broadcasting and ``out=`` work on them.
 *
 * erf, float32: two polynomials fitted by plugins/cpu/tools/fit_erf.py (|x| < 1: x * S(x^2),
 * relative error 4e-11; 1 <= |x| < 4: B((|x| - 2.5) / 1.5), absolute error 6e-10; erf(x)
 * rounds to +-1 in float32 from 3.919206 on), evaluated in float32 by Horner's rule: within
 * 2.5 ulp of erf everywhere (TensorFlow's, Eigen's rational approximation, is within about
 * 6).  The loop is branch-free, so the compiler vectorizes it (AVX2 and FMA where the CPU
 * has them, AVX-512 where it has that, chosen at load time); evaluating in double instead
 * (0.5 ulp) would halve the vector width.
 * erf, float64: the C library's erf (glibc: under one ulp). */

static const double ERF_S[8] = {
    1.128379167062419, -0.3761263847617949, 0.112837826237782, -0.026865438377134256,
    0.005221053538416674, -0.0008484397714046437, 0.0001126825841952544, -9.673594261896748e-06};
static const double ERF_B[17] = {
    0.9995930478582092, 0.0032674177547549824, -0.01225282838689554, 0.028181964794043408,
    -0.043651326966274974, 0.04644783611484564, -0.03187075464763944, 0.009303874488128057,
    0.006650055815694773, -0.009742486070519975, 0.004635945776530489, 0.0006709268106051753,
    -0.0019913992119867, 0.0006738904639269484, 0.00023024592656345431, -0.00015382903591989075,
    7.40271264447833e-06};

#define STRIDED_CHUNK 256

/* The body of a float32 ufunc loop over contiguous arrays (``data``: the ufunc's loop data). */
typedef void (*F32Body)(const float *x, float *out, npy_intp n, const void *data);

/* A float32 unary ufunc loop around ``body``: contiguous arrays directly, strided ones
 * through a buffer of STRIDED_CHUNK elements.  The vectorized bodies may compare a NaN
 * before they select it away, raising the invalid flag numpy would turn into a warning;
 * none of these functions raises it for a quiet NaN, so it is cleared (when it was not
 * already set). */
static void f32_unary_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, F32Body body,
                           const void *data) {
    npy_intp n = dimensions[0];
    char *in = args[0], *out = args[1];
    int raised_before = fetestexcept(FE_INVALID);
    if (steps[0] == sizeof(float) && steps[1] == sizeof(float)) {
        body((const float *)in, (float *)out, n, data);
    } else {
        float buf[STRIDED_CHUNK];
        for (npy_intp i = 0; i < n; i += STRIDED_CHUNK) {
            npy_intp m = n - i < STRIDED_CHUNK ? n - i : STRIDED_CHUNK;
            for (npy_intp j = 0; j < m; j++) buf[j] = *(const float *)(in + (i + j) * steps[0]);
            body(buf, buf, m, data);
            for (npy_intp j = 0; j < m; j++) *(float *)(out + (i + j) * steps[1]) = buf[j];
        }
    }
    if (!raised_before) feclearexcept(FE_INVALID);
}

#define F32_UNARY_LOOP(NAME, BODY)                                                               \
    static void NAME(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) { \
        f32_unary_loop(args, dimensions, steps, BODY, data);                                   \
    }

/* One float32 erf (inlined into the vectorized loops below: erf, gelu, gelu_grad). */
static inline __attribute__((always_inline)) float erf_one_f32(float v) {
    float a = v == v ? fabsf(v) : 0.0f; /* NaN: any number here (no comparison may see it), NaN again below */
    float y = a < 4.0f ? a : 4.0f;
    float t = y * y;
    float s = (float)ERF_S[7];
    for (int k = 6; k >= 0; k--) s = s * t + (float)ERF_S[k];
    float u = (y - 2.5f) * (1.0f / 1.5f);
    float b = (float)ERF_B[16];
    for (int k = 15; k >= 0; k--) b = b * u + (float)ERF_B[k];
    float r = copysignf(y < 1.0f ? s * y : (y < 3.919206f ? b : 1.0f), v); /* rounds to 1 from 3.919206 on */
    return v == v ? r : v;
}

/* A float32 ufunc loop applying ONE (an inlined scalar function the clones vectorize), and a
 * float64 one applying the C library's FN. */
#define F32_ONE_LOOP(NAME, ONE)                                                                  \
    WIDE_CLONES __attribute__((optimize("fp-contract=fast")))                                    \
    static void NAME##_contiguous(const float *x, float *out, npy_intp n, const void *data) {    \
        (void)data;                                                                              \
        for (npy_intp i = 0; i < n; i++) out[i] = ONE(x[i]);                                     \
    }                                                                                            \
    F32_UNARY_LOOP(NAME##_loop, NAME##_contiguous)
#define LIBM_F64_LOOP(NAME, FN)                                                                  \
    static void NAME(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) { \
        (void)data;                                                                              \
        npy_intp n = dimensions[0];                                                              \
        char *in = args[0], *out = args[1];                                                      \
        for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) *(double *)out = FN(*(const double *)in); \
    }

F32_ONE_LOOP(erf_f32, erf_one_f32)
LIBM_F64_LOOP(erf_f64_loop, erf)

/* gelu (exact, with erf): x * 0.5 * (erf(x * (1 / sqrt 2)) + 1), the products and the sum in
 * the order and type ok.nn's composition writes them (Mul, Mul, Erf, Add, Mul; the constants
 * rounded to the input's type), so float32 gives the composed ops' bits in one pass.
 * gelu_grad(dy, x) = dy * (0.5 * (erf(x / sqrt 2) + 1) + x * exp(-x^2 / 2) / sqrt(2 pi)):
 * float32 with the erf above and the vectorized Cephes exp; where |x| >= 13.25 (float32:
 * that exp returns 0 below -87.3, from |x| = 13.22 on) or 40 (float64: the density term is
 * 0 from 37.6 on) the term is counted as 0, so x * x never overflows into it and +-inf
 * give the limits dy and 0 (the composition's derivative gives inf * 0 = NaN there);
 * float64 with the C library's erf and exp. */
WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void gelu_f32_contiguous(const float *x, float *out, npy_intp n, const void *data) {
    (void)data;
    for (npy_intp i = 0; i < n; i++) {
        float v = x[i];
        out[i] = (v * 0.5f) * (erf_one_f32(v * 0.707106781186547524f) + 1.0f);
    }
}

F32_UNARY_LOOP(gelu_f32_loop, gelu_f32_contiguous)

static void gelu_f64_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dimensions[0];
    char *in = args[0], *out = args[1];
    for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) {
        double v = *(const double *)in;
        *(double *)out = (v * 0.5) * (erf(v * 0.707106781186547524) + 1.0);
    }
}

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void gelu_grad_f32_contiguous(const float *dy, const float *x, float *out, npy_intp n) {
    for (npy_intp i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * (erf_one_f32(v * 0.707106781186547524f) + 1.0f);
        float pdf = exp_nonpositive_f32(-0.5f * (v * v)) * 0.398942280401432678f;
        float tail = fabsf(v) < 13.25f ? v * pdf : 0.0f; /* NaN: 0 here, NaN from cdf */
        out[i] = dy[i] * (cdf + tail);
    }
}

static void gelu_grad_f32_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dimensions[0];
    int raised_before = fetestexcept(FE_INVALID);
    if (steps[0] == sizeof(float) && steps[1] == sizeof(float) && steps[2] == sizeof(float)) {
        gelu_grad_f32_contiguous((const float *)args[0], (const float *)args[1], (float *)args[2], n);
    } else {
        float a[STRIDED_CHUNK], b[STRIDED_CHUNK];
        for (npy_intp i = 0; i < n; i += STRIDED_CHUNK) {
            npy_intp m = n - i < STRIDED_CHUNK ? n - i : STRIDED_CHUNK;
            for (npy_intp j = 0; j < m; j++) {
                a[j] = *(const float *)(args[0] + (i + j) * steps[0]);
                b[j] = *(const float *)(args[1] + (i + j) * steps[1]);
            }
            gelu_grad_f32_contiguous(a, b, a, m);
            for (npy_intp j = 0; j < m; j++) *(float *)(args[2] + (i + j) * steps[2]) = a[j];
        }
    }
    if (!raised_before) feclearexcept(FE_INVALID);
}

static void gelu_grad_f64_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dimensions[0];
    char *g = args[0], *in = args[1], *out = args[2];
    int raised_before = fetestexcept(FE_INVALID); /* the comparison of a NaN raises it; none is invalid here */
    for (npy_intp i = 0; i < n; i++, g += steps[0], in += steps[1], out += steps[2]) {
        double v = *(const double *)in;
        double cdf = 0.5 * (erf(v * 0.707106781186547524) + 1.0);
        double tail = fabs(v) < 40.0 ? v * (exp(-0.5 * (v * v)) * 0.398942280401432678) : 0.0;
        *(double *)out = *(const double *)g * (cdf + tail);
    }
    if (!raised_before) feclearexcept(FE_INVALID);
}

/* exp for float32 (the Exp op's float32 kernel): Cephes's expf (within 1 ulp) over the whole
 * range, branch-free so that it vectorizes: round(x / ln 2) = n, a polynomial on the rest, and
 * 2^n applied as two halves (2^128 is not a float; its halves are).  From the largest float
 * whose exp overflows, 88.7228394, on: inf; below -87.33654 (the smallest float whose exp
 * is a normal float): 0, as TensorFlow's CPU threads (which flush denormals to zero) give and
 * the row kernels' exp does; NaN stays NaN. */
static inline __attribute__((always_inline)) float exp_one_f32(float x) {
    float c = x < 88.72283f ? x : 88.72283f; /* NaN: 88.7 here, NaN from the last select */
    c = c > -87.33654f ? c : -87.33654f;
    float n;
    float e = cephes_exp_reduced(c, &n);
    int32_t k = (int32_t)n, k1 = k >> 1, k2 = k - k1;
    int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = (e * s1) * s2;
    y = x >= -87.33654f ? y : 0.0f; /* the smallest float whose exp is a normal float */
    y = x < 88.7228394f ? y : INFINITY;
    return x == x ? y : x;
}

F32_ONE_LOOP(exp_f32, exp_one_f32)
LIBM_F64_LOOP(exp_f64_loop, exp)

/* relu: x where x > 0, NaN where x is NaN, else +0.0 (TensorFlow's max(x, 0); -0.0 gives
 * +0.0), the numpy path's bits in one pass.  rsqrt: 1 / sqrt(x), both steps correctly
 * rounded as numpy's sqrt then reciprocal, so the same bits (a negative x: NaN; its invalid
 * flag is dropped with the others by quiet_loop; relu's NaN comparisons raise none). */
#define SIMPLE_UNARY(NAME, T, EXPR)                                                            \
    WIDE_CLONES static void NAME##_contiguous(const T *x, T *out, npy_intp n) {                \
        for (npy_intp i = 0; i < n; i++) {                                                     \
            T v = x[i];                                                                        \
            out[i] = (EXPR);                                                                   \
        }                                                                                      \
    }                                                                                          \
    static void NAME##_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) { \
        (void)data;                                                                            \
        npy_intp n = dimensions[0];                                                            \
        int raised_before = fetestexcept(FE_INVALID); /* a NaN's comparison raises it */      \
        if (steps[0] == (npy_intp)sizeof(T) && steps[1] == (npy_intp)sizeof(T)) {              \
            NAME##_contiguous((const T *)args[0], (T *)args[1], n);                            \
        } else {                                                                               \
            char *in = args[0], *out = args[1];                                                \
            for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) {                \
                T v = *(const T *)in;                                                          \
                *(T *)out = (EXPR);                                                            \
            }                                                                                  \
        }                                                                                      \
        if (!raised_before) feclearexcept(FE_INVALID);                                         \
    }

SIMPLE_UNARY(relu_f32, float, v > 0.0f ? v : (v == v ? 0.0f : v))
SIMPLE_UNARY(relu_f64, double, v > 0.0 ? v : (v == v ? 0.0 : v))
#if defined(__x86_64__) && defined(__GNUC__)
/* rsqrt on SSE2 vectors (every x86-64 has them; see ADAM_SSE), and on AVX's twice as wide
 * where the CPU has them (the same correctly rounded operations, so the same bits): GCC emits
 * no vector sqrt for sqrtf/sqrt while errno may be set, and each negative x then called into
 * libm. */
#define RSQRT_SSE(NAME, T, VT, PS, W)                                                          \
    static void NAME##_sse(const T *x, T *out, npy_intp n) {                                   \
        npy_intp i = 0;                                                                        \
        VT one = _mm_set1_##PS((T)1);                                                          \
        for (; i + W <= n; i += W) _mm_storeu_##PS(out + i, _mm_div_##PS(one, _mm_sqrt_##PS(_mm_loadu_##PS(x + i)))); \
        for (; i < n; i++) {                                                                   \
            VT v = _mm_div_##PS(one, _mm_sqrt_##PS(_mm_set1_##PS(x[i])));                      \
            T r[W];                                                                            \
            _mm_storeu_##PS(r, v);                                                             \
            out[i] = r[0];                                                                     \
        }                                                                                      \
    }
RSQRT_SSE(rsqrt_f32, float, __m128, ps, 4)
RSQRT_SSE(rsqrt_f64, double, __m128d, pd, 2)
#define RSQRT_AVX(NAME, T, VT, PS, W)                                                          \
    __attribute__((target("avx"))) static void NAME##_avx(const T *x, T *out, npy_intp n) {    \
        npy_intp i = 0;                                                                        \
        VT one = _mm256_set1_##PS((T)1);                                                       \
        for (; i + W <= n; i += W)                                                             \
            _mm256_storeu_##PS(out + i, _mm256_div_##PS(one, _mm256_sqrt_##PS(_mm256_loadu_##PS(x + i)))); \
        NAME##_sse(x + i, out + i, n - i);                                                     \
    }                                                                                          \
    static void NAME##_contiguous(const T *x, T *out, npy_intp n) {                            \
        if (__builtin_cpu_supports("avx")) NAME##_avx(x, out, n);                              \
        else NAME##_sse(x, out, n);                                                            \
    }
RSQRT_AVX(rsqrt_f32, float, __m256, ps, 8)
RSQRT_AVX(rsqrt_f64, double, __m256d, pd, 4)
#define RSQRT_LOOP(NAME, T)                                                                    \
    static void NAME##_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) { \
        (void)data;                                                                            \
        npy_intp n = dimensions[0];                                                            \
        if (steps[0] == (npy_intp)sizeof(T) && steps[1] == (npy_intp)sizeof(T)) {              \
            NAME##_contiguous((const T *)args[0], (T *)args[1], n);                            \
            return;                                                                            \
        }                                                                                      \
        char *in = args[0], *out = args[1];                                                    \
        for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1])                      \
            NAME##_sse((const T *)in, (T *)out, 1);                                            \
    }
RSQRT_LOOP(rsqrt_f32, float)
RSQRT_LOOP(rsqrt_f64, double)
#else
SIMPLE_UNARY(rsqrt_f32, float, 1.0f / sqrtf(v))
SIMPLE_UNARY(rsqrt_f64, double, 1.0 / sqrt(v))
#endif

/* sigmoid: 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|) (never overflows),
 * as the numpy path computes it; float32 with the vectorized Cephes exp above (within 2.5 ulp;
 * where e leaves the normal floats, below -87.3, the result is 0, as TensorFlow's CPU threads
 * flush it), float64 with the C library's exp. */
WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void sigmoid_f32_contiguous(const float *x, float *out, npy_intp n, const void *data) {
    (void)data;
    for (npy_intp i = 0; i < n; i++) {
        float v = x[i];
        float e = exp_nonpositive_f32(-fabsf(v));
        float r = 1.0f / (1.0f + e);
        out[i] = v >= 0.0f ? r : e * r; /* NaN: e is NaN, and so is e * r */
    }
}

F32_UNARY_LOOP(sigmoid_f32_loop, sigmoid_f32_contiguous)

static void sigmoid_f64_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dimensions[0];
    char *in = args[0], *out = args[1];
    for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) {
        double v = *(const double *)in;
        double e = exp(-fabs(v));
        *(double *)out = v >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    }
}

/* elu and selu: TensorFlow's x < 0 ? expm1(x) : x (selu: scaled), so -0.0 and NaN pass
 * through.  float32: expm1 of a non-positive x as x + x^2 (1/2 + x/6 + ... + x^6/8!) above
 * -0.5 (truncation under 1.5e-8 relative) and exp(x) - 1 below (|result| >= 0.39): within
 * 3 ulp; float64: the C library's expm1.  The constants are float32 in the float32 loop,
 * as numpy rounds a Python float against a float32 array. */
static inline float expm1_nonpositive_f32(float x) {
    float p = x * (1.0f / 40320.0f) + (1.0f / 5040.0f);
    p = p * x + (1.0f / 720.0f);
    p = p * x + (1.0f / 120.0f);
    p = p * x + (1.0f / 24.0f);
    p = p * x + (1.0f / 6.0f);
    p = p * x + 0.5f;
    float small = x + (x * x) * p;
    float big = exp_nonpositive_f32(x) - 1.0f;
    return x > -0.5f ? small : big;
}

typedef struct {
    float neg32, pos32;
    double neg64, pos64;
} EluScales;

#define SELU_SCALE 1.0507009873554804934193349852946
#define SELU_ALPHA 1.6732632423543772848170429916717

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void elu_f32_contiguous(const float *x, float *out, npy_intp n, const void *data) {
    const float neg_scale = ((const EluScales *)data)->neg32, pos_scale = ((const EluScales *)data)->pos32;
    for (npy_intp i = 0; i < n; i++) {
        float v = x[i];
        float m = v < 0.0f ? v : 0.0f;
        float e = expm1_nonpositive_f32(m);
        out[i] = v < 0.0f ? neg_scale * e : (pos_scale == 1.0f ? v : pos_scale * v);
    }
}

static const EluScales elu_scales = {1.0f, 1.0f, 1.0, 1.0};
static const EluScales selu_scales = {(float)(SELU_SCALE * SELU_ALPHA), (float)SELU_SCALE, SELU_SCALE * SELU_ALPHA,
                                      SELU_SCALE};

F32_UNARY_LOOP(elu_f32_loop, elu_f32_contiguous)

static void elu_f64_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    const EluScales *k = (const EluScales *)data;
    npy_intp n = dimensions[0];
    char *in = args[0], *out = args[1];
    for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) {
        double v = *(const double *)in;
        *(double *)out = v < 0.0 ? k->neg64 * expm1(v) : (k->pos64 == 1.0 ? v : k->pos64 * v);
    }
}

/* softplus: max(x, 0) + log1p(exp(-|x|)), numpy's logaddexp(x, 0).  float32: log1p(e) for e
 * in [0, 1] as 2 atanh(s), s = e / (2 + e) <= 1/3, by its odd series to s^13 (truncation
 * under 1e-8 relative): within 3.5 ulp (the exp's error carried through); float64: the C
 * library's exp and log1p. */
static inline float log1p_unit_f32(float e) {
    float s = e / (2.0f + e);
    float z = s * s;
    float p = 1.0f / 13.0f;
    p = p * z + 1.0f / 11.0f;
    p = p * z + 1.0f / 9.0f;
    p = p * z + 1.0f / 7.0f;
    p = p * z + 1.0f / 5.0f;
    p = p * z + 1.0f / 3.0f;
    p = p * z + 1.0f;
    return 2.0f * s * p;
}

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void softplus_f32_contiguous(const float *x, float *out, npy_intp n, const void *data) {
    (void)data;
    for (npy_intp i = 0; i < n; i++) {
        float v = x[i];
        float m = v > 0.0f ? v : 0.0f;
        out[i] = m + log1p_unit_f32(exp_nonpositive_f32(-fabsf(v))); /* NaN: the exp's NaN */
    }
}

F32_UNARY_LOOP(softplus_f32_loop, softplus_f32_contiguous)

static void softplus_f64_loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dimensions[0];
    char *in = args[0], *out = args[1];
    for (npy_intp i = 0; i < n; i++, in += steps[0], out += steps[1]) {
        double v = *(const double *)in;
        *(double *)out = v != v ? v : (v > 0.0 ? v : 0.0) + log1p(exp(-fabs(v)));
    }
}

static PyUFuncGenericFunction softplus_loops[] = {softplus_f32_loop, softplus_f64_loop};
static void *softplus_data[] = {NULL, NULL};

static PyUFuncGenericFunction elu_loops[] = {elu_f32_loop, elu_f64_loop};
static void *elu_data[] = {(void *)&elu_scales, (void *)&elu_scales};
static void *selu_data[] = {(void *)&selu_scales, (void *)&selu_scales};

static PyUFuncGenericFunction sigmoid_loops[] = {sigmoid_f32_loop, sigmoid_f64_loop};
static void *sigmoid_data[] = {NULL, NULL};

static PyUFuncGenericFunction erf_loops[] = {erf_f32_loop, erf_f64_loop};
static PyUFuncGenericFunction exp_loops[] = {exp_f32_loop, exp_f64_loop};
static PyUFuncGenericFunction relu_loops[] = {relu_f32_loop, relu_f64_loop};
static PyUFuncGenericFunction rsqrt_loops[] = {rsqrt_f32_loop, rsqrt_f64_loop};
static void *erf_data[] = {NULL, NULL};
static PyUFuncGenericFunction gelu_loops[] = {gelu_f32_loop, gelu_f64_loop};
static PyUFuncGenericFunction gelu_grad_loops[] = {gelu_grad_f32_loop, gelu_grad_f64_loop};
static void *no_data[] = {NULL, NULL};
/* The binary ones: (float32, float32) -> float32, (float64, float64) -> float64. */
static const char float_types_binary[] = {NPY_FLOAT, NPY_FLOAT, NPY_FLOAT, NPY_DOUBLE, NPY_DOUBLE, NPY_DOUBLE};
/* Every ufunc here: float32 -> float32, float64 -> float64. */
static const char float_types[] = {NPY_FLOAT, NPY_FLOAT, NPY_DOUBLE, NPY_DOUBLE};

typedef struct {
    const char *name;
    PyUFuncGenericFunction *loops;  /* float32, then float64 */
    void **data;
    const char *doc;
    int nin;                        /* 0: 1 */
} UfuncSpec;

static const UfuncSpec ufunc_specs[] = {
    {"exp", exp_loops, no_data,
     "e ** x, elementwise, for float32 (Cephes's expf, within 1 ulp; 0 below -87.34, where "
     "the result leaves the normal floats) and float64 (the C library's exp)."},
    {"relu", relu_loops, no_data,
     "max(x, 0), elementwise, for float32 and float64: NaN stays NaN, -0.0 gives +0.0."},
    {"rsqrt", rsqrt_loops, no_data,
     "1 / sqrt(x), elementwise, for float32 and float64 (both steps correctly rounded)."},
    {"erf", erf_loops, erf_data,
     "The error function, elementwise, for float32 (within 2.5 ulp) and float64 "
     "(the C library's erf)."},
    {"sigmoid", sigmoid_loops, sigmoid_data,
     "The logistic function 1 / (1 + exp(-x)), elementwise, for float32 (within "
     "2.5 ulp) and float64."},
    {"elu", elu_loops, elu_data,
     "x < 0 ? expm1(x) : x, elementwise, for float32 (within 3 ulp) and float64."},
    {"selu", elu_loops, selu_data,
     "x < 0 ? scale * alpha * expm1(x) : scale * x, elementwise, for float32 "
     "(within 3 ulp) and float64."},
    {"softplus", softplus_loops, softplus_data,
     "log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), elementwise, for float32 "
     "(within 3.5 ulp) and float64."},
    {"gelu", gelu_loops, no_data,
     "x * 0.5 * (erf(x / sqrt(2)) + 1), elementwise, for float32 (the composed ops' bits) "
     "and float64."},
    {"gelu_grad", gelu_grad_loops, no_data,
     "gelu_grad(dy, x) = dy * (0.5 * (erf(x / sqrt(2)) + 1) + x * exp(-x^2 / 2) / sqrt(2 pi)), "
     "elementwise, for float32 and float64; +-inf give the limits.", 2},
};

/* Every ufunc above is quiet: a call leaves no floating-point exception flag that its loop
 * raised (an overflow to inf, the invalid flag of a negative rsqrt), so numpy warns about
 * nothing and the kernels call them without entering np.errstate, which costs more than a
 * 1000-element op (about 1 us against 0.5).  TensorFlow's kernels warn about nothing
 * either.  Each loop is registered as quiet_loop (above) with a QuietLoop (the real loop
 * and its data) as its data; run() finds and calls it the same way, and fused() calls the
 * real loop, its callers ignoring such a program's flags. */
#define N_UFUNCS (sizeof ufunc_specs / sizeof ufunc_specs[0])
static QuietLoop quiet_specs[N_UFUNCS][2];
static PyUFuncGenericFunction quiet_loops[N_UFUNCS][2];
static void *quiet_data[N_UFUNCS][2];

/* ---------------------------------------------------------------- quiet twins of numpy's ufuncs
 *
 * ``quiet_twin(np.log)``: a ufunc of numpy's own float32 and float64 inner loops for it,
 * each through quiet_loop, so it gives numpy's bits and leaves no floating-point flag.  The
 * CPU kernels that silence numpy's warnings (TensorFlow gives inf and NaN without a word)
 * call it for those types instead of entering np.errstate. */
typedef struct {
    QuietLoop q[2];
    PyUFuncGenericFunction loops[2];
    void *data[2];
    char types[2 * MAX_ARGS];
    char name[96];
    char doc[160];
} QuietTwin;

static void free_twin(PyObject *capsule) {
    PyMem_RawFree(PyCapsule_GetPointer(capsule, "opkernel_cpu._native.QuietTwin"));
}

PyDoc_STRVAR(quiet_twin_doc,
"quiet_twin(ufunc) -> ufunc or None\n\n"
"A ufunc computing ``ufunc`` on float32 and on float64 inputs with numpy's own inner loops\n"
"for those types (the same bits), leaving no floating-point flag they raised, so numpy warns\n"
"about nothing.  None when ``ufunc`` is not an elementwise ufunc of one or two inputs and\n"
"one output with a plain inner loop for both types.");

static PyObject *quiet_twin(PyObject *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &PyUFunc_Type)) Py_RETURN_NONE;
    PyUFuncObject *u = (PyUFuncObject *)arg;
    int nin = u->nin;
    if (u->nout != 1 || (nin != 1 && nin != 2) || u->core_enabled) Py_RETURN_NONE;
    QuietTwin *twin = PyMem_RawCalloc(1, sizeof(QuietTwin));
    if (twin == NULL) return PyErr_NoMemory();
    static const int kinds[2] = {NPY_FLOAT, NPY_DOUBLE};
    for (int t = 0; t < 2; t++) {
        int types[MAX_ARGS];
        for (int j = 0; j <= nin; j++) {
            types[j] = kinds[t];
            twin->types[t * (nin + 1) + j] = (char)kinds[t];
        }
        if (!find_loop(u, types, nin + 1, &twin->q[t].loop, &twin->q[t].data)) {
            PyMem_RawFree(twin);
            Py_RETURN_NONE;
        }
        twin->loops[t] = quiet_loop;
        twin->data[t] = &twin->q[t];
    }
    snprintf(twin->name, sizeof twin->name, "quiet_%s", u->name ? u->name : "ufunc");
    snprintf(twin->doc, sizeof twin->doc, "numpy's %s for float32 and float64, leaving no floating-point flag.",
             u->name ? u->name : "ufunc");
    PyObject *owner = PyCapsule_New(twin, "opkernel_cpu._native.QuietTwin", free_twin);
    if (owner == NULL) {
        PyMem_RawFree(twin);
        return NULL;
    }
    PyObject *f = PyUFunc_FromFuncAndData(twin->loops, twin->data, twin->types, 2, nin, 1, PyUFunc_None,
                                          twin->name, twin->doc, 0);
    if (f == NULL) {
        Py_DECREF(owner);
        return NULL;
    }
    /* numpy releases obj with the ufunc: the twin's tables, and the source ufunc, whose
     * inner-loop data the twin's loops use */
    PyObject *held = PyTuple_Pack(2, owner, arg);
    Py_DECREF(owner);
    if (held == NULL) {
        Py_DECREF(f);
        return NULL;
    }
    ((PyUFuncObject *)f)->obj = held;
    return f;
}

/* Adds the ufuncs above to ``module``; -1 with an exception set on failure. */
/* ---------------------------------------------------------------- batched matrix products
 *
 * ``matmul(a, b, out, threads)``: ``out[i] = a[i] @ b[i]`` over the batch dimensions (all
 * but the last two; a batch dimension of 1 in a or b broadcasts), the batch items shared
 * out among the calling thread and the pool.  float32 items with k and m up to 512 take
 * ``sgemm_small`` (below); the others go through numpy's own matmul inner loop for these
 * types (the gufunc loop ``np.matmul`` runs, which calls BLAS where the strides allow),
 * bit-identical to ``np.matmul``.  numpy runs the
 * items one after another on one thread, and BLAS does not thread products this small,
 * so attention's many small matrices ([B, H, T, d]) used one core.  The items are taken
 * where they lie (attention's queries and keys are strided views of one projection): a
 * table holds each item's byte offsets into a, b and out, and the pool's blocks are
 * runs of that table. */

static PyObject *numpy_matmul; /* np.matmul, looked up when the module loads */

#define MAX_MATMUL_RANK 32

typedef struct {
    PyUFuncGenericFunction loop;
    void *data;
    char *base[3];
    npy_intp core[4];        /* 1 (one item a call), n, k, m */
    npy_intp steps[9];       /* items (unused), then a: n, k; b: k, m; out: n, m (bytes) */
    npy_intp itemsize;
    int pack[2];             /* copy a's (b's) items into rows first: their rows are not contiguous */
    int small;               /* float32 items for sgemm_small (b packed when pack[1]) */
} MatmulJob;

/* float32 items of up to SGEMM_SMALL_K x SGEMM_SMALL_M in b take a register-blocked kernel
 * of their own instead of numpy's loop (BLAS): attention's [64, 64] x [64, 16] products
 * cost more in BLAS's call and packing than in arithmetic (the batched products of a small
 * transformer's step took 3.2 ms against torch's 1.8 ms).  A block of 6 rows x 16 columns
 * of the result is held in twelve (AVX2: six pairs of) 8-lane vectors over the whole of k:
 * per step, 6 scalars of a broadcast against 16 values of b, fused multiply-adds in the
 * wide clones.  a is read where it lies (any strides: transposed a is 6 adjacent values
 * per step); b in place when its rows are contiguous and whole blocks of 16, else copied
 * into such rows first, the last block's missing columns filled with copies of the last
 * column, and the rows past the last block of 6 read as copies of the last row, so the
 * padding only repeats sums the result holds (no floating-point flag of its own). */
#define SGEMM_SMALL_K 512
#define SGEMM_SMALL_M 512
typedef float sg_v8 __attribute__((vector_size(32), aligned(4)));

WIDE_CLONES __attribute__((optimize("fp-contract=fast")))
static void sgemm_small(const char *a, npy_intp as0, npy_intp as1, const float *b, npy_intp ldb, char *c,
                        npy_intp cs0, npy_intp cs1, npy_intp n, npy_intp k, npy_intp m) {
    for (npy_intp i = 0; i < n; i += 6) {
        const char *ar[6];
        for (int r = 0; r < 6; r++) ar[r] = a + (i + r < n ? i + r : n - 1) * as0;
        for (npy_intp j = 0; j < m; j += 16) {
            sg_v8 acc[6][2];
            for (int r = 0; r < 6; r++) acc[r][0] = acc[r][1] = (sg_v8){0};
            const float *bp = b + j;
            for (npy_intp kk = 0; kk < k; kk++, bp += ldb) {
                sg_v8 b0 = *(const sg_v8 *)bp, b1 = *(const sg_v8 *)(bp + 8);
                for (int r = 0; r < 6; r++) {
                    float av = *(const float *)(ar[r] + kk * as1);
                    acc[r][0] += av * b0;
                    acc[r][1] += av * b1;
                }
            }
            for (int r = 0; r < 6 && i + r < n; r++) {
                char *row = c + (i + r) * cs0;
                const float *v = (const float *)acc[r];
                npy_intp cols = m - j < 16 ? m - j : 16;
                if (cs1 == (npy_intp)sizeof(float) && cols == 16) {
                    memcpy(row + j * cs1, v, 16 * sizeof(float));
                } else {
                    for (npy_intp q = 0; q < cols; q++) *(float *)(row + (j + q) * cs1) = v[q];
                }
            }
        }
    }
}

/* b (k x m, byte strides rs, cs) as rows of ``mp`` floats (m rounded up to 16) at ``dst``,
 * the missing columns copies of the last. */
static void sgemm_pack_b(float *dst, const char *b, npy_intp k, npy_intp m, npy_intp mp, npy_intp rs, npy_intp cs) {
    for (npy_intp kk = 0; kk < k; kk++, dst += mp) {
        const char *row = b + kk * rs;
        for (npy_intp j = 0; j < m; j++) dst[j] = *(const float *)(row + j * cs);
        for (npy_intp j = m; j < mp; j++) dst[j] = dst[m - 1];
    }
}

/* Copy a rows x cols matrix of ``itemsize``-byte elements at ``src`` (byte strides rs, cs)
 * into C order at ``dst``. */
static void pack_rows(char *dst, const char *src, npy_intp rows, npy_intp cols, npy_intp rs, npy_intp cs,
                      npy_intp itemsize) {
    if (itemsize == 4) {
        float *d = (float *)dst;
        for (npy_intp i = 0; i < rows; i++)
            for (npy_intp j = 0; j < cols; j++) *d++ = *(const float *)(src + i * rs + j * cs);
    } else {
        double *d = (double *)dst;
        for (npy_intp i = 0; i < rows; i++)
            for (npy_intp j = 0; j < cols; j++) *d++ = *(const double *)(src + i * rs + j * cs);
    }
}

/* ``count`` items from ``table`` (three byte offsets an item: a, b, out).  An operand whose
 * rows are not contiguous (a transposed key matrix) is copied into rows first: BLAS runs
 * a transposed product of these sizes at about half the speed. */
static void matmul_block(char **args, npy_intp const *count, npy_intp const *unused, void *data) {
    const MatmulJob *spec = (const MatmulJob *)data;
    const npy_intp *offsets = (const npy_intp *)args[0];
    npy_intp n = spec->core[1], k = spec->core[2], m = spec->core[3], size = spec->itemsize;
    npy_intp steps[9];
    memcpy(steps, spec->steps, sizeof steps);
    if (spec->small) {
        npy_intp mp = (m + 15) / 16 * 16;
        float *bp = NULL;
        if (spec->pack[1]) {
            bp = malloc((size_t)(k * mp) * sizeof(float));
            if (bp == NULL) goto numpy_loop; /* out of memory: numpy's loop, which needs none */
        }
        for (npy_intp i = 0; i < count[0]; i++, offsets += 3) {
            const char *bi = spec->base[1] + offsets[1];
            if (bp) sgemm_pack_b(bp, bi, k, m, mp, spec->steps[5], spec->steps[6]);
            sgemm_small(spec->base[0] + offsets[0], spec->steps[3], spec->steps[4], bp ? bp : (const float *)bi,
                        bp ? mp : spec->steps[5] / (npy_intp)sizeof(float), spec->base[2] + offsets[2], spec->steps[7],
                        spec->steps[8], n, k, m);
        }
        free(bp);
        return;
    }
numpy_loop:;
    char *packed[2] = {NULL, NULL};
    npy_intp words[2] = {n * k, k * m};
    for (int o = 0; o < 2; o++) {
        if (!spec->pack[o]) continue;
        packed[o] = malloc((size_t)(words[o] * size));
        if (packed[o] == NULL) continue; /* out of memory: the strided call, slower */
        steps[3 + 2 * o] = (o == 0 ? k : m) * size;
        steps[4 + 2 * o] = size;
    }
    for (npy_intp i = 0; i < count[0]; i++, offsets += 3) {
        char *item[3] = {spec->base[0] + offsets[0], spec->base[1] + offsets[1], spec->base[2] + offsets[2]};
        for (int o = 0; o < 2; o++) {
            if (packed[o] == NULL) continue;
            pack_rows(packed[o], item[o], o == 0 ? n : k, o == 0 ? k : m, spec->steps[3 + 2 * o],
                      spec->steps[4 + 2 * o], size);
            item[o] = packed[o];
        }
        spec->loop(item, spec->core, packed[0] || packed[1] ? steps : spec->steps, spec->data);
    }
    free(packed[0]);
    free(packed[1]);
}

PyDoc_STRVAR(matmul_doc,
"matmul(a, b, out, threads) -> int\n\n"
"``out[..., :, :] = a[..., :, :] @ b[..., :, :]`` for arrays of one rank r >= 3: a [..., n, k],\n"
"b [..., k, m], a writeable out [..., n, m], each batch dimension of a and b equal to out's\n"
"or 1 (broadcast); any aligned, native-order strides.  On the calling thread and\n"
"``threads - 1`` pool threads (all on the caller's when the pool is busy): float32 items\n"
"with k and m up to 512 by a register-blocked kernel, others by numpy's own matmul inner\n"
"loop (np.matmul's bits).  ``out`` must not overlap a or b.  Returns the floating-point\n"
"flags raised (0: none), or -2 when the arrays do not fit (mixed or non-float types,\n"
"ranks or sizes that do not match, unaligned or byte-swapped; nothing was computed).");

static PyObject *matmul(PyObject *self, PyObject *args) {
    PyArrayObject *arr[3];
    int threads;
    if (!PyArg_ParseTuple(args, "O!O!O!i", &PyArray_Type, &arr[0], &PyArray_Type, &arr[1], &PyArray_Type, &arr[2],
                          &threads))
        return NULL;
    int rank = PyArray_NDIM(arr[2]);
    int types[3];
    for (int i = 0; i < 3; i++) {
        if (PyArray_NDIM(arr[i]) != rank || !PyArray_ISALIGNED(arr[i]) || !PyArray_ISNOTSWAPPED(arr[i]))
            return PyLong_FromLong(-2);
        types[i] = PyArray_TYPE(arr[i]);
    }
    if (rank < 3 || rank > MAX_MATMUL_RANK || !PyArray_ISWRITEABLE(arr[2]) || types[0] != types[1] ||
        types[0] != types[2] || (types[0] != NPY_FLOAT && types[0] != NPY_DOUBLE))
        return PyLong_FromLong(-2);
    const npy_intp *shape = PyArray_DIMS(arr[2]);
    npy_intp n = shape[rank - 2], m = shape[rank - 1], k = PyArray_DIM(arr[0], rank - 1);
    if (PyArray_DIM(arr[0], rank - 2) != n || PyArray_DIM(arr[1], rank - 2) != k || PyArray_DIM(arr[1], rank - 1) != m)
        return PyLong_FromLong(-2);
    npy_intp batch = 1;
    npy_intp bstride[3][MAX_MATMUL_RANK]; /* byte strides of the batch dimensions; 0 where broadcast */
    for (int d = 0; d < rank - 2; d++) {
        for (int i = 0; i < 3; i++) {
            npy_intp size = PyArray_DIM(arr[i], d);
            if (size != shape[d] && size != 1) return PyLong_FromLong(-2);
            bstride[i][d] = size == 1 ? 0 : PyArray_STRIDE(arr[i], d);
        }
        batch *= shape[d];
    }
    if (batch == 0 || n == 0 || m == 0) return PyLong_FromLong(0);
    MatmulJob spec;
    if (!find_loop((PyUFuncObject *)numpy_matmul, types, 3, &spec.loop, &spec.data)) return PyLong_FromLong(-2);
    npy_intp *table = PyMem_Malloc((size_t)batch * 3 * sizeof(npy_intp));
    if (table == NULL) return PyErr_NoMemory();
    npy_intp index[MAX_MATMUL_RANK] = {0}, offset[3] = {0, 0, 0};
    for (npy_intp item = 0; item < batch; item++) { /* an odometer over out's batch dimensions */
        memcpy(table + 3 * item, offset, sizeof offset);
        for (int d = rank - 3; d >= 0; d--) {
            for (int i = 0; i < 3; i++) offset[i] += bstride[i][d];
            if (++index[d] < shape[d]) break;
            for (int i = 0; i < 3; i++) offset[i] -= bstride[i][d] * shape[d];
            index[d] = 0;
        }
    }
    spec.core[0] = 1;
    spec.core[1] = n;
    spec.core[2] = k;
    spec.core[3] = m;
    spec.steps[0] = spec.steps[1] = spec.steps[2] = 0;
    spec.itemsize = PyArray_ITEMSIZE(arr[2]);
    for (int i = 0; i < 3; i++) {
        spec.base[i] = PyArray_BYTES(arr[i]);
        spec.steps[3 + 2 * i] = PyArray_STRIDE(arr[i], rank - 2);
        spec.steps[4 + 2 * i] = PyArray_STRIDE(arr[i], rank - 1);
    }
    spec.small = types[0] == NPY_FLOAT && k <= SGEMM_SMALL_K && m <= SGEMM_SMALL_M && k > 0;
    if (spec.small) { /* b read in place only as contiguous rows of whole blocks of 16 */
        spec.pack[0] = 0;
        spec.pack[1] = spec.steps[6] != (npy_intp)sizeof(float) || m % 16 != 0 || spec.steps[5] % (npy_intp)sizeof(float) != 0;
    } else {
        spec.pack[0] = spec.steps[4] != spec.itemsize && k > 1;
        spec.pack[1] = spec.steps[6] != spec.itemsize && m > 1;
    }
    Job job = {0};
    job.loop = matmul_block;
    job.data = &spec;
    job.nargs = 1;
    job.ptr[0] = (char *)table;
    job.itemsize[0] = 3 * sizeof(npy_intp);
    job.size = batch;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    /* four blocks a thread, so a thread that wakes late still finds some */
    job.block = batch / (4 * threads) > 1 ? batch / (4 * threads) : 1;
    job.nblocks = batch / job.block + (batch % job.block != 0);
    job.rounding = fegetround();
    int raised = -1;
    if (threads > 1 && job.nblocks > 1 && job.nblocks <= 0xffffffffLL) {
        if (run_job(&job, threads, &raised) < 0) {
            PyMem_Free(table);
            return NULL;
        }
    }
    if (raised == -1) { /* one thread, or the pool is busy: every item here */
        Py_BEGIN_ALLOW_THREADS
        char *ptrs[1] = {(char *)table};
        feclearexcept(FPE_FLAGS);
        matmul_block(ptrs, &batch, NULL, &spec);
        raised = fetestexcept(FPE_FLAGS);
        feclearexcept(FPE_FLAGS);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(table);
    return PyLong_FromLong(raised);
}

/* ---------------------------------------------------------------- Philox random numbers
 *
 * ``philox(kind, key, counter, out, lo, range, threads)`` fills ``out`` with TensorFlow's
 * stateless random numbers (random_ops.py in the core says which): the Philox 4x32-10
 * generator at ``counter + g`` for output group g, and TensorFlow's distributions from
 * random_distributions.h, with the C library's logf/sincosf (log/sincos for doubles), the
 * functions TensorFlow's CPU kernels call, so the numbers are TensorFlow's bit for bit.
 * Groups are independent, so the pool shares them out and the result does not depend on
 * the thread count. */

enum { PHILOX_UNIFORM, PHILOX_NORMAL, PHILOX_TRUNCATED, PHILOX_INT, PHILOX_FULL_INT };

typedef struct {
    int kind, wide;          /* wide: 64-bit elements (2 a group), else 32-bit (4 a group) */
    uint32_t key[2];
    uint32_t counter[4];
    char *origin;            /* out's first byte: a block's first group is found from it */
    npy_intp size, group_bytes;
    uint64_t lo, range;      /* PHILOX_INT: lo + bits % range, wrapped to the element's width */
} PhiloxJob;

static void philox10(const uint32_t in[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = in[0], c1 = in[1], c2 = in[2], c3 = in[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* ``base + n`` as a 128-bit counter of four words, lowest first. */
static void counter_add(const uint32_t base[4], uint64_t n, uint32_t c[4]) {
    uint64_t lo = ((uint64_t)base[1] << 32 | base[0]) + n;
    uint64_t hi = ((uint64_t)base[3] << 32 | base[2]) + (lo < n);
    c[0] = (uint32_t)lo, c[1] = (uint32_t)(lo >> 32), c[2] = (uint32_t)hi, c[3] = (uint32_t)(hi >> 32);
}

static float u32_to_float(uint32_t x) { /* [0, 1): 23 random mantissa bits */
    union { uint32_t u; float f; } v = {.u = (127u << 23) | (x & 0x7fffffu)};
    return v.f - 1.0f;
}

static double u64_to_double(uint32_t x0, uint32_t x1) { /* [0, 1): 52 random mantissa bits */
    union { uint64_t u; double d; } v = {.u = (1023ull << 52) | ((uint64_t)(x0 & 0xfffffu) << 32) | x1};
    return v.d - 1.0;
}

static void box_muller_float(uint32_t x0, uint32_t x1, float *f0, float *f1) {
    float u1 = u32_to_float(x0);
    if (u1 < 1.0e-7f) u1 = 1.0e-7f;
    const float v1 = (float)(2.0 * 3.14159265358979323846 * (double)u32_to_float(x1)); /* 2.0f * M_PI: in double */
    const float u2 = sqrtf(-2.0f * logf(u1));
    sincosf(v1, f0, f1);
    *f0 *= u2;
    *f1 *= u2;
}

static void box_muller_double(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double *d0, double *d1) {
    double u1 = u64_to_double(x0, x1);
    if (u1 < 1.0e-7) u1 = 1.0e-7;
    const double v1 = 2 * 3.14159265358979323846 * u64_to_double(x2, x3);
    const double u2 = sqrt(-2.0 * log(u1));
    sincos(v1, d0, d1);
    *d0 *= u2;
    *d1 *= u2;
}

/* One word after another from successive Philox calls (TensorFlow's SingleSampleAdapter). */
typedef struct {
    uint32_t counter[4], words[4];
    const uint32_t *key;
    int used;
} Samples;

static uint32_t next_word(Samples *s) {
    if (s->used == 4) {
        philox10(s->counter, s->key, s->words);
        counter_add(s->counter, 1, s->counter);
        s->used = 0;
    }
    return s->words[s->used++];
}

/* Group g's outputs (4 or 2) into ``group``. */
static void philox_group(const PhiloxJob *j, uint64_t g, void *group) {
    uint32_t c[4], w[4];
    if (j->kind == PHILOX_TRUNCATED) {
        Samples s = {.key = j->key, .used = 4};
        counter_add(j->counter, g * (j->wide ? 128 : 256), s.counter); /* 256 samples reserved an output */
        int index = 0, count = j->wide ? 2 : 4;
        while (index < count) {
            if (j->wide) {
                uint32_t a = next_word(&s), b = next_word(&s), e = next_word(&s), f = next_word(&s);
                double d[2];
                box_muller_double(a, b, e, f, &d[0], &d[1]);
                for (int k = 0; k < 2 && index < count; k++)
                    if (fabs(d[k]) < 2.0) ((double *)group)[index++] = d[k];
            } else {
                uint32_t a = next_word(&s), b = next_word(&s);
                float f[2];
                box_muller_float(a, b, &f[0], &f[1]);
                for (int k = 0; k < 2 && index < count; k++)
                    if (fabsf(f[k]) < 2.0f) ((float *)group)[index++] = f[k];
            }
        }
        return;
    }
    counter_add(j->counter, g, c);
    philox10(c, j->key, w);
    switch (j->kind) {
    case PHILOX_UNIFORM:
        if (j->wide) {
            ((double *)group)[0] = u64_to_double(w[0], w[1]);
            ((double *)group)[1] = u64_to_double(w[2], w[3]);
        } else {
            for (int k = 0; k < 4; k++) ((float *)group)[k] = u32_to_float(w[k]);
        }
        break;
    case PHILOX_NORMAL:
        if (j->wide) box_muller_double(w[0], w[1], w[2], w[3], &((double *)group)[0], &((double *)group)[1]);
        else {
            box_muller_float(w[0], w[1], &((float *)group)[0], &((float *)group)[1]);
            box_muller_float(w[2], w[3], &((float *)group)[2], &((float *)group)[3]);
        }
        break;
    case PHILOX_INT:
        if (j->wide) {
            for (int k = 0; k < 2; k++)
                ((uint64_t *)group)[k] = j->lo + ((uint64_t)w[2 * k + 1] << 32 | w[2 * k]) % j->range;
        } else {
            for (int k = 0; k < 4; k++) ((uint32_t *)group)[k] = (uint32_t)j->lo + w[k] % (uint32_t)j->range;
        }
        break;
    default: /* PHILOX_FULL_INT */
        if (j->wide) {
            for (int k = 0; k < 2; k++) ((uint64_t *)group)[k] = (uint64_t)w[2 * k + 1] << 32 | w[2 * k];
        } else {
            memcpy(group, w, sizeof w);
        }
    }
}

/* A pool block: groups [first, first + count) of the job, ``args[0]`` at the first one's bytes. */
static void philox_block(char **args, npy_intp const *count, npy_intp const *unused, void *data) {
    const PhiloxJob *j = (const PhiloxJob *)data;
    const npy_intp esize = j->wide ? 8 : 4, per = j->wide ? 2 : 4;
    const npy_intp first = (args[0] - j->origin) / j->group_bytes;
    for (npy_intp g = first; g < first + count[0]; g++) {
        npy_intp at = g * per, n = j->size - at < per ? j->size - at : per;
        if (n == per) {
            philox_group(j, (uint64_t)g, j->origin + at * esize);
        } else { /* the last, partial group: its first n outputs */
            double group[4];
            philox_group(j, (uint64_t)g, group);
            memcpy(j->origin + at * esize, group, (size_t)(n * esize));
        }
    }
}

PyDoc_STRVAR(philox_doc,
"philox(kind, key, counter, out, lo, range, threads) -> int\n\n"
"Fill the C-contiguous array ``out`` with TensorFlow's stateless random numbers: ``kind``\n"
"0 uniform, 1 normal, 2 truncated normal (out float32 or float64), 3 integers lo + bits %\n"
"range, 4 integers over the whole range (out int32, uint32, int64 or uint64; lo and range\n"
"as unsigned 64-bit numbers, range >= 1).  ``key``: two 32-bit words, ``counter``: four\n"
"(lowest first).  Shared out among the calling thread and ``threads - 1`` pool threads.\n"
"Returns 0, or -2 when the arguments do not fit (nothing was written).");

static PyObject *philox(PyObject *self, PyObject *args) {
    int kind, threads;
    unsigned int k0, k1, c0, c1, c2, c3;
    unsigned long long lo, range;
    PyArrayObject *out;
    if (!PyArg_ParseTuple(args, "i(II)(IIII)O!KKi", &kind, &k0, &k1, &c0, &c1, &c2, &c3, &PyArray_Type, &out, &lo,
                          &range, &threads))
        return NULL;
    int t = PyArray_TYPE(out);
    int floats = t == NPY_FLOAT || t == NPY_DOUBLE;
    int ints = t == NPY_INT32 || t == NPY_UINT32 || t == NPY_INT64 || t == NPY_UINT64;
    if (kind < PHILOX_UNIFORM || kind > PHILOX_FULL_INT || (kind <= PHILOX_TRUNCATED ? !floats : !ints) ||
        (kind == PHILOX_INT && range == 0) || !PyArray_IS_C_CONTIGUOUS(out) || !PyArray_ISALIGNED(out) ||
        !PyArray_ISNOTSWAPPED(out) || !PyArray_ISWRITEABLE(out))
        return PyLong_FromLong(-2);
    PhiloxJob spec = {.kind = kind, .wide = PyArray_ITEMSIZE(out) == 8, .key = {k0, k1}, .counter = {c0, c1, c2, c3},
                      .origin = PyArray_BYTES(out), .size = PyArray_SIZE(out), .lo = lo, .range = range};
    const npy_intp per = spec.wide ? 2 : 4;
    spec.group_bytes = per * PyArray_ITEMSIZE(out);
    npy_intp groups = (spec.size + per - 1) / per;
    if (groups == 0) return PyLong_FromLong(0);
    Job job = {0};
    job.loop = philox_block;
    job.data = &spec;
    job.nargs = 1;
    job.ptr[0] = spec.origin;
    job.itemsize[0] = spec.group_bytes;
    job.size = groups;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    job.block = 1024; /* 4 K numbers: tens of microseconds */
    job.nblocks = groups / job.block + (groups % job.block != 0);
    job.rounding = fegetround();
    int raised = -1;
    if (threads > 1 && job.nblocks > 1 && job.nblocks <= 0xffffffffLL) {
        if (run_job(&job, threads, &raised) < 0) return NULL;
    }
    if (raised == -1) { /* one thread, or the pool is busy: every group here */
        Py_BEGIN_ALLOW_THREADS
        char *ptrs[1] = {spec.origin};
        philox_block(ptrs, &groups, NULL, &spec);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(0);
}

static int add_ufuncs(PyObject *module) {
    for (size_t i = 0; i < sizeof ufunc_specs / sizeof ufunc_specs[0]; i++) {
        const UfuncSpec *u = &ufunc_specs[i];
        int nin = u->nin ? u->nin : 1;
        for (int t = 0; t < 2; t++) {
            quiet_specs[i][t].loop = u->loops[t];
            quiet_specs[i][t].data = u->data[t];
            quiet_loops[i][t] = quiet_loop;
            quiet_data[i][t] = &quiet_specs[i][t];
        }
        PyObject *f = PyUFunc_FromFuncAndData(quiet_loops[i], quiet_data[i], nin == 2 ? float_types_binary : float_types, 2, nin,
                                              1, PyUFunc_None, u->name, u->doc, 0);
        if (f == NULL) return -1;
        if (PyModule_AddObject(module, u->name, f) < 0) {
            Py_DECREF(f);
            return -1;
        }
    }
    return 0;
}

static PyObject *flags(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{s:i,s:i,s:i,s:i}", "divide", FE_DIVBYZERO, "over", FE_OVERFLOW, "under",
                         FE_UNDERFLOW, "invalid", FE_INVALID);
}

static PyObject *threads_started(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&pool.lock);
    int n = pool.started;
    pthread_mutex_unlock(&pool.lock);
    return PyLong_FromLong(n);
}

static PyObject *pool_blocks(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(atomic_load(&pool.pool_blocks));
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, run_doc},
    {"quiet_twin", quiet_twin, METH_O, quiet_twin_doc},
    {"rows", rows, METH_VARARGS, rows_doc},
    {"layer_norm", layer_norm, METH_VARARGS, layer_norm_doc},
    {"matmul", matmul, METH_VARARGS, matmul_doc},
    {"philox", philox, METH_VARARGS, philox_doc},
    {"fused", fused, METH_VARARGS, fused_doc},
    {"max_pool", max_pool, METH_VARARGS, max_pool_doc},
    {"max_pool_with_argmax", max_pool_with_argmax, METH_VARARGS, max_pool_with_argmax_doc},
    {"im2col", im2col, METH_VARARGS, im2col_doc},
    {"col2im", col2im, METH_VARARGS, col2im_doc},
    {"relu_grad", relu_grad, METH_VARARGS, relu_grad_doc},
    {"segment_sum", segment_sum, METH_VARARGS, segment_sum_doc},
    {"adam", adam, METH_VARARGS, adam_doc},
    {"softmax_grad", softmax_grad, METH_VARARGS, softmax_grad_doc},
    {"sparse_xent", sparse_xent, METH_VARARGS, sparse_xent_doc},
    {"max_pool_grad", max_pool_grad, METH_VARARGS, max_pool_grad_doc},
    {"fpe_flags", flags, METH_NOARGS, flags_doc},
    {"threads_started", threads_started, METH_NOARGS, "How many pool threads this process has started."},
    {"pool_blocks", pool_blocks, METH_NOARGS, "How many blocks the pool threads (not the callers) have run."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "The CPU backend's native kernels and intra-op thread pool.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    import_array();
    import_umath();
    if (pthread_atfork(NULL, NULL, after_fork_in_child) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    numpy_matmul = PyObject_GetAttrString(numpy, "matmul");
    Py_DECREF(numpy);
    if (numpy_matmul == NULL || !PyObject_TypeCheck(numpy_matmul, &PyUFunc_Type)) {
        if (numpy_matmul != NULL) PyErr_SetString(PyExc_TypeError, "numpy.matmul is not a ufunc");
        Py_DECREF(m);
        return NULL;
    }
    if (add_ufuncs(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
