package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"logitscope/internal/format/dump"
	"logitscope/internal/sys/cachedir"
	"logitscope/internal/sys/tempfile"
)

// BenchmarkReport runs `logitscope report` as a user would, in a process
// of its own, on two binary dumps of Qwen's vocabulary (151,936), and
// reports the logits analysed per second (both sides' bytes) beside cat's
// read of the same files in the same run, and the process's peak RSS: the
// memory should not grow with the rows. The dumps (1.2 GB a side per
// 1,000 rows) are generated once into the cache. -bench 'Report/rows=2000'
// picks one size.
func BenchmarkReport(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "logitscope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, rows := range []int{2000, 20000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ref, test := benchDumps(b, rows, 151936)
			bytes := float64(2 * (dump.HeaderSize + 4*rows*151936))
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			catStart := time.Now()
			cat := exec.Command("cat", ref, test)
			cat.Stdout = null
			cat.Stderr = os.Stderr
			if err := cat.Run(); err != nil {
				b.Fatalf("cat: %v", err)
			}
			catTime := time.Since(catStart)
			var rss int64
			start := time.Now()
			for b.Loop() {
				cmd := exec.Command(bin, "report", "--ref", ref, "--test", test)
				cmd.Stdout, cmd.Stderr = null, os.Stderr
				if err := cmd.Run(); err != nil {
					b.Fatalf("report: %v", err)
				}
				rss = max(rss, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss*1024)
			}
			per := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(bytes/per/1e9, "logits-GB/s")
			b.ReportMetric(bytes/catTime.Seconds()/1e9, "cat-GB/s")
			b.ReportMetric(float64(rows)/per, "rows/s")
			b.ReportMetric(float64(rss)/1e6, "peakRSS-MB")
		})
	}
}

// benchDumps writes (once) a reference dump of rows × vocab logits, about
// normal with a few strong tokens per row as real logits have, and a test
// dump that is the reference plus noise, into the cache.
func benchDumps(b *testing.B, rows, vocab int) (ref, test string) {
	root, err := cachedir.Root("the report benchmark's dumps")
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, "bench-report", fmt.Sprintf("%dx%d", rows, vocab))
	ref, test = filepath.Join(dir, "ref.dump"), filepath.Join(dir, "test.dump")
	if _, err := os.Stat(test); err == nil {
		return ref, test
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, side := range []struct {
		path  string
		noise float32
	}{{ref, 0}, {test, 0.05}} {
		tmp, err := tempfile.Write(side.path, func(w io.Writer) error { return writeBenchDump(w, rows, vocab, side.noise) })
		if err == nil {
			err = tempfile.Rename(tempfile.Move{Temp: tmp, Path: side.path})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return ref, test
}

func writeBenchDump(w io.Writer, rows, vocab int, noise float32) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var hdr [dump.HeaderSize]byte
	binary.LittleEndian.PutUint64(hdr[0:], uint64(rows))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(vocab))
	bw.Write(hdr[:])
	// A base row of normals, rotated per row; the same seed on both sides,
	// and the noise from another stream.
	state, nstate := uint64(1), uint64(2)
	next := func(s *uint64) float32 {
		*s ^= *s << 13
		*s ^= *s >> 7
		*s ^= *s << 17
		return float32(*s>>40)/(1<<24) - 0.5
	}
	base := make([]float32, vocab)
	for i := range base {
		base[i] = 3 * (next(&state) + next(&state) + next(&state))
	}
	var b [4]byte
	for r := range rows {
		for v := range vocab {
			z := base[(v+r*7919)%vocab]
			if v == (r*31)%vocab {
				z += 12 // the row's clear favourite
			}
			z += noise * next(&nstate)
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(z))
			bw.Write(b[:])
		}
	}
	return bw.Flush()
}
