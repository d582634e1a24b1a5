package kldbase

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
)

// encode writes a base file of ctx-token chunks whose scored rows are
// logits (Rows × vocab), as perplexity.cpp does. Files of llama-perplexity
// itself are read in cmd/logitscope's test; these are files to break.
func encode(ctx, vocab int, tokens []int, logits [][]float32) []byte {
	var b []byte
	b = append(b, Magic...)
	for _, v := range []int{ctx, vocab, len(tokens) / ctx} {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
	}
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(t)))
	}
	for _, z := range logits {
		hi, lo := z[0], z[0]
		for _, x := range z {
			hi, lo = max(hi, x), min(lo, x)
		}
		lo = max(lo, hi-clampRange)
		var s float64
		for _, x := range z {
			s += math.Exp(float64(x - hi))
		}
		scale := (hi - lo) / 65535
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(lo-hi-float32(math.Log(s))))
		for _, x := range z {
			var q uint16
			if x > lo {
				q = uint16(math.Round(float64((x - lo) / scale)))
			}
			b = binary.LittleEndian.AppendUint16(b, q)
		}
		if vocab%2 == 1 {
			b = append(b, 0, 0)
		}
	}
	return b
}

// panel is chunks chunks of ctx tokens over vocab, with every position's
// logits (chunks·(ctx−1) rows: a capture of the chunks as windows) and a
// base file of the scored ones.
func panel(ctx, vocab, chunks int, spread float32) (tokens []int, all *dump.Logits, base []byte) {
	tokens = make([]int, ctx*chunks)
	for i := range tokens {
		tokens[i] = (i*7 + 3) % vocab
	}
	all = &dump.Logits{Rows: chunks * (ctx - 1), Vocab: vocab, Data: make([]float32, chunks*(ctx-1)*vocab)}
	var scored [][]float32
	for r := range all.Rows {
		z := all.Row(r)
		for v := range z {
			z[v] = spread * float32(math.Sin(float64(r*vocab+v)*0.37))
		}
		if r%(ctx-1) >= ctx/2 {
			scored = append(scored, z)
		}
	}
	return tokens, all, encode(ctx, vocab, tokens, scored)
}

func parse(b []byte) (*File, error) {
	return Parse(bytes.NewReader(b), int64(len(b)), "base.kld")
}

func TestParseRefusesWhatLlamaCppDoesNotWrite(t *testing.T) {
	_, _, good := panel(8, 5, 2, 1)
	header := func(ctx, vocab, chunks int32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[8:], uint32(ctx))
		binary.LittleEndian.PutUint32(b[12:], uint32(vocab))
		binary.LittleEndian.PutUint32(b[16:], uint32(chunks))
		return b
	}
	token := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(token[headerSize+4*9:], 5)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than a llama.cpp base file's 20-byte header"},
		{"magic", append([]byte("_logitz_"), good[8:]...), `not llama.cpp's "_logits_"`},
		{"truncated", good[:len(good)-1], "truncated"},
		{"longer", append(append([]byte(nil), good...), 0), "truncated"},
		{"ctx", header(2, 5, 2), "n_ctx 2"},
		{"vocab", header(8, -1, 2), "n_vocab -1"},
		{"chunks", header(8, 5, 0), "n_chunk 0"},
		{"token", token, "token 1 of chunk 1 is 5, outside the vocabulary of 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "base.kld: ") {
				t.Fatalf("got %v, want an error naming base.kld and saying %q", err, tc.want)
			}
		})
	}
	if _, err := parse(good); err != nil {
		t.Fatal(err)
	}
}

