package exl3

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// values are each codebook's 65536 states decoded, as float32.
var values = map[Codebook]*[1 << 16]float32{}
var valuesOnce sync.Once

func table(cb Codebook) *[1 << 16]float32 {
	valuesOnce.Do(func() {
		for _, c := range []Codebook{Inst3, MCG, MUL1} {
			t := new([1 << 16]float32)
			for s := range t {
				t[s] = float32(f16(c.Decode(uint16(s))))
			}
			values[c] = t
		}
	})
	return values[cb]
}

// EncodeTile finds a tile of k bits per weight whose decoded weights are
// close to w (16×16, row-major, in the codebook's scale): a Viterbi
// search over the trellis, whose nodes are a state's low 16−k bits (the
// bits the next state keeps), each reached from 2^k states. The path
// must bite its tail: the state before position 0 is the last one's.
// As exllamav3's encoder does, it first searches without that
// constraint, starting halfway, to choose the node the path wraps
// through, then searches again through that node. It returns the tile's
// words (Pack) and the squared error of its decoded weights.
func EncodeTile(w *[TileWeights]float32, k int, cb Codebook) ([]uint16, float64, error) {
	if k < 1 || k > 8 {
		return nil, 0, fmt.Errorf("exl3: %d bits per weight: want 1 to 8", k)
	}
	v := table(cb)
	var target [TileWeights]float32 // in trellis order
	for p := range target {
		r, c := Position(p)
		target[p] = w[r*16+c]
	}
	nodes := 1 << (16 - k)
	mask := uint32(nodes - 1)
	// viterbi runs positions order from the nodes start allows (nil: any)
	// and returns the state at each position of the best path ending in
	// end (-1: any).
	viterbi := func(order []int, start int, end int) []uint16 {
		inf := float32(math.Inf(1))
		cost := make([]float32, nodes)
		if start >= 0 {
			for i := range cost {
				cost[i] = inf
			}
			cost[start] = 0
		}
		next := make([]float32, nodes)
		back := make([][]uint16, len(order)) // per step and node: the state that reached it
		for i, p := range order {
			back[i] = make([]uint16, nodes)
			for n := range next {
				next[n] = inf
			}
			t := target[p]
			for s := range uint32(1 << 16) {
				c := cost[s>>k]
				if c == inf {
					continue
				}
				d := v[s] - t
				if c += d * d; c < next[s&mask] {
					next[s&mask], back[i][s&mask] = c, uint16(s)
				}
			}
			cost, next = next, cost
		}
		n := end
		if n < 0 {
			n = 0
			for i := range cost {
				if cost[i] < cost[n] {
					n = i
				}
			}
		}
		states := make([]uint16, len(order))
		for i := len(order) - 1; i >= 0; i-- {
			states[i] = back[i][n]
			n = int(uint32(states[i]) >> k)
		}
		return states
	}
	rotated := make([]int, TileWeights)
	inOrder := make([]int, TileWeights)
	for i := range rotated {
		rotated[i], inOrder[i] = (i+TileWeights/2)%TileWeights, i
	}
	first := viterbi(rotated, -1, -1)
	wrap := int(uint32(first[TileWeights/2-1]) & mask) // the node leaving position 255
	path := viterbi(inOrder, wrap, wrap)
	var states [TileWeights]uint16
	var sq float64
	for p, s := range path {
		states[p] = s
		d := float64(v[s] - target[p])
		sq += d * d
	}
	tile, err := Pack(states, k)
	return tile, sq, err
}

// Std is each codebook's standard deviation over its states: the scale
// EncodeLayer brings every row to.
func (cb Codebook) Std() float64 {
	var s1, s2 float64
	for _, v := range table(cb) {
		s1, s2 = s1+float64(v), s2+float64(v)*float64(v)
	}
	n := float64(1 << 16)
	return math.Sqrt(s2/n - s1/n*s1/n)
}

// EncodeLayer quantizes w (in, out), y = x·w, both multiples of 128, to a
// layer of k bits a weight, as exllamav3 regularises a layer before its
// trellis search, without its Hessian (no error feedback between tiles):
// the columns divided by random signs sv and rotated by H, each row
// divided by its sign su times its RMS over the codebook's standard
// deviation, the rows rotated by H; then every tile searched alone. Dense
// undoes it: diag(suh)·H·Ŵ·H·diag(svh), suh and svh being su and sv in
// fp16. seed fixes the signs.
func EncodeLayer(w []float32, in, out, k int, cb Codebook, seed uint64) (Layer, error) {
	l := Layer{In: in, Out: out, K: k, Codebook: cb}
	if in <= 0 || out <= 0 || in%128 != 0 || out%128 != 0 || len(w) != in*out {
		return l, fmt.Errorf("exl3: %d weights for a layer of %d×%d: want both multiples of 128", len(w), in, out)
	}
	if k < 1 || k > 8 {
		return l, fmt.Errorf("exl3: %d bits per weight: want 1 to 8", k)
	}
	rng := rand.New(rand.NewPCG(seed, 0x3e13))
	sign := func() float64 { return float64(1 - 2*rng.IntN(2)) }
	x := make([]float64, len(w))
	sv := make([]float64, out)
	for c := range sv {
		sv[c] = sign()
	}
	for r := range in { // W·diag(1/sv)·H
		row := x[r*out : (r+1)*out]
		for c := range row {
			row[c] = float64(w[r*out+c]) / sv[c]
		}
		hadamard(row)
	}
	std := cb.Std()
	su := make([]float64, in)
	for r := range in { // diag(1/su)·…
		row := x[r*out : (r+1)*out]
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		rms := math.Sqrt(ss / float64(out))
		if rms == 0 {
			rms = std // an all-zero row stays zero whatever su is
		}
		// su is stored in fp16: divide by that value, so Dense undoes it.
		su[r] = f16(toF16(sign() * rms / std))
		for c := range row {
			row[c] /= su[r]
		}
	}
	col := make([]float64, in)
	for c := range out { // H·…
		for r := range in {
			col[r] = x[r*out+c]
		}
		hadamard(col)
		for r := range in {
			x[r*out+c] = col[r]
		}
	}
	l.Suh, l.Svh = make([]uint16, in), make([]uint16, out)
	for r, v := range su {
		l.Suh[r] = toF16(v)
	}
	for c, v := range sv {
		l.Svh[c] = toF16(v)
	}
	per := 16 * k
	l.Trellis = make([]uint16, in/16*out/16*per)
	tiles := make(chan [2]int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tiles {
				var tw [TileWeights]float32
				for r := range 16 {
					for c := range 16 {
						tw[r*16+c] = float32(x[(16*t[0]+r)*out+16*t[1]+c])
					}
				}
				words, _, err := EncodeTile(&tw, k, cb)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				copy(l.Trellis[(t[0]*(out/16)+t[1])*per:], words)
			}
		}()
	}
	for tk := range in / 16 {
		for tn := range out / 16 {
			tiles <- [2]int{tk, tn}
		}
	}
	close(tiles)
	wg.Wait()
	select {
	case err := <-errs:
		return l, err
	default:
	}
	return l, nil
}
