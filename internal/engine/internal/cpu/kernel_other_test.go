//go:build !amd64

package cpu

func asmKernels() bool { return false }
