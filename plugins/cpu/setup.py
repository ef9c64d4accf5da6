"""The CPU backend's one native module, ``opkernel_cpu._native``: a thread pool for large
elementwise ufunc calls and kernels numpy cannot do in one pass (max pooling, im2col,
col2im, ReluGrad, sparse cross-entropy).  It is optional: without a C compiler the
build goes on without it, and the backend runs its numpy paths and shards with Python
threads instead (see sharding.py and nn_kernels.py).

An editable install puts this folder on ``sys.path``: ``import setup`` must build nothing,
so the build runs only as setuptools runs this file (as ``__main__``)."""

from setuptools import Extension, setup

if __name__ == "__main__":
    import numpy

    setup(
        ext_modules=[
            Extension(
                "opkernel_cpu._native",
                ["opkernel_cpu/_native.c"],
                include_dirs=[numpy.get_include()],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=["-O3", "-fno-trapping-math", "-std=c11", "-pthread"],
                extra_link_args=["-pthread"],
                libraries=["m"],
                optional=True,
            )
        ]
    )
