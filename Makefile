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
CONSTRAINTS := constraints.txt
PIP_INSTALL := $(BIN)/pip install -q -c $(CONSTRAINTS)

.PHONY: install demo verify test lint docs unit dist bench fixtures audit sweep clean browser vendor-report

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[dev,ray]'
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

# The docs site, built offline and strictly (a broken link or a missing page fails); tests/docs runs its examples.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# Test files run on two workers (pytest-xdist, a file's tests stay together so its module fixtures are built
# once): most of the suite is one-threaded torch or a parent waiting on its children, so two workers use both
# cores. The verify runs inside the tests scale their budgets by the measured load, as a user's runs do.
PYTEST_WORKERS ?= 2
unit: install browser
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

test: lint docs unit

# A wheel and an sdist in dist/ (.ci/run installs the wheel into a fresh venv).
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The HTML report's browser test needs a real Chromium (Playwright's own browser download cannot work offline).
# We are root here and in CI (.ci/run), so apt-get installs Debian's chromium, with the fonts the viewer's font
# stack asks for (Arial's metrics, colour emoji) so the PNG in the docs renders as a user's browser would.
BROWSER_PACKAGES := chromium fonts-liberation fonts-noto-color-emoji
browser:
	dpkg -s $(BROWSER_PACKAGES) >/dev/null 2>&1 || { apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(BROWSER_PACKAGES); }

# The HTML report's viewer, Stryker's mutation-testing-elements, is vendored: nothing is fetched at run time.
# To move to another version, change REPORT_ELEMENTS and run `make vendor-report` (npm pack checks the tarball's
# integrity against the registry); tests/verify/test_html_report.py checks the bundle against VERSION's sha256.
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
