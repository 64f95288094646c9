# Arbiter's tasks. `make run` serves on http://localhost:8080 with the
# embedded SQLite store; `make test` runs every test.

GO ?= go
BIN := bin/arbiter

.PHONY: run test build lint generate fuzz clean

run: build
	./$(BIN) serve

test:
	$(GO) test -count=1 ./...

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

clean:
	rm -rf bin
