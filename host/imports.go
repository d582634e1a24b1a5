package host

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/gpu"
)

// errStatus is what a failed import returns; last_error has the message.
const errStatus = -1

// gpuModule builds the "gpu" host module: each function maps to one
// gpu.Device method, handles 1:1 (wasm/ABI.md).
func gpuModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder("gpu")
	fn := func(name string, f any) { b.NewFunctionBuilder().WithFunc(f).Export(name) }

	fn("info", func(ctx context.Context, m api.Module, p, cap uint32) uint32 {
		js, _ := json.Marshal(stateOf(ctx).dev.Info())
		return put(m, p, cap, js)
	})
	fn("last_error", func(ctx context.Context, m api.Module, p, cap uint32) uint32 {
		return put(m, p, cap, []byte(stateOf(ctx).lastErr))
	})
	fn("create_buffer", func(ctx context.Context, m api.Module, label, labelLen uint32, size int64) int32 {
		return handle(ctx, func(st *state) (uint32, error) {
			l, err := str(m, label, labelLen)
			if err != nil {
				return 0, err
			}
			h, err := st.dev.CreateBuffer(l, size)
			return uint32(h), err
		})
	})
	fn("write_buffer", func(ctx context.Context, m api.Module, buf uint32, offset int64, p, n uint32) int32 {
		return status(ctx, func(st *state) error {
			data, err := bytes(m, p, n)
			if err != nil {
				return err
			}
			return st.dev.WriteBuffer(gpu.Buffer(buf), offset, data)
		})
	})
	fn("destroy_buffer", func(ctx context.Context, buf uint32) { stateOf(ctx).dev.DestroyBuffer(gpu.Buffer(buf)) })
	fn("create_shader_module", func(ctx context.Context, m api.Module, label, labelLen, src, srcLen uint32) int32 {
		return handle(ctx, func(st *state) (uint32, error) {
			l, err := str(m, label, labelLen)
			if err != nil {
				return 0, err
			}
			wgsl, err := str(m, src, srcLen)
			if err != nil {
				return 0, err
			}
			h, err := st.dev.CreateShaderModule(l, wgsl)
			return uint32(h), err
		})
	})
	fn("create_compute_pipeline", func(ctx context.Context, m api.Module, label, labelLen, mod, entry, entryLen uint32) int32 {
		return handle(ctx, func(st *state) (uint32, error) {
			l, err := str(m, label, labelLen)
			if err != nil {
				return 0, err
			}
			e, err := str(m, entry, entryLen)
			if err != nil {
				return 0, err
			}
			h, err := st.dev.CreateComputePipeline(l, gpu.Module(mod), e)
			return uint32(h), err
		})
	})
	fn("create_bind_group", func(ctx context.Context, m api.Module, pipe, group, p, n uint32) int32 {
		return handle(ctx, func(st *state) (uint32, error) {
			raw, err := bytes(m, p, n*24)
			if err != nil {
				return 0, err
			}
			entries := make([]gpu.Binding, n)
			for i := range entries {
				o := raw[24*i:]
				entries[i] = gpu.Binding{
					Binding: binary.LittleEndian.Uint32(o[0:]),
					Buffer:  gpu.Buffer(binary.LittleEndian.Uint32(o[4:])),
					Offset:  int64(binary.LittleEndian.Uint64(o[8:])),
					Size:    int64(binary.LittleEndian.Uint64(o[16:])),
				}
			}
			h, err := st.dev.CreateBindGroup(gpu.Pipeline(pipe), group, entries)
			return uint32(h), err
		})
	})
	fn("destroy_bind_group", func(ctx context.Context, g uint32) { stateOf(ctx).dev.DestroyBindGroup(gpu.BindGroup(g)) })
	fn("dispatch", func(ctx context.Context, m api.Module, pipe, p, n, x, y, z uint32) int32 {
		return status(ctx, func(st *state) error {
			raw, err := bytes(m, p, n*4)
			if err != nil {
				return err
			}
			groups := make([]gpu.BindGroup, n)
			for i := range groups {
				groups[i] = gpu.BindGroup(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			return st.dev.Dispatch(gpu.Pipeline(pipe), groups, x, y, z)
		})
	})
	fn("copy_buffer", func(ctx context.Context, src uint32, srcOff int64, dst uint32, dstOff, size int64) int32 {
		return status(ctx, func(st *state) error {
			return st.dev.CopyBuffer(gpu.Buffer(src), srcOff, gpu.Buffer(dst), dstOff, size)
		})
	})
	fn("submit", func(ctx context.Context) int32 {
		return status(ctx, func(st *state) error { return st.dev.Submit() })
	})
	fn("read_buffer", func(ctx context.Context, m api.Module, buf uint32, offset, size int64, dst uint32) int32 {
		return status(ctx, func(st *state) error {
			data, err := st.dev.ReadBuffer(gpu.Buffer(buf), offset, size)
			if err != nil {
				return err
			}
			if !m.Memory().Write(dst, data) {
				return fmt.Errorf("read_buffer: [%#x, +%d) is outside guest memory", dst, len(data))
			}
			return nil
		})
	})
	fn("upload_file", func(ctx context.Context, m api.Module, buf uint32, offset int64, p, n uint32, fileOffset, length int64) int32 {
		return status(ctx, func(st *state) error {
			guest, err := str(m, p, n)
			if err != nil {
				return err
			}
			return st.uploadFile(gpu.Buffer(buf), offset, guest, fileOffset, length)
		})
	})
	return b
}

// uploadFile serves upload_file: the guest names a file under Mount; its
// bytes go from the host file to the buffer without entering the guest.
func (st *state) uploadFile(b gpu.Buffer, offset int64, guest string, fileOffset, length int64) error {
	rel, ok := strings.CutPrefix(path.Clean(guest), Mount+"/")
	if !ok || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return fmt.Errorf("upload_file: %q is not a file under %s", guest, Mount)
	}
	if length < 0 || fileOffset < 0 {
		return fmt.Errorf("upload_file: %s: offset %d, length %d", guest, fileOffset, length)
	}
	file := filepath.Join(st.modelDir, filepath.FromSlash(rel))
	if fu, ok := st.dev.(gpu.FileUploader); ok {
		return fu.UploadFile(b, offset, file, fileOffset, length)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("upload_file: %w", err)
	}
	defer f.Close()
	data := make([]byte, (length+3)/4*4)
	if _, err := f.ReadAt(data[:length], fileOffset); err != nil {
		return fmt.Errorf("upload_file: %s: reading %d bytes at %d: %w", guest, length, fileOffset, err)
	}
	return st.dev.WriteBuffer(b, offset, data)
}

