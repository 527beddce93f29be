# kafkalite: `make serve` runs a single broker, `make test` runs the whole suite, `make dist`
# builds the sdist and the wheel into dist/. They work from a fresh clone on a fresh Debian machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
DEB_PACKAGES := zookeeper kcat default-jre-headless redis-server chromium chromium-driver \
	gcc python3-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Compiled modules (and pytest's rewritten test modules) are cached in the venv, outside the
# tree, even where the environment asks Python not to write bytecode: without a cache every
# pytest worker compiled kafkalite and rewrote every test module again (about 8 s of each
# worker's collection) and every broker subprocess compiled what it imports (0.5-1 s a start).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

.PHONY: serve test test-fast bench lint clean debs venv dist

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# the editable install also builds the C extensions in place, the validator's walk and the
# release of empty pools (setup.py: optional extensions, skipped with a warning when there is no
# C compiler); a change to one reinstalls
EXT := setup.py kafkalite/schema_registry/_walk.c kafkalite/network/_pools.c

$(STAMP): pyproject.toml $(EXT) | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml $(EXT) | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(STAMP)

$(BENCH_STAMP): pyproject.toml $(EXT) | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@ $(TEST_STAMP) $(STAMP)

venv: $(STAMP)

# Debian packages the tests start for real: ZooKeeper (with a Java runtime), kcat, redis-server,
# chromium and its driver (the admin console is tested in a headless browser); gcc and Python's
# headers build the C extensions (the validator's walk, which the tests check against the Python
# walk, and the release of empty pools).
debs:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

serve: $(STAMP)
	$(BIN)/kafkalite serve $(ARGS)

# The whole suite on one pytest-xdist worker more than the cores: most tests wait on brokers,
# clients and sockets rather than compute, and with a worker per core about a fifth of the CPU
# stayed idle (2 cores: 14 min 49 s on two workers, 11 min 28 s and 12 min 10 s on three).
# tests/conftest.py makes each module one unit of work (all Spark tests one unit) and hands out
# the longest first.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: debs $(TEST_STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --durations=30 $(PYTEST_ARGS)

# The unit tier: every test without a tier marker (tests/conftest.py says which). It installs no
# Debian package and starts no other process; it is the inner loop, `make test` is what CI runs.
FAST := not (integration or zookeeper or system or spark or browser or bench)
# One worker more than the cores: the tier's in-process brokers wait on clocks and sockets, and
# with one worker a core about 30% of the CPU stayed idle (2 cores: 112-120 s against 125-129 s).
FAST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test-fast: $(TEST_STAMP)
	$(BIN)/pytest --unit-tier -n $(FAST_WORKERS) -m "$(FAST)" -p no:cacheprovider \
	  --ignore=tests/integration --ignore=tests/system --ignore=tests/spark --ignore=tests/bench \
	  $(PYTEST_ARGS)

bench: debs $(BENCH_STAMP)
	$(BIN)/python bench/spark_load.py $(ARGS)

# The sdist and the wheel (`pip install dist/kafkalite-*.whl`, or with `[spark]`), built by the
# PEP 517 front end `build` (the test extra) in an isolated environment; tests/packaging installs
# the wheel into a fresh venv and runs it.
dist: $(TEST_STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

lint: $(TEST_STAMP)
	$(BIN)/ruff check kafkalite tests bench tools
	$(BIN)/ruff format --check kafkalite tests bench tools
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis data
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find kafkalite -name '*.so' -delete
