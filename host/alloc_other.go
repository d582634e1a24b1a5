//go:build !linux

package host

import "context"

// withAllocator keeps wazero's default memory where mmap is not wired up.
func withAllocator(ctx context.Context) context.Context { return ctx }
