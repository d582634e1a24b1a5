// Package kldbase reads llama.cpp's --kl-divergence-base file: the file
// `llama-perplexity --kl-divergence-base FILE` writes from a reference
// model, for later runs of quantized models to be scored against. It is a
// reference capture as a llama.cpp user has it: the tokens, then the
// log-probabilities of the positions llama.cpp scores, 16 bits each.
//
// Layout (little-endian, as tools/perplexity/perplexity.cpp writes it):
//
//	"_logits_"                  8 bytes
//	n_ctx, n_vocab, n_chunk     int32 each
//	tokens                      int32 (n_chunk·n_ctx): chunk c is tokens[c·n_ctx:(c+1)·n_ctx]
//	rows                        per chunk, n_ctx−1−n_ctx/2 rows: positions n_ctx/2 … n_ctx−2,
//	                            each predicting the token after it; a row is
//	                            nv = 2·⌈n_vocab/2⌉+4 uint16: float32 scale, float32 min_log_prob,
//	                            then q[n_vocab] (padded to even), ln p = scale·q + min_log_prob
//
// llama.cpp clamps a row's range to 16 below its top logit: every token
// at or below that floor is stored as q = 0, and its own --kl-divergence
// leaves tokens below ln p = −16 out of the sum. Pair reads such a row
// beside a test capture with those tokens taking the test's
// log-probability where it lies under the floor (the closest value the
// file allows), so that, as in llama.cpp, they add nothing to the KLD,
// nor to σ.
package kldbase

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"logitscope/internal/format/dump"
)

// Magic opens every base file.
const Magic = "_logits_"

// headerSize is the magic and the three counts.
const headerSize = len(Magic) + 12

// File is an open base file. Its tokens are read whole (4 bytes a token,
// small beside the rows); the rows are read when asked for.
type File struct {
	Name               string
	Ctx, Vocab, Chunks int
	Tokens             []int // Chunks·Ctx
	r                  io.ReaderAt
	rowsAt, rowBytes   int64
	closeFile          func() error
}

// First is the first position of a chunk that llama.cpp scores; it keeps
// the rows from First to Ctx−2, which predict tokens First+1 … Ctx−1.
func (f *File) First() int { return f.Ctx / 2 }

// Scored is how many rows each chunk has.
func (f *File) Scored() int { return f.Ctx - 1 - f.First() }

// Rows is the rows of the whole file.
func (f *File) Rows() int { return f.Chunks * f.Scored() }

// Targets are the tokens the rows predict, in row order.
func (f *File) Targets() []int {
	t := make([]int, 0, f.Rows())
	for c := range f.Chunks {
		t = append(t, f.Tokens[c*f.Ctx+f.First()+1:(c+1)*f.Ctx]...)
	}
	return t
}

// Windows are the chunks as a panel's windows, for a capture of the same
// tokens: llama.cpp runs each chunk with its first token replaced by BOS
// when the model adds one, which bos (the model's BOS, or empty) says.
func (f *File) Windows(bos []int) [][]int {
	w := make([][]int, f.Chunks)
	for c := range w {
		w[c] = append([]int(nil), f.Tokens[c*f.Ctx:(c+1)*f.Ctx]...)
		if len(bos) > 0 {
			w[c][0] = bos[0]
		}
	}
	return w
}

// Is says whether the file at path starts as a base file does.
func Is(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [len(Magic)]byte
	_, err = io.ReadFull(f, m[:])
	return err == nil && string(m[:]) == Magic
}

// Open opens the base file at path: its header and tokens are read and
// checked now, its size against them.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err == nil {
		var f *File
		if f, err = Parse(fh, st.Size(), path); err == nil {
			f.closeFile = fh.Close
			return f, nil
		}
	}
	fh.Close()
	return nil, err
}