// Reading a capture beside the base file gives the rows llama.cpp scored,
// of both sides, whether the capture holds every position of the chunks
// or only the scored ones; the reference decodes to the capture's
// log-probabilities within the 16-bit step.
func TestPair(t *testing.T) {
	const ctx, vocab, chunks = 9, 7, 3
	tokens, all, base := panel(ctx, vocab, chunks, 2)
	f, err := parse(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Targets(); len(got) != f.Rows() || got[0] != tokens[ctx/2+1] || got[f.Scored()] != tokens[ctx+ctx/2+1] {
		t.Fatalf("targets %v of tokens %v", got, tokens)
	}
	if w := f.Windows([]int{6}); len(w) != chunks || w[1][0] != 6 || w[1][1] != tokens[ctx+1] || f.Tokens[ctx] == 6 {
		t.Fatalf("windows %v", w)
	}
	scoredOnly := &dump.Logits{Vocab: vocab}
	for r := range all.Rows {
		if r%(ctx-1) >= ctx/2 {
			scoredOnly.Data = append(scoredOnly.Data, all.Row(r)...)
			scoredOnly.Rows++
		}
	}
	for _, tc := range []struct {
		name string
		test *dump.Logits
	}{{"windows", all}, {"scored", scoredOnly}} {
		t.Run(tc.name, func(t *testing.T) {
			ref, test, err := f.Pair(tc.test.Reader("test"))
			if err != nil {
				t.Fatal(err)
			}
			for block := 0; ; block++ {
				r, err := ref.Next(2, nil)
				if err != nil {
					if r != nil || block*2 < f.Rows() {
						t.Fatalf("block %d: %v", block, err)
					}
					break
				}
				z, err := test.Next(2, nil)
				if err != nil {
					t.Fatal(err)
				}
				for j := range len(r) / vocab {
					want := scoredOnly.Row(block*2 + j)
					if !slicesEqual(z[j*vocab:(j+1)*vocab], want) {
						t.Fatalf("row %d: test %v, want %v", block*2+j, z[j*vocab:(j+1)*vocab], want)
					}
					ln, _ := logNorm(want)
					for v := range vocab {
						if d := math.Abs(float64(r[j*vocab+v]) - (float64(want[v]) - ln)); d > 4.0/65535 {
							t.Fatalf("row %d token %d: ln p %v, want %v", block*2+j, v, r[j*vocab+v], float64(want[v])-ln)
						}
					}
				}
			}
		})
	}
	if _, _, err := f.Pair((&dump.Logits{Rows: 5, Vocab: vocab, Data: make([]float32, 5*vocab)}).Reader("short")); err == nil ||
		!strings.Contains(err.Error(), "short has 5 rows: neither the 3 windows of 9 tokens of base.kld (24 rows) nor its 12 scored rows") {
		t.Fatalf("a capture of other rows: %v", err)
	}
	if _, _, err := f.Pair((&dump.Logits{Rows: 12, Vocab: 8, Data: make([]float32, 12*8)}).Reader("wide")); err == nil ||
		!strings.Contains(err.Error(), "base.kld has a vocabulary of 7, wide of 8") {
		t.Fatalf("another vocabulary: %v", err)
	}
}

// A row whose range llama.cpp clamped stores everything 16 nats under its
// top as q = 0; those tokens take the test's log-probability when it is
// lower still, so that they add nothing to the KLD, and the floor when
// the test puts them higher.
func TestPairFloorTakesTheTestsLowerValue(t *testing.T) {
	const ctx, vocab = 4, 4
	ref := [][]float32{{30, 29, 0, -5}} // tokens 2 and 3 under 30−16
	base := encode(ctx, vocab, []int{0, 1, 2, 3}, ref)
	f, err := parse(base)
	if err != nil {
		t.Fatal(err)
	}
	test := &dump.Logits{Rows: 1, Vocab: vocab, Data: []float32{30, 29, -10, 25}}
	r, _, err := f.Pair(test.Reader("test"))
	if err != nil {
		t.Fatal(err)
	}
	lp, err := r.Next(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	lnRef, _ := logNorm(ref[0])
	lnTest, _ := logNorm(test.Data)
	floor := 14 - lnRef
	for _, c := range []struct {
		v    int
		want float64
	}{{0, 30 - lnRef}, {1, 29 - lnRef}, {2, -10 - lnTest}, {3, floor}} {
		if d := math.Abs(float64(lp[c.v]) - c.want); d > 1e-3 {
			t.Errorf("token %d: ln p %v, want %v", c.v, lp[c.v], c.want)
		}
	}
}

func TestRowThatIsNotLlamaCpps(t *testing.T) {
	_, all, base := panel(4, 3, 1, 1)
	binary.LittleEndian.PutUint32(base[len(base)-16:], math.Float32bits(float32(math.NaN()))) // the last row (8 + 2·4 bytes) starts with its scale
	f, err := parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := f.Pair(all.Reader("test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.ReadAll(); err == nil || !strings.Contains(err.Error(), "base.kld: row 0: scale NaN") {
		t.Fatalf("got %v", err)
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A base file of two 4-token chunks over a 3-token vocabulary: llama.cpp
// scores positions 2 (predicting token 3) of each chunk.
func ExampleFile_Targets() {
	b := encode(4, 3, []int{0, 1, 2, 1, 0, 2, 1, 0}, [][]float32{{1, 2, 3}, {3, 2, 1}})
	f, err := Parse(bytes.NewReader(b), int64(len(b)), "base.kld")
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Chunks, f.Ctx, f.Rows(), f.Targets(), f.Windows([]int{2}))
	// Output: 2 4 2 [1 0] [[2 1 2 1] [2 2 1 0]]
}

// Any bytes give a File or an error, never a panic, and a File's rows
// read or fail cleanly.
func FuzzParse(f *testing.F) {
	_, _, b := panel(6, 5, 2, 3)
	f.Add(b)
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parse(b)
		if err != nil {
			return
		}
		if file.Rows()*file.Vocab > 1<<20 {
			return
		}
		test := &dump.Logits{Rows: file.Rows(), Vocab: file.Vocab, Data: make([]float32, file.Rows()*file.Vocab)}
		ref, _, err := file.Pair(test.Reader("test"))
		if err != nil {
			t.Fatal(err)
		}
		ref.ReadAll()
	})
}
