# Every target installs what it needs: a fresh clone runs `make verify` or `make test` and nothing else.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
REF     := .cache/ref
REFSTAMP:= $(REF)/.installed
export DFLASH_REFERENCE_PATH := $(abspath $(REF))
# Two cores: keep torch from oversubscribing them.
export OMP_NUM_THREADS ?= 1

# The exact versions the tests run with (pyproject.toml holds the ranges a user's environment may satisfy).
# They pin torch's CPU build (`+cpu`), which PyPI does not serve: off a machine that has it in its wheel
# folder, name PyTorch's CPU index, e.g. `make install TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
CONSTRAINTS := constraints.txt
TORCH_INDEX ?=
PIP_INSTALL := $(BIN)/pip install -q -c $(CONSTRAINTS) $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
TORCH_HINT  := no torch for constraints.txt here? PyPI does not serve its CPU build: make install TORCH_INDEX=https://download.pytorch.org/whl/cpu (README, Install)
DOCSTAMP := $(VENV)/.docs-installed

.PHONY: install demo verify test lint docs reference unit dist bench fixtures audit sweep clean browser vendor-report vendor-docs

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[dev,ray,sweep]' || { echo "$(TORCH_HINT)" >&2; exit 1; }
	touch $@ $(DOCSTAMP)

# The docs site alone needs only the package and the `docs` extra (mkdocs, mkdocs-material): `make docs` on a
# fresh clone installs that much; after `make install` (whose dev extra holds both) it installs nothing.
$(DOCSTAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/pip || $(PY) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[docs]' || { echo "$(TORCH_HINT)" >&2; exit 1; }
	touch $@

# The upstream reference (PyPI dflash==0.1.0) is an oracle for tests and the benchmark. It is
# installed beside, not into, the venv so its `dflash` console script cannot shadow ours.
$(REFSTAMP): $(STAMP)
	$(BIN)/pip install -q --no-deps --target $(REF) dflash==0.1.0
	rm -rf $(REF)/bin
	touch $@

install: $(STAMP) $(REFSTAMP)

demo: install
	$(BIN)/dflash generate --target runner/fixtures/stride-dflash/target --draft runner/fixtures/stride-dflash/draft \
		--prompt-ids "3 6 9 12 15 18 21" --max-tokens 32 --compare-plain

verify: install
	$(BIN)/dflash verify

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The reference pages' generated parts (CLI, configuration keys, catalog, templates), rewritten from the code;
# tests/docs/test_reference.py fails when the committed ones differ.
reference: install
	$(BIN)/python docs/hooks/reference.py

# The docs site, built offline and strictly (a broken link or a missing page fails); tests/docs runs its examples.
# It works opened from files (site/index.html) as well as served (`python -m http.server -d site`).
docs: $(DOCSTAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# Test files run on two workers (pytest-xdist, a file's tests stay together so its module fixtures are built
# once): most of the suite is one-threaded torch or a parent waiting on its children, so two workers use both
# cores. The verify runs inside the tests scale their budgets by the measured load, as a user's runs do.
# --durations: the 25 slowest tests in every log (CI's included), so a test that grows slow is seen.
PYTEST_WORKERS ?= 2
unit: install browser
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=25

test: lint docs unit

# A wheel and an sdist in dist/ (.ci/run installs the wheel into a fresh venv).
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The HTML report's browser test needs a real Chromium (Playwright's own browser download cannot work offline).
# As root (CI, .ci/run) apt-get installs Debian's chromium, with the fonts the viewer's font stack asks for
# (Arial's metrics, colour emoji) so the PNG in the docs renders as a user's browser would. Not root (a
# laptop): nothing is installed, and the browser tests skip, saying why, unless a `chromium` is on PATH.
BROWSER_PACKAGES := chromium fonts-liberation fonts-noto-color-emoji
browser:
	@if dpkg -s $(BROWSER_PACKAGES) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(BROWSER_PACKAGES); \
	else echo "make browser: not root, so $(BROWSER_PACKAGES) are not installed; the browser tests skip" \
		"unless a chromium is on PATH (sudo make browser installs them)" >&2; fi

# The HTML report's viewer, Stryker's mutation-testing-elements, is vendored: nothing is fetched at run time.
# To move to another version, change REPORT_ELEMENTS and run `make vendor-report` (npm pack checks the tarball's
# integrity against the registry); tests/report/test_html_report.py checks the bundle against VERSION's sha256.
REPORT_ELEMENTS := 3.9.0
REPORT_VENDOR   := verify/report/vendor
vendor-report:
	tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && \
	(cd "$$tmp" && npm pack -q mutation-testing-elements@$(REPORT_ELEMENTS) >/dev/null && tar xzf ./*.tgz) && \
	mkdir -p $(REPORT_VENDOR) && \
	cp "$$tmp/package/dist/mutation-test-elements.js" "$$tmp/package/LICENSE" $(REPORT_VENDOR)/ && \
	printf 'package: mutation-testing-elements\nversion: %s\nfile: mutation-test-elements.js\nsha256: %s\n' \
		$(REPORT_ELEMENTS) "$$(sha256sum $(REPORT_VENDOR)/mutation-test-elements.js | cut -d' ' -f1)" \
		> $(REPORT_VENDOR)/VERSION

# The docs site's search from files needs iframe-worker's shim (Web Workers do not run from file://); it is
# vendored like the viewer: change SEARCH_SHIM and run `make vendor-docs`.
SEARCH_SHIM := 1.0.4
DOCS_VENDOR := docs/assets/iframe-worker
vendor-docs:
	tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && \
	(cd "$$tmp" && npm pack -q iframe-worker@$(SEARCH_SHIM) >/dev/null && tar xzf ./*.tgz) && \
	mkdir -p $(DOCS_VENDOR) && cp "$$tmp/package/shim/index.js" $(DOCS_VENDOR)/shim.js && \
	cp "$$tmp/package/LICENSE" $(DOCS_VENDOR)/ && \
	printf 'package: iframe-worker\nversion: %s\nfile: shim.js\nsha256: %s\n' \
		$(SEARCH_SHIM) "$$(sha256sum $(DOCS_VENDOR)/shim.js | cut -d' ' -f1)" > $(DOCS_VENDOR)/VERSION

bench: install
	$(BIN)/python -m benchmarks.bench

FIXTURE_NAMES := copy-dflash copy-dflash2 stride-dflash stride-dflash2

fixtures: install
	for name in $(FIXTURE_NAMES); do $(BIN)/dflash fixtures build --fixture $$name || exit 1; done

audit: install
	for name in $(FIXTURE_NAMES); do $(BIN)/dflash fixtures audit --fixture $$name || exit 1; done

sweep: install
	$(BIN)/dflash sweep

clean:
	rm -rf $(VENV) .cache mutants .dflash-cache site dist
