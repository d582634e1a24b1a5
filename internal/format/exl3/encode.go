package exl3

import (
	"fmt"
	"math"
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
