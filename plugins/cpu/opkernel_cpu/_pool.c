/* A native thread pool for large elementwise ufunc calls (the CPU backend's Shard).
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
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_ARGS 3            /* unary and binary ufuncs with one output */
#define MAX_THREADS 256
#define SPIN_NS 200000        /* an idle pool thread spins this long before it sleeps */
#define FPE_FLAGS (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

typedef struct {
    PyUFuncGenericFunction loop;
    void *data;
    int nargs;
    char *ptr[MAX_ARGS];
    npy_intp itemsize[MAX_ARGS];
    npy_intp size, block, nblocks;
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
        char *args[MAX_ARGS];
        npy_intp steps[MAX_ARGS];
        for (int i = 0; i < job->nargs; i++) {
            args[i] = job->ptr[i] + lo * job->itemsize[i];
            steps[i] = job->itemsize[i];
        }
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
        if ((uint32_t)(t >> 32) == seen) {
            uint64_t until = now_ns() + SPIN_NS;
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

static int usable(PyArrayObject *a, npy_intp size) {
    int t = PyArray_TYPE(a);
    return PyArray_SIZE(a) == size && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) &&
           PyArray_ISNOTSWAPPED(a) && (PyTypeNum_ISNUMBER(t) || PyTypeNum_ISBOOL(t));
}

PyDoc_STRVAR(run_doc,
"run(ufunc, inputs, out, threads, block) -> int\n\n"
"Compute ``ufunc(*inputs, out=out)`` on the calling thread and ``threads - 1`` pool\n"
"threads, ``block`` elements at a time.  Returns the floating-point exception flags\n"
"the blocks raised (0: none); -1 when the pool is busy with another caller's job, -2\n"
"when the arrays are not all writeable (out), C-contiguous, aligned, native-order,\n"
"numeric and of one size (nothing was computed then).  Raises TypeError when numpy\n"
"has no plain inner loop for exactly these types.");

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *ufunc_obj, *inputs, *out_obj;
    int threads;
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OO!O!in", &ufunc_obj, &PyTuple_Type, &inputs, &PyArray_Type, &out_obj,
                          &threads, &block))
        return NULL;
    if (!PyObject_TypeCheck(ufunc_obj, &PyUFunc_Type)) {
        PyErr_SetString(PyExc_TypeError, "run() needs a numpy ufunc");
        return NULL;
    }
    PyUFuncObject *ufunc = (PyUFuncObject *)ufunc_obj;
    Py_ssize_t nin = PyTuple_GET_SIZE(inputs);
    if (ufunc->nout != 1 || ufunc->nin != nin || nin + 1 > MAX_ARGS || ufunc->core_enabled) {
        PyErr_SetString(PyExc_TypeError, "run() takes a unary or binary elementwise ufunc with one output");
        return NULL;
    }
    if (threads < 1 || threads > MAX_THREADS || block < 1) {
        PyErr_SetString(PyExc_ValueError, "run() needs 1 to 256 threads and a positive block");
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
    if (!find_loop(ufunc, types, job.nargs, &job.loop, &job.data)) {
        PyErr_Format(PyExc_TypeError, "numpy has no inner loop of %s for exactly these types", ufunc->name);
        return NULL;
    }
    job.size = size;
    job.block = block;
    job.nblocks = (size + block - 1) / block;
    if (job.nblocks > 0xffffffffLL) {
        PyErr_SetString(PyExc_ValueError, "run() needs fewer than 2**32 blocks");
        return NULL;
    }
    if (pthread_mutex_trylock(&pool.busy) != 0) return PyLong_FromLong(-1);
    int err = ensure_threads(threads - 1);
    if (err) {
        pthread_mutex_unlock(&pool.busy);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    int raised;
    Py_BEGIN_ALLOW_THREADS
    pool.job = job;
    publish();
    uint32_t generation = (uint32_t)(atomic_load(&pool.ticket) >> 32);
    work(generation);
    /* every block is claimed; wait for the ones other threads are still running */
    for (unsigned i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < job.nblocks; i++) {
        if (i < 4096) CPU_RELAX();
        else sched_yield();
    }
    raised = atomic_load_explicit(&pool.fpe, memory_order_relaxed);
    feclearexcept(FPE_FLAGS);
    Py_END_ALLOW_THREADS
    pthread_mutex_unlock(&pool.busy);
    return PyLong_FromLong(raised);
}

PyDoc_STRVAR(flags_doc, "The values of FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW and FE_INVALID on this platform.");

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
    {"fpe_flags", flags, METH_NOARGS, flags_doc},
    {"threads_started", threads_started, METH_NOARGS, "How many pool threads this process has started."},
    {"pool_blocks", pool_blocks, METH_NOARGS, "How many blocks the pool threads (not the callers) have run."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pool", "A native thread pool for large elementwise ufunc calls.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__pool(void) {
    import_array();
    import_umath();
    if (pthread_atfork(NULL, NULL, after_fork_in_child) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
    return PyModule_Create(&module);
}