// Parse reads the base file of size bytes at r; name is used in errors.
func Parse(r io.ReaderAt, size int64, name string) (*File, error) {
	var hdr [headerSize]byte
	if n, _ := r.ReadAt(hdr[:], 0); int64(n) < int64(headerSize) {
		return nil, fmt.Errorf("%s: %d bytes, shorter than a llama.cpp base file's %d-byte header", name, size, headerSize)
	}
	if string(hdr[:len(Magic)]) != Magic {
		return nil, fmt.Errorf("%s: starts with %q, not llama.cpp's %q: not a --kl-divergence-base file", name, hdr[:len(Magic)], Magic)
	}
	count := func(i int) int64 { return int64(int32(binary.LittleEndian.Uint32(hdr[len(Magic)+4*i:]))) }
	ctx, vocab, chunks := count(0), count(1), count(2)
	switch {
	case ctx < 3 || ctx > 1<<24:
		return nil, fmt.Errorf("%s: n_ctx %d: a chunk needs 3 to %d tokens to score one", name, ctx, 1<<24)
	case vocab < 2 || vocab > 1<<24:
		return nil, fmt.Errorf("%s: n_vocab %d: outside 2 … %d", name, vocab, 1<<24)
	case chunks < 1 || chunks > 1<<24:
		return nil, fmt.Errorf("%s: n_chunk %d: outside 1 … %d", name, chunks, 1<<24)
	}
	f := &File{Name: name, Ctx: int(ctx), Vocab: int(vocab), Chunks: int(chunks), r: r}
	nTok := ctx * chunks
	f.rowsAt = int64(headerSize) + 4*nTok
	f.rowBytes = 2 * (2*((vocab+1)/2) + 4)
	if want := f.rowsAt + int64(f.Rows())*f.rowBytes; size != want {
		return nil, fmt.Errorf("%s: %d bytes, but n_ctx %d, n_vocab %d and n_chunk %d make %d: truncated or not a base file",
			name, size, ctx, vocab, chunks, want)
	}
	raw := make([]byte, 4*nTok)
	if n, err := r.ReadAt(raw, int64(headerSize)); n < len(raw) {
		return nil, fmt.Errorf("%s: reading the tokens: %v", name, err)
	}
	f.Tokens = make([]int, nTok)
	for i := range f.Tokens {
		t := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if t < 0 || int64(t) >= vocab {
			return nil, fmt.Errorf("%s: token %d of chunk %d is %d, outside the vocabulary of %d", name, i%int(ctx), i/int(ctx), t, vocab)
		}
		f.Tokens[i] = int(t)
	}
	return f, nil
}

// Close closes the file, if Open opened it.
func (f *File) Close() error {
	if f.closeFile == nil {
		return nil
	}
	c := f.closeFile
	f.closeFile = nil
	return c()
}

// clampRange is llama.cpp's: a row keeps at most 16 nats below its top.
const clampRange = 16

// decode decodes row i's bytes b into lp (Vocab), and says which entries
// sit on the floor.
func (f *File) decode(i int, b []byte, lp []float32) (floored func(v int) bool, floor float32, err error) {
	scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
	minLP := math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))
	if !(scale >= 0 && scale <= 1) || math.IsNaN(float64(minLP)) || math.IsInf(float64(minLP), 0) || minLP > 0 {
		return nil, 0, fmt.Errorf("%s: row %d: scale %v, min_log_prob %v: not a row llama.cpp writes", f.Name, i, scale, minLP)
	}
	q := b[8:]
	for v := range lp {
		lp[v] = scale*float32(binary.LittleEndian.Uint16(q[2*v:])) + minLP
	}
	// The range was clamped when it spans 16 nats (to float32's rounding
	// of max−16): only then is a q of 0 a bound and not a value.
	if float64(scale)*65535 < clampRange*(1-1e-5) {
		return func(int) bool { return false }, minLP, nil
	}
	return func(v int) bool { return q[2*v] == 0 && q[2*v+1] == 0 }, minLP, nil
}

// Pair reads the file as the reference side of a report on test, a
// capture of its chunks: either every row of the chunks as panel windows
// (Chunks·(Ctx−1) rows: the rows llama.cpp does not score are skipped) or
// just the scored ones. It returns readers of the same rows of both sides.
// Closing the reference closes the file; closing the test closes test.
func (f *File) Pair(test *dump.Reader) (ref, scored *dump.Reader, err error) {
	if test.Vocab != f.Vocab {
		return nil, nil, fmt.Errorf("%s has a vocabulary of %d, %s of %d: not the same model's", f.Name, f.Vocab, test.Name, test.Vocab)
	}
	p := &pair{f: f, test: test}
	switch test.Rows {
	case f.Rows():
		p.skip = false
	case f.Chunks * (f.Ctx - 1):
		p.skip = true
	default:
		return nil, nil, fmt.Errorf("%s has %d rows: neither the %d windows of %d tokens of %s (%d rows) nor its %d scored rows",
			test.Name, test.Rows, f.Chunks, f.Ctx, f.Name, f.Chunks*(f.Ctx-1), f.Rows())
	}
	ref = dump.Concat(f.Name, f.Rows(), f.Vocab, nil, f.Close, p.readRef)
	scored = dump.Concat(test.Name, f.Rows(), f.Vocab, test.Routes, test.Close, p.readTest)
	return ref, scored, nil
}

