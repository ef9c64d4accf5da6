# Set-up and test entry points; the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# Backends the test suite must find; a missing one fails the run instead of skipping.
REQUIRED_BACKENDS ?= cpu,opencl

# The OpenCL plugin's [pocl] and [intel] extras bring two OpenCL implementations that run on
# the CPU (PoCL cannot compile for every x86-64 CPU; Intel's runtime can): the backend uses the
# best device that passes its probe, and the tests run on every one that does.
# The CUDA plugin installs without a GPU; its backend then reports itself unavailable.
PACKAGES := -e . -e ./plugins/cpu -e './plugins/opencl[pocl,intel]' -e ./plugins/cuda -e ./examples/median_pool
# NVRTC and the CUDA headers as wheels: the tests compile every CUDA kernel for sm_80 and sm_90.
CUDA_COMPILE_DEPS := nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12
.PHONY: demo dask-demo test typecheck layers install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml plugins/cpu/pyproject.toml plugins/cpu/setup.py plugins/cpu/opkernel_cpu/_native.c plugins/opencl/pyproject.toml plugins/cuda/pyproject.toml examples/median_pool/pyproject.toml
	$(PIP) install -q $(PACKAGES) rich scikit-learn
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test,tf-oracle,dask-example]' $(CUDA_COMPILE_DEPS)
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(BIN)/python examples/demo.py

# examples/dask_median.py: median pool over a zarr stack larger than each worker's memory,
# on a 2-process Dask cluster (docs/scaling.md).  DASK_DEMO_ARGS="--help" lists its options.
$(VENV)/.installed-dask: $(VENV)/.installed
	$(PIP) install -q -e '.[dask-example]'
	touch $@

dask-demo: $(VENV)/.installed-dask
	$(BIN)/python examples/dask_median.py $(DASK_DEMO_ARGS)

# mypy checks the core and every package that builds on it (the core's package is core/opkernel).
MYPY_PACKAGES := opkernel opkernel_cpu opkernel_opencl opkernel_cuda opkernel_medianpool
typecheck: install-test
	MYPYPATH=core:plugins/cpu:plugins/opencl:plugins/cuda:examples/median_pool \
		$(BIN)/python -m mypy $(addprefix -p ,$(MYPY_PACKAGES))

# The layering of the core and the plugins (docs/architecture.md): the import-linter contracts
# in pyproject.toml.  An import from a higher layer, or an import cycle in any package, fails.
layers: install-test
	$(BIN)/lint-imports --no-cache

# The whole suite runs with the default OpenCL device (the best one that passes its probe);
# then the OpenCL part of it runs again on every other OpenCL device that passes its probe
# (PoCL and Intel's CPU runtime where both work here): docs/opencl.md, "Which device".
# nvcc builds the CUDA op library of tests/test_c_op_library.py (docs/c-kernels.md says where to get it).
TEST_ENV := OPKERNEL_STRICT_PLUGINS=1 OPKERNEL_REQUIRE_NVRTC=1 OPKERNEL_REQUIRE_NVCC=1
# The OpenCL tests each other OpenCL device runs: all but the bad-input sweep
# (tests/test_bad_input_sweep.py), whose checks (the error before any work, inputs left
# unchanged, layouts) are the backend's host code, the same for every device; it runs on the
# default device.  On PoCL it took 100 s of the pass's 340.
OPENCL_TESTS ?= (opencl or program_cache or device_kernel_api) and not test_bad_input_sweep
# The randomized TensorFlow differential test (tests/tf_conformance/test_tf_differential.py)
# runs 12 calls per op on the default device and this many on every other device: the same
# kernel sources, whose every op test runs there in full; on PoCL the 12 took 130 s, most of
# it compiling.
OTHER_DEVICE_TFDIFF_PER_OP ?= 4
# Test processes (pytest-xdist): two keep a 2-core machine busy, since most of a test's time
# is one process (a child process's start, a compile, a kernel) while the other waits.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS)
# The sources are byte-compiled first: where PYTHONDONTWRITEBYTECODE is set, every process the
# suite starts (its workers, and the child processes of the crash-isolated tests) would otherwise
# compile the library again (about 0.35 s of each start; a third of the run of the isolated tests).
test: typecheck layers
	$(BIN)/python -m compileall -q -j 0 core plugins examples tests > /dev/null
	$(TEST_ENV) $(PYTEST) --opkernel-backends=$(REQUIRED_BACKENDS) $(PYTEST_ARGS)
	@devices="$$($(BIN)/python -m opkernel_opencl.devices --others)" || exit 1; \
	for device in $$devices; do \
		echo "== the OpenCL tests on OpenCL device $$device (OPKERNEL_OPENCL_DEVICE=$$device)"; \
		OPKERNEL_OPENCL_DEVICE=$$device OPKERNEL_TFDIFF_PER_OP=$(OTHER_DEVICE_TFDIFF_PER_OP) $(TEST_ENV) $(PYTEST) --opkernel-backends=opencl \
			-k '$(OPENCL_TESTS)' $(PYTEST_ARGS) || exit 1; \
	done

# The benchmark suite (docs/benchmarks.md); torch is optional: $(PIP) install torch==2.13.0
bench: install
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info core/*.egg-info core/opkernel/*.egg-info plugins/*/*.egg-info plugins/*/build
