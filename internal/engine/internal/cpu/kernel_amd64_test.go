package cpu

// asmKernels is whether the assembly kernels are installed.
func asmKernels() bool { return hasAVX512 }
