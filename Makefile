# The course's commands. `make demo` and `make test` do all set-up on a fresh clone.
VENV ?= .venv
PY := $(abspath $(VENV))/bin/python
# nbgrader shells out to `alembic`, so the venv's bin must be on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# CPU machines: pin the CPU build of torch (an unpinned torch pulls a multi-GB CUDA build).
TORCH_PIN ?= torch==2.13.0

.PHONY: install system-deps notebooks release demo lint test test-fast gpu-check bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[browser,cluster,dev]"
	touch $@

install: $(VENV)/.installed

# bubblewrap (sandbox) and Chromium (browser tests) come from Debian packages.
system-deps:
	@bash tools/system_deps.sh

notebooks: install
	$(PY) tools/build_notebooks.py

release: notebooks
	nbgrader generate_assignment sdpa --force --log-level=WARN

demo: install system-deps release
	$(PY) -m autograder.cli demo

# ruff, configured in pyproject.toml
lint: install
	$(abspath $(VENV))/bin/ruff check autograder solutions tests tools nbgrader_config.py

test: install system-deps lint
	$(PY) -m pytest -q

test-fast: install lint
	$(PY) -m pytest -q -m "not slow and not browser"

gpu-check: install
	$(PY) tools/gpu_check.py

bench: install system-deps release
	$(PY) tools/bench.py

clean:
	rm -rf submitted autograded feedback gradebook.db .artifacts reports
