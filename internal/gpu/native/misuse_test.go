package native

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"logitscope/internal/gpu"
)

// wantErr fails unless err is non-nil and mentions every part.
func wantErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}

func TestHandleMisuse(t *testing.T) {
	d := openDevice(t)
	p := kernel(t, d, "scale", scaleWGSL)
	other := kernel(t, d, "other", scaleWGSL)
	x := bufferWith(t, d, "x", make([]byte, 256))
	y := bufferWith(t, d, "y", make([]byte, 256))
	g := bind(t, d, p, x, y)

	_, err := d.ReadBuffer(0, 0, 4)
	wantErr(t, "read handle 0", err, "handle 0")
	_, err = d.ReadBuffer(9999, 0, 4)
	wantErr(t, "read unknown handle", err, "unknown buffer handle 9999")
	_, err = d.ReadBuffer(x, 250, 8)
	wantErr(t, "read past end", err, `"x"`, "[250, 258)", "256 bytes")
	wantErr(t, "write past end", d.WriteBuffer(x, 256, make([]byte, 4)), `"x"`)
	wantErr(t, "unaligned write", d.WriteBuffer(x, 2, make([]byte, 4)), "multiples of 4")
	wantErr(t, "copy past end", d.CopyBuffer(x, 0, y, 128, 256), `"y"`)
	wantErr(t, "copy to itself", d.CopyBuffer(x, 0, x, 128, 64), `"x"`)
	wantErr(t, "unaligned copy", d.CopyBuffer(x, 2, y, 0, 4), "multiples of 4")
	_, err = d.CreateBuffer("empty", 0)
	wantErr(t, "zero-size buffer", err, `"empty"`)

	m, err := d.CreateShaderModule("m", scaleWGSL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateComputePipeline("no such entry", m, "nope")
	wantErr(t, "bad entry point", err, `"no such entry"`, `"nope"`, "main")
	_, err = d.CreateComputePipeline("bad module", 4242, "main")
	wantErr(t, "bad module", err, `"bad module"`, "4242")

	_, err = d.CreateBindGroup(p, 1, nil)
	wantErr(t, "group out of range", err, `"scale"`, "@group(1)")
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: x}})
	wantErr(t, "missing binding", err, "@binding(1)", "not bound")
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: x}, {Binding: 1, Buffer: y}, {Binding: 7, Buffer: y}})
	wantErr(t, "extra binding", err, "@binding(7)")
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: x}, {Binding: 1, Buffer: 777}})
	wantErr(t, "bad buffer", err, "777")
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: x, Offset: 4, Size: 16}, {Binding: 1, Buffer: y}})
	wantErr(t, "misaligned offset", err, "offset 4", `"x"`)
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: x, Offset: 128, Size: 256}, {Binding: 1, Buffer: y}})
	wantErr(t, "window past end", err, `"x"`, "256 bytes")

	wantErr(t, "no bind groups", d.Dispatch(p, nil, 1, 1, 1), `"scale"`, "0 bind groups")
	wantErr(t, "foreign bind group", d.Dispatch(other, []gpu.BindGroup{g}, 1, 1, 1), `"other"`, `"scale"`)
	wantErr(t, "bad pipeline", d.Dispatch(31337, []gpu.BindGroup{g}, 1, 1, 1), "31337")
	wantErr(t, "too many workgroups", d.Dispatch(p, []gpu.BindGroup{g}, 1<<20, 1, 1), `"scale"`, "1048576")

	// Destroyed handles are reported as such; destroying twice or
	// destroying nonsense is harmless.
	d.DestroyBindGroup(g)
	d.DestroyBindGroup(g)
	d.DestroyBindGroup(0)
	wantErr(t, "destroyed bind group", d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1), "destroyed")
	d.DestroyBuffer(y)
	d.DestroyBuffer(y)
	d.DestroyBuffer(123456)
	_, err = d.ReadBuffer(y, 0, 4)
	wantErr(t, "destroyed buffer", err, "destroyed")

	// The device still works after all that.
	y2 := bufferWith(t, d, "y2", make([]byte, 256))
	if err := d.Dispatch(p, []gpu.BindGroup{bind(t, d, p, x, y2)}, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if got := bytesF32(read(t, d, y2, 0, 4))[0]; got != 1 {
		t.Errorf("y2[0] = %v, want 1", got)
	}
}

