// Package prereq is how a test says that something it needs from the
// machine (a Vulkan driver, Chromium, the npm oracles) is missing: on a
// developer's machine the test skips, its message starting "missing
// COMPONENT: " so that make test's summary (cmd/testsum) groups and shows
// it; under CI, which installs every component, it fails instead, since
// a skip there would hide a broken install behind a green run.
//
// Every test that skips for a missing component goes through Missing;
// prereq's own tests hold every other Skip in the repository to a list of
// skips that are not about the machine's setup.
package prereq

import (
	"fmt"
	"os"
	"testing"
)

// Components, as skip messages and the summary name them.
const (
	Vulkan   = "Vulkan"    // a WebGPU adapter: mesa-vulkan-drivers libvulkan1 (lavapipe)
	Chromium = "Chromium"  // /usr/bin/chromium, for the page's end-to-end tests
	Node     = "Node.js"   // node and npm, for the tokenizer oracle
	LlamaCpp = "llama.cpp" // node-llama-cpp's libraries, cc and git, for the llama.cpp harness
	Slurm    = "Slurm"     // slurm-wlm and munge, for a single-node cluster that runs job arrays
)

// Missing skips tb because component is missing, why saying what failed
// and how to install it; under CI (InCI) it fails tb instead.
func Missing(tb testing.TB, component, why string) {
	tb.Helper()
	msg := Message(component, why)
	if InCI() {
		tb.Fatalf("%s (CI=%s: CI installs %s, so a missing one fails the test instead of skipping it)", msg, os.Getenv("CI"), component)
	}
	tb.Skip(msg)
}

// Message is the skip message for a missing component: "missing
// COMPONENT: why".
func Message(component, why string) string { return fmt.Sprintf("missing %s: %s", component, why) }

// InCI says whether the tests run under CI: $CI set (GitHub Actions and
// .ci/run set it to true) to anything but "" or "false".
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}
