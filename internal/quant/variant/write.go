package variant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/exl3"
	"logitscope/internal/format/seal"
	"logitscope/internal/quant"
	"logitscope/internal/sys/tempfile"
)

// DefaultDir is where a checkpoint's variant of a scheme lives by default.
func DefaultDir(modelDir, scheme string) string {
	return filepath.Join(modelDir, "variants", scheme)
}

// Options tune Write.
type Options struct {
	// MaxShardBytes bounds shards and pieces; 0 means MaxShardBytes.
	MaxShardBytes int
	// Progress, if not nil, is called after each tensor.
	Progress func(done, total int, name string)
	// Policy, if not nil, picks each matrix's scheme; it is recorded in
	// the manifest.
	Policy *Policy
	// EXL3, if not nil, supplies the layers of the matrices the policy
	// puts in EXL3, as exllamav3 converted them, instead of this
	// package's encoder; the manifest records the sha256 of each file
	// that supplied one.
	EXL3 *exl3.Dir
}

// Write quantizes ck with scheme into dir: every matrix (linear weights,
// embedding, LM head) in the scheme opt.Policy gives it (scheme without a
// policy), every vector (norms, biases) in float32. dir is replaced only
// when the new variant is complete; the
// temporary directory it is written in beside dir is removed on a failure
// or a signal (package tempfile), and a later Write removes it if the
// process was killed.
func Write(ck *checkpoint.Checkpoint, scheme quant.Scheme, dir string, opt Options) error {
	if ck.GGUF != "" {
		// Its weights are llama.cpp's blocks, not the float tensors a
		// scheme quantizes.
		return fmt.Errorf("variant: %s is a GGUF file: quantize the Hugging Face checkpoint it was converted from", ck.GGUF)
	}
	if canon, err := ParseScheme(string(scheme)); err != nil {
		return err
	} else if canon != scheme {
		return fmt.Errorf("variant: scheme %q: write it %q", scheme, canon)
	}
	if opt.MaxShardBytes == 0 {
		opt.MaxShardBytes = MaxShardBytes
	}
	if opt.Policy != nil {
		if _, err := opt.Policy.compile(); err != nil {
			return err
		}
		// A variant that stores every matrix in float32 is the checkpoint
		// again, in other files: surely not what was meant.
		if !slices.ContainsFunc(ck.Names(), func(name string) bool {
			info, _, _ := ck.Info(name)
			return len(info.Shape) == 2 && opt.Policy.Quantizes(name)
		}) {
			return fmt.Errorf("%s: the policy %s picks no matrix to quantize", ck.Dir, opt.Policy)
		}
	}
	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := tempfile.Mkdir(dir)
	if err != nil {
		return err
	}
	defer tempfile.Remove(tmp) // a no-op once renamed
	w := &shardWriter{dir: tmp, max: int64(opt.MaxShardBytes)}
	m := &Manifest{Format: Format, Scheme: string(scheme), GroupSize: quant.GroupSize, Model: fp, Policy: opt.Policy}
	names := ck.Names()
	for i, name := range names {
		info, _, _ := ck.Info(name)
		as := SchemeF32
		if len(info.Shape) > 1 {
			as = opt.Policy.SchemeOf(name, scheme)
		}
		var pieces []encoded
		var err error
		if f := EXL3(as); f.K != 0 && opt.EXL3 != nil {
			pieces, err = importEXL3(opt.EXL3, name, info.Shape, f, opt.MaxShardBytes, m)
		} else {
			var data []float32
			var shape []int
			if data, shape, err = ck.Float32(name); err == nil {
				pieces, err = encode(name, data, shape, as, opt.MaxShardBytes)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: tensor %s: %w", ck.Dir, name, err)
		}
		for _, p := range pieces {
			if p.Piece.Shard, p.Piece.Offset, err = w.add(p.bytes); err != nil {
				return err
			}
			p.Piece.Length = int64(len(p.bytes))
			m.Tensors = append(m.Tensors, p.Piece)
		}
		if opt.Progress != nil {
			opt.Progress(i+1, len(names), name)
		}
	}
	if m.Shards, err = w.close(); err != nil {
		return err
	}
	data, err := seal.Marshal(m, "manifest_sha256", func(s string) { m.Seal = s })
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), data, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return tempfile.Commit(func() error { return replaceDir(tmp, dir) }, tmp)
}

type encoded struct {
	Piece
	bytes []byte
}

// encode splits a tensor into pieces of whole rows that fit a shard, in
// the scheme as (a quant scheme, or f32).
func encode(name string, data []float32, shape []int, as string, maxBytes int) ([]encoded, error) {
	if len(shape) == 0 {
		shape = []int{1}
	}
	p := Piece{Name: name, Shape: shape, Scheme: as}
	if f := EXL3(as); f.K != 0 {
		return encodeEXL3(p, data, f, maxBytes)
	}
	rows, cols := shape[0], p.cols()
	rowBytes := cols * 4
	var scheme quant.Scheme
	if as != SchemeF32 {
		var err error
		if scheme, err = quant.ParseScheme(as); err != nil {
			return nil, err
		}
		l, err := quant.NewLayout(scheme, 1, cols)
		if err != nil {
			return nil, err
		}
		rowBytes = l.RowBytes()
	}
	perPiece := max(1, maxBytes/rowBytes)
	var out []encoded
	for a := 0; a < rows; a += perPiece {
		b := min(rows, a+perPiece)
		p.Rows = [2]int{a, b}
		w := data[a*cols : b*cols]
		var blob []byte
		if p.Scheme == SchemeF32 {
			blob = make([]byte, 4*len(w))
			for i, v := range w {
				binary.LittleEndian.PutUint32(blob[4*i:], math.Float32bits(v))
			}
		} else {
			var err error
			if blob, err = quant.Quantize(scheme, w, b-a, cols); err != nil {
				return nil, err
			}
		}
		out = append(out, encoded{p, blob})
	}
	return out, nil
}

