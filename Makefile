# The course's commands. `make demo` and `make test` do all set-up on a fresh clone.
VENV ?= .venv
PY := $(abspath $(VENV))/bin/python
# nbgrader shells out to `alembic`, so the venv's bin must be on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# CPU machines: pin the CPU build of torch (an unpinned torch pulls a multi-GB CUDA build).
TORCH_PIN ?= torch==2.13.0

.PHONY: install kernel-tripwires system-deps lab-extension student-env hub-deps test-deps hub hub-root-check hub-stop notebooks release messages demo lint test test-fast docs gpu-check bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[browser,cluster,dev,hub]"
	touch $@

install: $(VENV)/.installed

# bubblewrap (sandbox), g++ (the kernel tripwires) and Chromium (browser tests) come from Debian packages.
system-deps:
	@bash tools/system_deps.sh

# The runner's C++ kernel tripwires, compiled against the installed torch (once per torch version).
kernel-tripwires: install system-deps
	$(PY) -m autograder.sandbox.kernel_tripwires

# configurable-http-proxy (JupyterHub's proxy) from npm, pinned in hub/package-lock.json.
hub/node_modules/.installed: hub/package.json hub/package-lock.json
	@if command -v npm >/dev/null; then cd hub && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "WARNING: no npm: configurable-http-proxy not installed; \`make hub\` and the hub tests need Node.js and npm." >&2; fi

# JupyterLab's "Check my work" (labextension/): the Python package sdpa-check-my-work, the student side (a server
# extension that forwards checks, and the button and panel prebuilt with @jupyterlab/builder, pinned in
# labextension/package-lock.json, against this venv's JupyterLab).  Installed into this venv (the instructor's
# server uses it too) and into the students' environment below.
LABEXT_BUILT := labextension/build/sdpa-check-my-work/package.json
labextension/node_modules/.installed: labextension/package.json labextension/package-lock.json
	@if command -v npm >/dev/null; then cd labextension && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "WARNING: no npm: JupyterLab's Check my work button is not built." >&2; fi

$(LABEXT_BUILT): labextension/node_modules/.installed labextension/lib/index.js labextension/style/index.css
	@if [ -d labextension/node_modules/@jupyterlab/builder ]; then \
	  cd labextension && rm -rf build && node node_modules/@jupyterlab/builder/lib/build-labextension.js \
	    --core-path "$$($(abspath $(PY)) -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')" . >/dev/null \
	  && echo "built JupyterLab's Check my work into labextension/build"; fi

$(VENV)/.labextension-installed: $(LABEXT_BUILT) labextension/pyproject.toml labextension/sdpa_check_my_work/__init__.py
	@if [ -f $(LABEXT_BUILT) ]; then $(PY) -m pip install -q --no-build-isolation ./labextension && touch $@; fi

lab-extension: install $(VENV)/.labextension-installed

# The students' environment on `make hub`: a venv outside this checkout with what a student's server runs (torch,
# numpy, matplotlib, JupyterLab, nbgrader's student extensions, sdpa-check-my-work) and nothing of the grader;
# the hub closes this checkout to the students (hub/student_env.py).  Needs root, like the hub.
STUDENT_VENV ?= /srv/sdpa-hub/student-venv
# hub/control.py reads it (make hub, the hub tests)
export SDPA_STUDENT_VENV := $(STUDENT_VENV)
student-env: lab-extension
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m hub.student_env "$(STUDENT_VENV)"; \
	else echo "student-env: not root, skipped (make hub and the hub tests need root)"; fi

hub-deps: install hub/node_modules/.installed lab-extension student-env

# axe-core (the accessibility engine of the browser tests) from npm, pinned in tests/support/axe/package-lock.json.
AXE_DIR := tests/support/axe
$(AXE_DIR)/node_modules/.installed: $(AXE_DIR)/package.json $(AXE_DIR)/package-lock.json
	@if command -v npm >/dev/null; then cd $(AXE_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "WARNING: no npm: axe-core not installed; the accessibility checks of the browser tests are skipped." >&2; fi

test-deps: $(AXE_DIR)/node_modules/.installed

# The course as deployed: JupyterHub, nbgrader exchange, one Unix user per person (needs root).
hub: hub-root-check hub-deps system-deps kernel-tripwires
	$(PY) -m hub.control start

hub-root-check:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make hub needs root: it creates the local Unix users sdpa-instructor and sdpa-student-a/b/c, their"; \
	  echo "homes and the shared nbgrader exchange, and JupyterHub's spawner starts servers as those users."; \
	  echo "Nothing was done. Run it as root (sudo make hub)."; exit 2; fi

hub-stop:
	$(PY) -m hub.control stop

notebooks: install
	$(PY) -m tools.build_notebooks

# The grader's message catalogs (autograder/locale), refreshed from the code; translate what arrives empty.
messages: install
	$(PY) -m tools.messages

# The course's editions (autograder/notebook/editions.py): `make release EDITIONS=sdpa_en` releases one.
EDITIONS ?= sdpa sdpa_en
release: notebooks
	@for a in $(EDITIONS); do echo "nbgrader generate_assignment $$a --force"; \
	  nbgrader generate_assignment $$a --force --log-level=WARN || exit 1; done

demo: install system-deps kernel-tripwires release
	$(PY) -m autograder.cli demo

# ruff (pyproject.toml; the lesson's code cells in the built source notebooks) and the import layers (.importlinter)
lint: install
	$(abspath $(VENV))/bin/ruff check autograder benchmarks catalogue hub labextension/sdpa_check_my_work solutions tests tools nbgrader_config.py \
	  source/*/*.ipynb
	$(abspath $(VENV))/bin/lint-imports --no-cache

# the docs site (mkdocs.yml, docs/), outside the tree; --strict: any warning (a broken link, a page
# missing from the nav) fails the build
docs: install
	$(PY) -m mkdocs build --strict --site-dir .artifacts/site

# Two pytest-xdist workers (tests/conftest.py keeps each file, and the files sharing a fixture, on one worker),
# then the few tests that time this machine's CPU, alone.
test: install system-deps kernel-tripwires hub-deps test-deps lint docs
	$(PY) -m pytest -q --durations=12 -n 2 --dist loadfile --no-loadscope-reorder -m "not alone"
	$(PY) -m pytest -q -m alone

test-fast: install lint
	$(PY) -m pytest -q -m "not slow and not browser"

gpu-check: install
	$(PY) -m tools.gpu_check

# make bench N=1000 BENCH_ARGS="--kill-at 0.1,0.5,0.9": see python -m benchmarks class --help
N ?= 60
BENCH_ARGS ?=
bench: install system-deps release
	$(PY) -m benchmarks class --n $(N) $(BENCH_ARGS)

clean:
	rm -rf submitted autograded feedback gradebook.db .artifacts reports
