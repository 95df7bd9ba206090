# The one test command: `make test` runs every Rust test and every Python test.
#
# It creates a virtual environment in $(VENV) (once), installs maturin, pytest and mypy into
# it, builds the extension module into it with `maturin develop` (optimized; `make test
# PROFILE=debug` builds a debug module instead), then runs
# `cargo test --workspace`, pytest (tests/python, which also runs examples/python) and
# `mypy --strict` on the examples and the typing check.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The profile of the extension module `develop` builds: release (optimized, what users get
# from `pip install .`) unless PROFILE=debug is given.
PROFILE ?= release
MATURIN_PROFILE := $(if $(filter debug,$(PROFILE)),,--release)
# mpi4py builds against the system's Open MPI (libopenmpi-dev, which .ci/run installs): the
# MPI tests pass its communicators to strideweave.mpi.
PYTHON_TOOLS := "maturin>=1.5,<2" "pytest>=7" "mypy>=1.5" "numpy>=1.22" "mpi4py>=3.1"
# The extension's cargo features for `develop`: MPI (strideweave.mpi) on top of the defaults.
# `pip install .` builds without it, so it needs no Open MPI.
FEATURES ?= mpi

.PHONY: test python-test develop

test: develop
	cargo test --workspace
	$(BIN)/python -m pytest
	$(BIN)/mypy

python-test: develop
	$(BIN)/python -m pytest
	$(BIN)/mypy

$(BIN)/maturin:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(PYTHON_TOOLS)

develop: $(BIN)/maturin
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop $(MATURIN_PROFILE) --features "$(FEATURES)"