// encodeEXL3 quantizes a matrix (out, in) to one EXL3 piece: the layer
// exl3.EncodeLayer makes of its transpose (in, out), y = x·W, padded
// with zeros to multiples of 128. The signs' seed is the name's hash,
// so that the same checkpoint gives the same bytes.
func encodeEXL3(p Piece, data []float32, f exl3.Format, maxBytes int) ([]encoded, error) {
	if len(p.Shape) != 2 {
		return nil, fmt.Errorf("%s is a linear layer's format; shape %v is not a matrix", p.Scheme, p.Shape)
	}
	if strings.Contains(p.Name, "embed_tokens") {
		return nil, fmt.Errorf("%s quantizes linear layers, and the embedding is a lookup table (exllamav3 keeps it in 16 bits): leave it out with --keep embed_tokens or --only", p.Scheme)
	}
	out, in := p.Shape[0], p.Shape[1]
	if n := f.Bytes(in, out); n > int64(maxBytes) {
		return nil, fmt.Errorf("%s of %d×%d takes %d bytes, over a shard's %d: an EXL3 layer is one piece (its Hadamards mix its rows); leave it out with --keep or --only", p.Scheme, out, in, n, maxBytes)
	}
	ip, op := exl3.Pad(in), exl3.Pad(out)
	w := make([]float32, ip*op)
	for r := range out {
		for c := range in {
			w[c*op+r] = data[r*in+c]
		}
	}
	h := fnv.New64a()
	h.Write([]byte(p.Name))
	l, err := exl3.EncodeLayer(w, ip, op, f.K, f.Codebook, h.Sum64())
	if err != nil {
		return nil, err
	}
	p.Rows = [2]int{0, out}
	return []encoded{{p, l.Blob()}}, nil
}

// importEXL3 takes a matrix (out, in)'s layer from d, as exllamav3
// converted it: it must be of format f and pad the matrix's dims. m
// records the file's sha256.
func importEXL3(d *exl3.Dir, name string, shape []int, f exl3.Format, maxBytes int, m *Manifest) ([]encoded, error) {
	l, file, ok, err := d.Layer(name)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%s holds no EXL3 layer of it (%s.trellis)", d.Path, strings.TrimSuffix(name, ".weight"))
	case l.In != exl3.Pad(shape[1]) || l.Out != exl3.Pad(shape[0]):
		return nil, fmt.Errorf("%s/%s: its EXL3 layer is %d×%d (in×out, padded), the matrix %d×%d pads to %d×%d", d.Path, file, l.In, l.Out, shape[1], shape[0], exl3.Pad(shape[1]), exl3.Pad(shape[0]))
	case (exl3.Format{K: l.K, Codebook: l.Codebook}) != f:
		return nil, fmt.Errorf("%s/%s: its EXL3 layer is %v, the variant's scheme %v (quantize --scheme %v)", d.Path, file, exl3.Format{K: l.K, Codebook: l.Codebook}, f, exl3.Format{K: l.K, Codebook: l.Codebook})
	}
	if n := f.Bytes(shape[1], shape[0]); n > int64(maxBytes) {
		return nil, fmt.Errorf("%v of %d×%d takes %d bytes, over a shard's %d", f, shape[0], shape[1], n, maxBytes)
	}
	if m.EXL3Sources == nil {
		m.EXL3Sources = map[string]string{}
	}
	m.EXL3Sources[file] = d.Files[file]
	return []encoded{{Piece{Name: name, Shape: shape, Scheme: f.String(), Rows: [2]int{0, shape[0]}}, l.Blob()}}, nil
}

// shardWriter appends pieces to shard-NNNNN.bin files of at most max
// bytes, hashing as it goes.
type shardWriter struct {
	dir    string
	max    int64
	f      *os.File
	h      hash.Hash
	shards []Shard
}

func (w *shardWriter) add(b []byte) (string, int64, error) {
	if w.f != nil && w.shards[len(w.shards)-1].Size+int64(len(b)) > w.max {
		if err := w.finish(); err != nil {
			return "", 0, err
		}
	}
	if w.f == nil {
		name := fmt.Sprintf("shard-%05d.bin", len(w.shards)+1)
		f, err := os.Create(filepath.Join(w.dir, name))
		if err != nil {
			return "", 0, err
		}
		w.f, w.h = f, sha256.New()
		w.shards = append(w.shards, Shard{Name: name})
	}
	s := &w.shards[len(w.shards)-1]
	if _, err := io.MultiWriter(w.f, w.h).Write(b); err != nil {
		return "", 0, fmt.Errorf("%s: %w", w.f.Name(), err)
	}
	off := s.Size
	s.Size += int64(len(b))
	return s.Name, off, nil
}

func (w *shardWriter) finish() error {
	w.shards[len(w.shards)-1].SHA256 = hex.EncodeToString(w.h.Sum(nil))
	err := w.f.Close()
	w.f = nil
	return err
}

func (w *shardWriter) close() ([]Shard, error) {
	if w.f != nil {
		if err := w.finish(); err != nil {
			return nil, err
		}
	}
	return w.shards, nil
}

// replaceDir moves tmp to dir, replacing an existing dir only after tmp is
// complete, so readers see the old variant or the new one, never a mix.
func replaceDir(tmp, dir string) error {
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = dir + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}
