package variant

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
)

// Untouched proves that every piece v keeps in float32 (whatever its
// policy leaves out, and every vector) is ck's own values: for each, the
// byte range of the tensor's rows in ck's shard, their sha256 and that of
// their values widened to float32, and the sha256 of the bytes the engine
// loads from v's shard, which must equal it. A piece that is not the
// checkpoint's is refused naming it. contract is the seal of the contract
// the proof belongs to.
//
// It reads every kept byte on both sides: for an experts-only variant of
// a large model, that is everything outside the experts, read once more.
func Untouched(ck *checkpoint.Checkpoint, v *Variant, contract string) (*chain.Untouched, error) {
	u := &chain.Untouched{Contract: contract, Tensors: []chain.Kept{}}
	for _, name := range v.Names() {
		for _, p := range v.Pieces(name) {
			if p.Scheme != SchemeF32 {
				continue
			}
			k, err := kept(ck, v, p)
			if err != nil {
				return nil, err
			}
			if err := k.Check(); err != nil {
				return nil, fmt.Errorf("%v: %s keeps values that are not %s's", err, filepath.Join(v.Dir, p.Shard), ck.Source())
			}
			u.Tensors = append(u.Tensors, k)
		}
	}
	return u, chain.Seal(u)
}

// CheckUntouched recomputes the proof from ck's and v's files as they are
// now and compares it with the recorded one, naming the first piece that
// differs.
func CheckUntouched(ck *checkpoint.Checkpoint, v *Variant, recorded *chain.Untouched) error {
	local, err := Untouched(ck, v, recorded.Contract)
	if err != nil {
		return err
	}
	return recorded.Compare(local)
}

// kept hashes one float32 piece of v and the same rows of ck's tensor.
func kept(ck *checkpoint.Checkpoint, v *Variant, p Piece) (chain.Kept, error) {
	k := chain.Kept{Name: p.Name, Rows: p.Rows}
	info, shard, ok := ck.Info(p.Name)
	if !ok {
		return k, fmt.Errorf("%s: untouched: tensor %s is in the variant but not in the checkpoint %s", v.Dir, p.Name, ck.Source())
	}
	elems := info.NumElements()
	if elems != p.cols()*p.Shape[0] {
		return k, fmt.Errorf("%s: untouched: tensor %s has %d values in the checkpoint, the variant's shape %v holds %d", v.Dir, p.Name, elems, p.Shape, p.cols()*p.Shape[0])
	}
	row := int64(p.cols() * info.DType.Size())
	off := info.Offset + int64(p.Rows[0])*row
	n := int64(p.Rows[1]-p.Rows[0]) * row
	var err error
	k.Official = chain.Span{Shard: filepath.Base(shard), DType: string(info.DType), Offset: off, Length: n}
	if k.Official.SHA256, k.Official.F32SHA256, err = hashWidened(shard, info.DType, off, n); err != nil {
		return k, fmt.Errorf("%s: tensor %s: %w", shard, p.Name, err)
	}
	loaded := filepath.Join(v.Dir, p.Shard)
	k.Loaded = chain.Span{Shard: p.Shard, DType: string(safetensors.F32), Offset: p.Offset, Length: p.Length}
	if k.Loaded.SHA256, _, err = hashWidened(loaded, safetensors.F32, p.Offset, p.Length); err != nil {
		return k, fmt.Errorf("%s: tensor %s: %w", loaded, p.Name, err)
	}
	return k, nil
}

// chunkValues bounds what hashWidened holds at once: a kept piece may be
// 64 MiB of float32 (a large embedding), and the proof reads every one.
const chunkValues = 1 << 18

// hashWidened streams n bytes of dtype values at off in path and returns
// the sha256 of those bytes and of the values as little-endian float32
// (as a variant stores a kept tensor), a chunk at a time.
func hashWidened(path string, dtype safetensors.DType, off, n int64) (raw, f32 string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	size := int64(dtype.Size())
	if !dtype.IsFloat() || n%size != 0 {
		return "", "", fmt.Errorf("%d bytes are not whole %s values", n, dtype)
	}
	hr, hf := sha256.New(), sha256.New()
	buf := make([]byte, chunkValues*size)
	vals := make([]float32, chunkValues)
	r := io.NewSectionReader(f, off, n)
	for done := int64(0); done < n; {
		m := min(int64(len(buf)), n-done)
		if _, err := io.ReadFull(r, buf[:m]); err != nil {
			return "", "", fmt.Errorf("reading [%d, %d): %w", off, off+n, err)
		}
		hr.Write(buf[:m])
		if dtype != safetensors.F32 { // an F32 tensor's bytes are its float32 encoding
			v := vals[:m/size]
			if err := safetensors.DecodeFloat32(dtype, buf[:m], v); err != nil {
				return "", "", err
			}
			hf.Write(safetensors.EncodeF32(v))
		}
		done += m
	}
	raw = hex.EncodeToString(hr.Sum(nil))
	if dtype == safetensors.F32 {
		return raw, raw, nil
	}
	return raw, hex.EncodeToString(hf.Sum(nil)), nil
}

// Replaced counts the tensors v stores in each quantized scheme in place
// of the checkpoint's: what a contract says the variant replaces.
func (v *Variant) Replaced() map[string]int {
	n := map[string]int{}
	for _, name := range v.Names() {
		if s := v.Pieces(name)[0].Scheme; s != SchemeF32 {
			n[s]++
		}
	}
	return n
}
