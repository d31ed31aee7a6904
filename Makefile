# irqpilot — see README.md. `make run` and `make test` install what they need.
GO      ?= go
BIN     := bin/irqpilot
PKGS    := ./...

.PHONY: all build run test deps tools lint bench fuzz clean

all: build

# Debian packages the tests and workloads need (idempotent; needs root).
DEB_PKGS := memcached libmemcached-tools nginx-light wrk fio sysstat irqbalance tmux iproute2 ethtool stress-ng systemd procps
deps:
	@./scripts/install-deps.sh $(DEB_PKGS)

build:
	$(GO) build -o $(BIN) ./cmd/irqpilot

run: deps build
	./$(BIN) inventory

tools:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest

lint: tools
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$$($(GO) env GOPATH)/bin/staticcheck $(PKGS)

test: deps lint
	$(GO) test -race -timeout 20m $(PKGS)

bench: build
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz:
	$(GO) test ./internal/cpuset -run '^$$' -fuzz FuzzParse -fuzztime 60s
	$(GO) test ./internal/kernel -run '^$$' -fuzz FuzzParseInterrupts -fuzztime 60s

clean:
	rm -rf bin