// A buffer destroyed while a bind group still names it: as in WebGPU the
// submit fails, and the device stays usable. (A buffer with a pending
// WriteBuffer is released late, see DestroyBuffer, so for it the submit
// still succeeds.)
func TestDestroyedBufferInBindGroup(t *testing.T) {
	d := openDevice(t)
	p := kernel(t, d, "scale", scaleWGSL)
	x, err := d.CreateBuffer("x", 256)
	if err != nil {
		t.Fatal(err)
	}
	y := bufferWith(t, d, "y", make([]byte, 256))
	g := bind(t, d, p, x, y)
	d.DestroyBuffer(x)
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "submit with a destroyed buffer", d.Submit(), `"x"`, "destroyed")
	if _, err := d.ReadBuffer(y, 0, 4); err != nil {
		t.Errorf("device unusable afterwards: %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	d := openDevice(t)
	b := bufferWith(t, d, "b", make([]byte, 16))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := d.ReadBuffer(b, 0, 4)
	wantErr(t, "read after close", err, "closed")
	_, err = d.CreateBuffer("late", 4)
	wantErr(t, "create after close", err, "closed")
	wantErr(t, "submit after close", d.Submit(), "closed")
	d.DestroyBuffer(b)
}

// TestOpenWithoutDriver hides the Vulkan drivers from a child process and
// checks that Open says what to install.
func TestOpenWithoutDriver(t *testing.T) {
	if os.Getenv("NATIVE_TEST_CHILD") == "1" {
		_, err := Open()
		if err == nil {
			os.Exit(3) // a driver was found anyway
		}
		os.Stderr.WriteString("OPEN ERROR: " + err.Error() + "\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenWithoutDriver$")
	cmd.Env = append(os.Environ(), "NATIVE_TEST_CHILD=1",
		"VK_ICD_FILENAMES=/nonexistent", "VK_DRIVER_FILES=/nonexistent")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Skip("a Vulkan driver is visible despite VK_ICD_FILENAMES/VK_DRIVER_FILES")
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "no WebGPU adapter: install Mesa's Vulkan drivers (apt-get install mesa-vulkan-drivers libvulkan1) or use --device cpu"
	if !strings.Contains(string(out), want) {
		t.Fatalf("child output lacks %q:\n%s", want, out)
	}
}

// TestDestroyAfterWrite covers a gogpu hazard: releasing a buffer whose
// WriteBuffer is still pending used to crash the next submission.
func TestDestroyAfterWrite(t *testing.T) {
	d := openDevice(t)
	for i := range 20 {
		x := bufferWith(t, d, "x", make([]byte, 1<<16))
		y := bufferWith(t, d, "y", make([]byte, 256))
		d.DestroyBuffer(x)
		if i%2 == 0 {
			if err := d.Submit(); err != nil {
				t.Fatal(err)
			}
		}
		read(t, d, y, 0, 4)
		d.DestroyBuffer(y)
	}
}

// TestCloseWithWorkInFlight closes right after submitting work.
func TestCloseWithWorkInFlight(t *testing.T) {
	d := openDevice(t)
	p := kernel(t, d, "fill", fillWGSL)
	big, err := d.CreateBuffer("big", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	base := bufferWith(t, d, "base", make([]byte, 16))
	g := bind(t, d, p, big, base)
	for range 4 {
		if err := d.Dispatch(p, []gpu.BindGroup{g}, 256, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 256, 1, 1); err != nil { // recorded, never submitted
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