// pair reads both sides: the reference's rows need the test's, so
// reading a block of the reference reads the test's too and keeps it
// for the test's next read (CompareReaders reads the reference, then the
// test, of each block).
type pair struct {
	f    *File
	test *dump.Reader
	skip bool
	// under is the next row of test to read (of all its rows).
	under int
	// kept is test's block of rows first…, read with the reference's.
	kept      []float32
	keptFirst int
	raw       []byte
	scratch   []float32
}

// fill reads test's scored rows first… (len(dst)/Vocab of them) into dst.
func (p *pair) fill(first int, dst []float32) error {
	f, v := p.f, p.f.Vocab
	for s := first; s < first+len(dst)/v; {
		// Scored row s is row u of test.
		c, j := s/f.Scored(), s%f.Scored()
		u := s
		if p.skip {
			u = c*(f.Ctx-1) + f.First() + j
		}
		if u < p.under {
			return fmt.Errorf("%s: row %d read out of order", p.test.Name, s)
		}
		for p.under < u { // rows llama.cpp does not score
			n := min(u-p.under, 16)
			var err error
			if p.scratch, err = p.test.Next(n, p.scratch); err != nil {
				return err
			}
			p.under += n
		}
		n := min(f.Scored()-j, first+len(dst)/v-s)
		out := dst[(s-first)*v : (s-first+n)*v]
		rows, err := p.test.Next(n, out)
		if err != nil {
			return err
		}
		copy(out, rows) // a capture in memory hands its own rows
		p.under += n
		s += n
	}
	return nil
}

func (p *pair) readTest(first int, dst []float32) error {
	if p.kept != nil && p.keptFirst == first && len(p.kept) == len(dst) {
		copy(dst, p.kept)
		return nil
	}
	return p.fill(first, dst)
}

// readRef decodes the reference rows first… into dst, their floored
// tokens taking the test's log-probability where it is lower.
func (p *pair) readRef(first int, dst []float32) error {
	f, v := p.f, p.f.Vocab
	n := len(dst) / v
	if cap(p.kept) < len(dst) {
		p.kept = make([]float32, len(dst))
	}
	p.kept = p.kept[:len(dst)]
	p.keptFirst = -1
	if err := p.fill(first, p.kept); err != nil {
		return err
	}
	p.keptFirst = first
	if need := int(f.rowBytes) * n; cap(p.raw) < need {
		p.raw = make([]byte, need)
	}
	raw := p.raw[:int(f.rowBytes)*n]
	at := f.rowsAt + int64(first)*f.rowBytes
	if got, err := f.r.ReadAt(raw, at); got < len(raw) {
		return fmt.Errorf("%s: row %d: %v", f.Name, first+got/int(f.rowBytes), err)
	}
	for j := range n {
		lp := dst[j*v : (j+1)*v]
		floored, floor, err := f.decode(first+j, raw[j*int(f.rowBytes):], lp)
		if err != nil {
			return err
		}
		zt := p.kept[j*v : (j+1)*v]
		lnT, err := logNorm(zt)
		if err != nil {
			return fmt.Errorf("%s: row %d: %v", p.test.Name, first+j, err)
		}
		for t := range lp {
			if floored(t) {
				lp[t] = min(floor, float32(float64(zt[t])-lnT))
			}
		}
	}
	return nil
}

// logNorm is ln Σ e^z of a row: ln p = z − logNorm.
func logNorm(z []float32) (float64, error) {
	m := float64(z[0])
	for _, x := range z {
		m = max(m, float64(x))
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return 0, errors.New("a logit that is not finite")
	}
	var s float64
	for _, x := range z {
		s += math.Exp(float64(x) - m)
	}
	return m + math.Log(s), nil
}
