# Arbiter's tasks. `make run` serves on http://localhost:8080 with the
# embedded SQLite store; `make test` runs every test.

GO ?= go
BIN := bin/arbiter

.PHONY: run test build lint generate fuzz bench bench-micro clean

run: build
	./$(BIN) serve

test:
	$(GO) test -race -count=1 ./...

build:
	$(GO) build -o $(BIN) ./cmd/arbiter

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

generate:
	$(GO) generate ./...

# fuzz runs the task-create decoder's fuzz target for a while; its seed
# corpus in testdata/fuzz already runs in `make test`.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseTaskCreate -fuzztime 60s .

# bench measures the service against the database's own ceiling on the local
# Postgres (see docs/benchmarks.md); BENCH_FLAGS=-duration=30s and so on.
bench: build
	$(GO) build -o bin/arbiter-bench ./cmd/arbiter-bench
	./bin/arbiter-bench $(BENCH_FLAGS)

# bench-micro runs the Go micro-benchmarks: key check, task encoding, request
# validation.
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
