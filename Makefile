# Set-up and test entry points; the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# Backends the test suite must find; a missing one fails the run instead of skipping.
REQUIRED_BACKENDS ?= cpu,opencl

# The OpenCL plugin's [pocl] extra brings a real OpenCL device that runs on the CPU.
# The CUDA plugin installs without a GPU; its backend then reports itself unavailable.
PACKAGES := -e . -e ./plugins/cpu -e './plugins/opencl[pocl]' -e ./plugins/cuda -e ./examples/median_pool
# NVRTC and the CUDA headers as wheels: the tests compile every CUDA kernel for sm_80 and sm_90.
CUDA_COMPILE_DEPS := nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12
.PHONY: demo dask-demo test typecheck install install-test bench clean

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

# mypy checks the core and every package that builds on it.  The core lives in core/
# and installs as `opkernel` through setuptools' editable import hook, which mypy does
# not run: a link named opkernel on MYPYPATH gives it the same name.
MYPY_LINKS := $(VENV)/mypy-path
MYPY_PACKAGES := opkernel opkernel_cpu opkernel_opencl opkernel_cuda opkernel_medianpool
typecheck: install-test
	mkdir -p $(MYPY_LINKS) && ln -sfn $(CURDIR)/core $(MYPY_LINKS)/opkernel
	MYPYPATH=$(MYPY_LINKS):plugins/cpu:plugins/opencl:plugins/cuda:examples/median_pool \
		$(BIN)/python -m mypy $(addprefix -p ,$(MYPY_PACKAGES))

test: typecheck
	OPKERNEL_STRICT_PLUGINS=1 OPKERNEL_REQUIRE_NVRTC=1 $(BIN)/python -m pytest -q --opkernel-backends=$(REQUIRED_BACKENDS) $(PYTEST_ARGS)

# The benchmark suite (docs/benchmarks.md); torch is optional: $(PIP) install torch==2.13.0
bench: install
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info core/*.egg-info plugins/*/*.egg-info plugins/*/build
