//go:build wasip1

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"logitscope/internal/gpu"
)

// probeWGSL adds one to a word: enough to exercise shader, pipeline, bind
// group and dispatch imports.
const probeWGSL = `@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@compute @workgroup_size(1) fn main() { a[0] = a[0] + 1u; }`

// ls_probe exercises every gpu import that a model load does not (copy,
// readback, bind group destruction) and upload_file on the file named by
// (ptr, len), checking the results. For the hosts' ABI tests.
//
//go:wasmexport ls_probe
func lsProbe(p, n uint32) int32 {
	return guard(func() (int32, error) {
		name, err := mem(p, n)
		if err != nil {
			return 0, err
		}
		d, err := newHostDevice()
		if err != nil {
			return 0, err
		}
		return 0, probe(d, string(name))
	})
}

func probe(d *hostDevice, file string) error {
	a, err := d.CreateBuffer("probe-a", 16)
	if err != nil {
		return err
	}
	defer d.DestroyBuffer(a)
	b, err := d.CreateBuffer("probe-b", 16)
	if err != nil {
		return err
	}
	defer d.DestroyBuffer(b)
	if err := d.WriteBuffer(a, 0, binary.LittleEndian.AppendUint32(nil, 41)); err != nil {
		return err
	}
	m, err := d.CreateShaderModule("probe", probeWGSL)
	if err != nil {
		return err
	}
	pipe, err := d.CreateComputePipeline("probe", m, "main")
	if err != nil {
		return err
	}
	g, err := d.CreateBindGroup(pipe, 0, []gpu.Binding{{Binding: 0, Buffer: a}})
	if err != nil {
		return err
	}
	defer d.DestroyBindGroup(g)
	if err := d.Dispatch(pipe, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
		return err
	}
	if err := d.CopyBuffer(a, 0, b, 4, 4); err != nil {
		return err
	}
	if err := d.Submit(); err != nil {
		return err
	}
	got, err := d.ReadBuffer(b, 4, 4)
	if err != nil {
		return err
	}
	if v := binary.LittleEndian.Uint32(got); v != 42 {
		return fmt.Errorf("probe: dispatch and copy gave %d, want 42", v)
	}

	want, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	want = want[1:8] // an odd offset and a length to pad to 8
	if err := d.UploadFile(b, 0, file, 1, int64(len(want))); err != nil {
		return err
	}
	got, err = d.ReadBuffer(b, 0, 8)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, append(want, 0)) {
		return fmt.Errorf("probe: upload_file gave %q, want %q", got, want)
	}
	return nil
}
