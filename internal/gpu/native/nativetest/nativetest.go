// Package nativetest gives tests the native WebGPU device, as
// net/http/httptest gives them a server: one device per test binary,
// opened on first use and kept for the binary's life.
package nativetest

import (
	"sync"
	"testing"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/sys/prereq"
)

var shared struct {
	once sync.Once
	dev  gpu.Device
	err  error
}

// Device is the binary's device. Without an adapter it skips the test on
// a developer machine, saying what to install, and fails it in CI, which
// installs Mesa's Vulkan drivers (prereq.Missing).
func Device(t testing.TB) gpu.Device {
	t.Helper()
	shared.once.Do(func() { shared.dev, shared.err = native.Open() })
	if shared.err != nil {
		prereq.Missing(t, prereq.Vulkan, shared.err.Error())
	}
	return shared.dev
}
