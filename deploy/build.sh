#!/bin/sh
# Builds what the container image holds into OUT (default .out/image):
#   OUT/serve  the server, a static binary (CGO_ENABLED=0: no libc needed)
#   OUT/web/   the page: its static files, ui.wasm, engine.wasm, simd.wasm
#              and the wasm_exec.js of the Go that built ui.wasm (make web)
# The Dockerfile runs this very script, and so do `make image-files` and
# cmd/serve's TestContainerRecipe, which start the result as the image's
# ENTRYPOINT says: the recipe is tested where no Docker engine runs.
set -eu
OUT=${1:-.out/image}
GO=${GO:-go}
mkdir -p "$OUT/web"
GOOS=wasip1 GOARCH=wasm "$GO" build -buildmode=c-shared -o "$OUT/web/engine.wasm" ./wasm
GOOS=js GOARCH=wasm "$GO" build -o "$OUT/web/ui.wasm" ./web/ui
cp web/static/* "$OUT/web/"
cp "$("$GO" env GOROOT)/lib/wasm/wasm_exec.js" internal/engine/wasmsimd/simd.wasm "$OUT/web/"
CGO_ENABLED=0 "$GO" build -trimpath -o "$OUT/serve" ./cmd/serve
