# One venv, one editable install; every target installs first if needed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Two test processes (pytest-xdist, one file at a time each): alone, the suite keeps little more than
# one core busy (fault tests wait on leases and kills, small JAX programs run on one thread).
TEST_WORKERS ?= 2

.PHONY: install browser demo test bench lint docs clean

install: $(STAMP)

# Re-install only when the dependency list changes, so `make install` is near-instant otherwise.
# uv resolves and downloads in parallel, several times faster than pip from a cold cache; where uv
# cannot reach the index (TLS, proxy), pip installs the same requirements instead.
# Bytecode is compiled at install, as pip does and uv does not by default: where PYTHONDONTWRITEBYTECODE
# is set (CI images), nothing else ever writes it, and every process (each CLI call, each Ray worker)
# would compile jax, ray and scipy from source again.
# Then the torch extra (examples/torch_gpt, experiments/smoke_torch.py and their tests, bench_train's
# PyTorch column), a CPU build: from PyTorch's CPU index through uv's --torch-backend (PyPI's Linux wheel
# brings GBs of CUDA libraries nothing here loads). Where that index cannot be reached (a machine that
# reaches PyPI only), pip takes a torch wheel from its own find-links when it has one (a local CPU
# build), then torch's own dependencies from its index.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip uv
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/uv pip install -q --native-tls --compile-bytecode -e '.[train,dev]' \
	  || $(BIN)/pip install -q -e '.[train,dev]'
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/uv pip install -q --native-tls --compile-bytecode --torch-backend cpu -e '.[torch]' \
	  || { $(BIN)/pip install -q --no-index --no-deps 'torch>=2.5' \
	         || echo "no torch wheel in pip's find-links: pip takes its index's"; \
	       $(BIN)/pip install -q -e '.[torch]'; }
	$(BIN)/python -m compileall -q -j 0 ladder fits bench experiments examples
	@touch $(STAMP)

# The dashboard's browser tests drive Debian's chromium; install it once when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The report prints even when the gate blocked the hero (that is the tool working); the exit status is the submit's.
demo: install
	@$(BIN)/ladder submit experiments/tiny.py --root runs; status=$$?; \
	  $(BIN)/ladder report experiments/tiny.py --root runs; exit $$status

# --no-loadscope-reorder: xdist would order the files by their number of tests, which sends the long
# one-test files (fault and cluster tests) last and leaves one worker finishing them alone; the suite's
# own order (tests/conftest.py) starts the slow files first.
test: install browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests --durations=30

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check ladder fits tests bench experiments examples

# The generated pages of docs/ (the spec reference, the environment variables); tests/core/test_docs.py
# fails when they are stale.
docs: install
	$(BIN)/python -m ladder.cli.docs docs

clean:
	rm -rf $(VENV) runs