// handle runs a creating call: the handle, or errStatus with the message
// kept for last_error. Handles above MaxInt32 would read as errors.
func handle(ctx context.Context, f func(*state) (uint32, error)) int32 {
	var h uint32
	st := status(ctx, func(st *state) (err error) {
		h, err = f(st)
		if err == nil && int32(h) <= 0 {
			err = fmt.Errorf("handle %d does not fit the ABI's positive i32", h)
		}
		return err
	})
	if st < 0 {
		return st
	}
	return int32(h)
}

func status(ctx context.Context, f func(*state) error) int32 {
	st := stateOf(ctx)
	if err := f(st); err != nil {
		st.lastErr = err.Error()
		return errStatus
	}
	return 0
}

// bytes views guest memory; the view is valid until the guest runs again.
func bytes(m api.Module, p, n uint32) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b, ok := m.Memory().Read(p, n)
	if !ok {
		return nil, fmt.Errorf("[%#x, +%d) is outside guest memory", p, n)
	}
	return b, nil
}

func str(m api.Module, p, n uint32) (string, error) {
	b, err := bytes(m, p, n)
	return string(b), err
}

// put writes data to (p, cap) when it fits and returns its length anyway,
// so a caller with too small a buffer learns the size to retry with.
func put(m api.Module, p, cap uint32, data []byte) uint32 {
	if int(cap) >= len(data) && !m.Memory().Write(p, data) {
		return 0
	}
	return uint32(len(data))
}
