# Arbiter's tasks. `make run` serves on http://localhost:8080 with the
# embedded SQLite store; `make test` runs every test.

GO ?= go
BIN := bin/arbiter

.PHONY: dist image image-check deploy-check package-check run test test-go test-python test-typescript sdk-deps generator-deps sdk-wire bench-sdk build lint contract-lint generate generate-check fuzz bench bench-micro postgres postgres-check clean

# run says what it does first: the first build downloads and compiles the
# modules, minutes in which go build itself prints nothing.
run:
	@echo "make run: building $(BIN) (the first build downloads and compiles its Go modules: a few minutes; later builds take seconds)"
	@$(MAKE) --no-print-directory build
	@echo "make run: starting $(BIN) serve with the embedded SQLite store (arbiter.db); it logs the address it listens on, http://localhost:8080 by default. Ctrl-C stops it."
	./$(BIN) serve

test: test-go test-python test-typescript

# The Go tests; the generator tests in openapi/ run the binary built here
# against the clients third-party generators write (see generator-deps).
test-go: build
	ARBITER_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 30m ./...

# The Python SDK (sdk/python): mypy --strict on the package (and on
# tests/typecheck_params.py, which holds what mypy must refuse), then its tests
# and the LangGraph and OpenAI Agents adapters' against a real arbiter serve
# built here (SQLite; Postgres when ARBITER_TEST_DATABASE_URL is set). The
# virtual environment comes from the pinned sdk/python/requirements-dev.txt.
PYVENV := sdk/python/.venv
TSDIR := sdk/typescript
PYTHON ?= python3

# sdk-deps installs what the SDKs' tests need, each from its own pinned
# list: the Python packages into sdk/python/.venv, the TypeScript SDK's Node
# packages from sdk/typescript/package-lock.json. Only when missing or stale.
sdk-deps: $(PYVENV)/.installed $(TSDIR)/node_modules/.package-lock.json

# generator-deps installs the OpenAPI generators the document's tests run
# (openapi-python-client, and openapi-generator's jar in the
# openapi-generator-cli package; Java runs it) with what the Python clients
# they write import, from openapi/testdata/generators/requirements.txt into
# a virtual environment beside it. Only when missing or stale.
GENVENV := openapi/testdata/generators/.venv
generator-deps: $(GENVENV)/.installed

$(GENVENV)/.installed: openapi/testdata/generators/requirements.txt
	$(PYTHON) -m venv $(GENVENV)
	$(GENVENV)/bin/pip install -q --disable-pip-version-check -r openapi/testdata/generators/requirements.txt
	touch $@

$(PYVENV)/.installed: sdk/python/requirements-dev.txt
	$(PYTHON) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q --disable-pip-version-check -r sdk/python/requirements-dev.txt
	touch $@

test-python: $(PYVENV)/.installed build
	cd sdk/python && .venv/bin/mypy
	cd sdk/python && PYTHONPATH=src ARBITER_BIN=$(CURDIR)/$(BIN) .venv/bin/pytest -q

# The TypeScript SDK (sdk/typescript): its wire types must be what
# openapi-typescript makes of openapi/openapi.json today (sdk-wire
# regenerates them), tsc --strict, then node's test runner against a real
# arbiter serve built here. Node packages from its own lockfile.
$(TSDIR)/node_modules/.package-lock.json: $(TSDIR)/package-lock.json
	cd $(TSDIR) && npm ci --no-audit --no-fund

# sdk-wire regenerates both SDKs' wire from openapi/openapi.json: the
# TypeScript types (openapi-typescript) and the Python models
# (sdk/python/scripts/generate_models.py, the standard library only); the
# SDKs' tests fail while either differs from the document.
sdk-wire: $(TSDIR)/node_modules/.package-lock.json
	cd $(TSDIR) && npx --no-install openapi-typescript ../../openapi/openapi.json -o src/wire.ts
	$(PYTHON) sdk/python/scripts/generate_models.py openapi/openapi.json sdk/python/src/arbiterhq/_models.py

