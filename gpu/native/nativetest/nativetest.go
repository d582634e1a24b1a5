// Package nativetest gives tests the native WebGPU device, as
// net/http/httptest gives them a server: one device per test binary,
// opened on first use and kept for the binary's life.
package nativetest

import (
	"os"
	"sync"
	"testing"

	"logitscope/gpu"
	"logitscope/gpu/native"
)

var shared struct {
	once sync.Once
	dev  gpu.Device
	err  error
}

// Device is the binary's device. Without an adapter it skips the test on
// a developer machine, saying what to install, and fails it in CI, which
// installs Mesa's Vulkan drivers: a missing driver there is a broken
// setup, not a reason to skip.
func Device(t testing.TB) gpu.Device {
	t.Helper()
	shared.once.Do(func() { shared.dev, shared.err = native.Open() })
	if shared.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(shared.err)
		}
		t.Skip(shared.err)
	}
	return shared.dev
}
