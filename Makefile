# wophost build. Everything is built from source with the Go toolchain;
# the only network access is the Go module proxy.

GO        ?= go
BIN       := bin
TOOLS     := .bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
LDFLAGS   := -X main.version=$(VERSION)

# Every directory under plugins/ with a main.go is a capability plugin,
# built as bin/wophost-NAME.
PLUGIN_DIRS := $(patsubst %/main.go,%,$(wildcard plugins/*/main.go))

.PHONY: all build run test test-race bench proto proto-check lint clean

all: build

build: ## Build the host, the plugins and the example packs.
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/host ./cmd/host
	$(GO) build -o $(BIN)/wophost-kv ./examples/plugins/kv
	@for d in $(PLUGIN_DIRS); do echo "$(GO) build -o $(BIN)/wophost-$${d#plugins/} ./$$d"; $(GO) build -o $(BIN)/wophost-$${d#plugins/} ./$$d || exit 1; done
	$(GO) build -o examples/packs/kvdemo/bin/kvdemo ./examples/packs/kvdemo

run: build ## Run the demo against host.hcl.example, offline.
	@echo '$$ host capabilities'
	@$(BIN)/host --config host.hcl.example capabilities
	@echo '$$ host plugins'
	@$(BIN)/host --config host.hcl.example plugins
	@echo '$$ host packs'
	@$(BIN)/host --config host.hcl.example packs
	@echo '$$ host run kvdemo.remember --input examples/inputs/remember.json'
	@$(BIN)/host --config host.hcl.example run kvdemo.remember --input examples/inputs/remember.json
	@echo '$$ host call acme.kv.get --input examples/inputs/recall.json'
	@$(BIN)/host --config host.hcl.example call acme.kv.get --input examples/inputs/recall.json
	@echo '$$ host run kvdemo.describe --input examples/inputs/recall.json   # refused: aiEnvelope is not advertised'
	@$(BIN)/host --config host.hcl.example run kvdemo.describe --input examples/inputs/recall.json || true

test: ## Run every test of both modules; the race detector covers the concurrent packages.
	$(GO) vet ./... && cd sdk && $(GO) vet ./...
	$(GO) test -count=1 ./...
	cd sdk && $(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./core/...
	cd sdk && $(GO) test -count=1 -race ./...

bench: ## Measure a ctx call through the host against a direct Invoke, and start-up time.
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 ./test/bench/

$(TOOLS)/buf:
	cd tools/buf && $(GO) build -o ../../$(TOOLS)/buf github.com/bufbuild/buf/cmd/buf
$(TOOLS)/protoc-gen-go:
	cd tools/protoc && $(GO) build -o ../../$(TOOLS)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
$(TOOLS)/protoc-gen-go-grpc:
	cd tools/protoc && $(GO) build -o ../../$(TOOLS)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc

proto: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc ## Regenerate the protocol code (pinned generators).
	$(TOOLS)/buf lint
	$(TOOLS)/buf generate

proto-check: proto ## Fail when the committed generated code is stale.
	@git diff --exit-code -- sdk/proto || (echo 'generated code in sdk/proto is stale: run make proto and commit' >&2; exit 1)
	@test -z "$$(git status --porcelain -- sdk/proto)" || (echo 'untracked generated files in sdk/proto: run make proto and commit' >&2; git status --porcelain -- sdk/proto >&2; exit 1)

lint: ## gofmt and go vet on both modules.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo 'gofmt needed:' >&2; gofmt -l $$(git ls-files '*.go') >&2; exit 1)
	$(GO) vet ./...
	cd sdk && $(GO) vet ./...

clean:
	rm -rf $(BIN) $(TOOLS) examples/packs/*/bin .wophost