test-typescript: $(TSDIR)/node_modules/.package-lock.json build
	@cd $(TSDIR) && npx --no-install openapi-typescript ../../openapi/openapi.json -o dist-wire.ts >/dev/null 2>&1 && \
		if ! cmp -s dist-wire.ts src/wire.ts; then rm -f dist-wire.ts; \
		echo "sdk/typescript/src/wire.ts differs from openapi/openapi.json; run 'make sdk-wire' and commit"; exit 1; fi; rm -f dist-wire.ts
	cd $(TSDIR) && npx --no-install tsc -p tsconfig.json
	cd $(TSDIR) && ARBITER_BIN=$(CURDIR)/$(BIN) node --test dist/test/*.test.js

build:
	$(GO) build -o $(BIN) ./cmd/arbiter

# The River side of the benchmark (cmd/arbiter-bench/river) is its own Go
# module, so that River stays out of the arbiter binary's dependencies:
# ./... in the main module skips it, so lint vets it on its own (gofmt -l .
# walks every file). It has no tests.
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd cmd/arbiter-bench/river && $(GO) vet ./...
	cd cmd/arbiter-image && $(GO) vet ./...
	cd deploy && GOFLAGS=-mod=mod $(GO) vet ./...

# contract-lint runs two third-party OpenAPI linters on the API's document,
# Redocly CLI (redocly.yaml, .redocly.lint-ignore.yaml) and Spectral
# (.spectral.yaml), from the locked Node packages; either failing on an
# error fails the target. Redocly's telemetry and update check are off.
contract-lint: node_modules/.package-lock.json
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly lint openapi/openapi.json
	npx --no-install spectral lint --fail-severity=error openapi/openapi.json

# generate rebuilds the generated files, which are committed so `go build`
# needs neither Node nor the templ CLI: the views' *_templ.go (templ, a tool
# in go.mod), static/app.css (Tailwind CSS v3) and static/htmx.min.js (from
# the htmx.org package). Node packages come from package-lock.json.
generate: node_modules/.package-lock.json
	$(GO) generate ./...
	$(GO) tool templ generate
	npx --no-install tailwindcss -c tailwind.config.js -i static/src/app.css -o static/app.css --minify
	cp node_modules/htmx.org/dist/htmx.min.js static/htmx.min.js

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund

# generate-check installs the locked Node packages afresh, regenerates, and
# fails when that changed or added any file: what CI runs.
generate-check:
	npm ci --no-audit --no-fund
	$(MAKE) generate
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "generated files differ from the committed ones; run 'make generate' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

# fuzz runs the task-create decoder's fuzz target for a while; its seed
# corpus in testdata/fuzz already runs in `make test`.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseTaskCreate -fuzztime 60s .

# postgres gives this machine the PostgreSQL CI has (Debian's 15 on
# 127.0.0.1:5432, trust for local TCP, the database arbiter_test), installing
# and starting only what is missing: the script CI runs.
postgres:
	scripts/dev-postgres

# postgres-check fails, saying what to run, when no PostgreSQL answers on
# 127.0.0.1:5432.
postgres-check:
	@pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || { \
		echo "no PostgreSQL answers on 127.0.0.1:5432; 'make postgres' installs and starts one (Debian/Ubuntu)"; exit 1; }

# bench measures the service against the database's own ceiling on the local
# Postgres (see docs/benchmarks.md); BENCH_FLAGS=-duration=30s and so on.
bench: postgres-check build
	$(GO) build -o bin/arbiter-bench ./cmd/arbiter-bench
	cd cmd/arbiter-bench/river && $(GO) build -o ../../../bin/river-bench .
	./bin/arbiter-bench $(BENCH_FLAGS)
	$(MAKE) bench-sdk

# bench-sdk measures each SDK's overhead on a create-and-wait against raw
# HTTP on the same server (SQLite, the rules backend): 300 of each,
# alternating; the target is under 1 ms.
bench-sdk: build $(PYVENV)/.installed $(TSDIR)/node_modules/.package-lock.json
	ARBITER_BIN=$(CURDIR)/$(BIN) $(PYVENV)/bin/python sdk/python/bench/overhead.py 300
	cd $(TSDIR) && npx --no-install tsc -p tsconfig.json && ARBITER_BIN=$(CURDIR)/$(BIN) node dist/bench/overhead.js 300

# bench-micro runs the Go micro-benchmarks: key check, task encoding, request
# validation.
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The release: VERSION and COMMIT are stamped into the binaries and the
# image (arbiter version prints them).
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
export VERSION COMMIT
HELM_VERSION := v3.22.0

# dist builds the release archives into dist/: arbiter for linux and darwin
# on amd64 and arm64 (static, -trimpath, stamped), each with README.md,
# LICENSE and docs/; a CycloneDX SBOM of each binary; SHA256SUMS.
dist:
	scripts/dist

# image builds the OCI image from dist/'s linux binaries without a
# container engine (cmd/arbiter-image, its own module): dist/image (an OCI
# layout, linux/amd64 and linux/arm64) and dist/arbiter_VERSION_oci.tar.
image:
	cd cmd/arbiter-image && $(GO) run . -dist $(CURDIR)/dist

# image-check builds the image again in its tests, reads its config back
# and runs its linux/amd64 root filesystem in a chroot (as root, with
# unshare); the Dockerfile is held to the builder. Needs make dist.
image-check:
	cd cmd/arbiter-image && ARBITER_DIST=$(CURDIR)/dist ARBITER_REQUIRE_IMAGE=1 $(GO) test -count=1 -v ./...

# bin/helm is Helm from the Go module proxy, pinned.
bin/helm:
	GOBIN=$(CURDIR)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# deploy-check checks deploy/ (its own module): the compose file with the
# Compose Specification's loader, the Helm chart with helm lint and helm
# template decoded strictly into Kubernetes' types, the systemd units with
# systemd-analyze, the licence's every mention, and dist/'s archives,
# SBOMs and checksums. Needs make dist. It requires the main module (its
# tests read environments with config.FromEnv) through a replace, so a new
# dependency of the main module would leave its go.mod behind: -mod=mod
# lets go bring it along rather than fail.
deploy-check: bin/helm
	cd deploy && GOFLAGS=-mod=mod HELM=$(CURDIR)/bin/helm ARBITER_DIST=$(CURDIR)/dist ARBITER_REQUIRE_DIST=1 ARBITER_REQUIRE_DEPLOY_TOOLS=1 \
		$(GO) test -count=1 -v ./...

# package-check is what CI runs of the release: dist, image, their checks.
package-check: dist image image-check deploy-check

clean:
	rm -rf bin dist
