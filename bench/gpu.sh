#!/bin/sh
# bench/gpu.sh: make bench's table of logitscope beside its peers on a
# machine with a real GPU (NVIDIA or AMD, through Vulkan), in one run:
# the CPU engine beside llama.cpp's CPU backend, the GPU engine on the
# native WebGPU beside llama.cpp's Vulkan build on the GPU, and the page
# in Chromium beside wllama, with ours / peer ratios, peak RSS, weight
# GB/s beside the copy bandwidth and dispatches per token.
#
#   bench/gpu.sh [--lavapipe] [--no-install] [PRESET]
#
# PRESET is make bench's (default smollm2-135m, whose every row runs;
# '^qwen2.5-0.5b$' is the whole 0.5B, whose ONNX export may pass
# protobuf's 2 GB and skip, which fails the script).
# It installs what it needs (Debian/Ubuntu packages when run as root: the
# Vulkan loader and Mesa's drivers, vulkaninfo, Node and npm, cc, git,
# Chromium, PyTorch and onnx for the ONNX export; then make deps
# bench-deps), checks that Vulkan sees a GPU,
# and runs make bench with LOGITSCOPE_BENCH_GPU=real: a row that ends up
# on a CPU driver (lavapipe, SwiftShader) fails instead of printing a CPU
# number as a GPU one. --lavapipe runs the same on Mesa's CPU driver (to
# try the script on a machine without a GPU); --no-install skips apt-get.
# llama.cpp compiles its Vulkan shaders on its first run on a device
# (minutes; the driver's cache keeps them), in the warm-up pass.
set -eu
cd "$(dirname "$0")/.."

mode=real install=1 preset=smollm2-135m
for arg in "$@"; do
	case $arg in
	--lavapipe) mode=lavapipe ;;
	--no-install) install=0 ;;
	-*) echo "usage: bench/gpu.sh [--lavapipe] [--no-install] [PRESET]" >&2; exit 2 ;;
	*) preset=$arg ;;
	esac
done

fail() { echo "bench/gpu.sh: $*" >&2; exit 1; }

if [ $install = 1 ]; then
	if [ "$(id -u)" = 0 ]; then
		apt-get update -q
		apt-get install -y -q libvulkan1 mesa-vulkan-drivers vulkan-tools nodejs npm gcc git chromium python3-torch python3-onnx
	else
		echo "bench/gpu.sh: not root: skipping apt-get (needs libvulkan1 mesa-vulkan-drivers vulkan-tools nodejs npm gcc git chromium python3-torch python3-onnx)" >&2
	fi
fi
command -v go >/dev/null || fail "Go is not installed (https://go.dev/dl/; go.mod says which version)"
command -v vulkaninfo >/dev/null || fail "vulkaninfo not found (apt-get install vulkan-tools)"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# The devices Vulkan sees, by type: a GPU run needs one that is not a CPU.
devices=$(vulkaninfo --summary 2>/dev/null | grep -E 'deviceType|deviceName' || true)
echo "$devices"
if [ $mode = real ]; then
	echo "$devices" | grep -Eq 'PHYSICAL_DEVICE_TYPE_(DISCRETE|INTEGRATED|VIRTUAL)_GPU' ||
		fail "Vulkan sees no GPU (only: $(echo "$devices" | tr -s ' \n' ' ')); install the GPU's Vulkan driver (NVIDIA: the proprietary driver's Vulkan ICD; AMD: mesa-vulkan-drivers), or pass --lavapipe"
	export LOGITSCOPE_BENCH_GPU=real
else
	echo "$devices" | grep -q llvmpipe || fail "no lavapipe (apt-get install mesa-vulkan-drivers)"
	unset LOGITSCOPE_BENCH_GPU
fi

make deps bench-deps
for dir in internal/peer/llamacpp/testdata/npm-vulkan web/e2e/testdata/peers; do
	[ -d $dir/node_modules ] || fail "$dir/node_modules missing: npm ci failed (is npm installed?)"
done
# make bench's Go benchmarks skip a part whose peer is missing; here a skip
# would leave a hole in the table, so the output is checked for skips too.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
make bench BENCH="cpu gpu page" PRESET="$preset" 2>&1 | tee "$out"
grep -q -- '--- SKIP' "$out" && fail "a benchmark skipped (see above): its row is missing"
grep -q '^FAIL' "$out" && fail "a benchmark failed (see above)"
grep -q 'Vulkan/.*/vulkan' "$out" || fail "no Vulkan row in the table"
exit 0
