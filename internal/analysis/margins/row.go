package margins

import (
	"fmt"
	"math"

	"logitscope/internal/sys/exp64"
)

// topK keeps the k largest logits seen so far, best first. Rows are scanned
// in increasing id order and an entry only displaces one strictly smaller,
// so ties keep the lowest ids first, as argmax does.
type topK struct {
	id  []int
	val []float32
}

func newTopK(k int) topK { return topK{id: make([]int, 0, k), val: make([]float32, 0, k)} }

func (t *topK) push(id int, v float32) {
	n := len(t.val)
	if n == cap(t.val) {
		if v <= t.val[n-1] {
			return
		}
		n-- // drop the last
	} else {
		t.id, t.val = t.id[:n+1], t.val[:n+1]
	}
	i := n
	for i > 0 && v > t.val[i-1] {
		t.id[i], t.val[i] = t.id[i-1], t.val[i-1]
		i--
	}
	t.id[i], t.val[i] = id, v
}

// nonFinite reports NaN and ±Inf in one comparison: x−x is 0 for every
// finite x and NaN otherwise.
func nonFinite(x float32) bool { return x-x != 0 }

// analyzeRow compares one pair of rows in two passes: the first finds the
// maxima, the top lists and the mean of d; the second the softmax sums, the
// KLD, var(d) and the ranks, all relative to the maxima so that exp never
// overflows. k ≥ 2 (the runner-up is needed even for TopK 1).
func analyzeRow(i int, zr, zt []float32, target, k, listK int) (Position, error) {
	rt, tt := newTopK(k), newTopK(k)
	var sumD float64
	for v, r := range zr {
		t := zt[v]
		if nonFinite(r) {
			return Position{}, fmt.Errorf("margins: reference row %d: token %d has logit %v", i, v, r)
		}
		if nonFinite(t) {
			return Position{}, fmt.Errorf("margins: test row %d: token %d has logit %v", i, v, t)
		}
		if len(rt.val) < k || r > rt.val[len(rt.val)-1] {
			rt.push(v, r)
		}
		if len(tt.val) < k || t > tt.val[len(tt.val)-1] {
			tt.push(v, t)
		}
		sumD += float64(t) - float64(r)
	}
	a, b := rt.id[0], tt.id[0]
	maxR, maxT := float64(rt.val[0]), float64(tt.val[0])
	meanD := sumD / float64(len(zr))

	// Second pass. KLD = Σ p_r(ln p_r − ln p_t) with ln p = x − ln S and
	// x = z − max; since Σ p_r = 1 it is Σ e_r(x_r − x_t)/S_r − ln S_r + ln S_t,
	// which needs no third pass over the row.
	sr, st, cross, ssd, rankAinT, rankBinR := sums(zr, zt, maxR, maxT, meanD, a, b)
	lnSr, lnSt := math.Log(sr), math.Log(st)
	lpRef := func(v int) float64 { return float64(zr[v]) - maxR - lnSr }
	lpTest := func(v int) float64 { return float64(zt[v]) - maxT - lnSt }

	p := Position{
		Index:               i,
		RefTop:              tokens(rt, listK, maxR, lnSr),
		TestTop:             tokens(tt, listK, maxT, lnSt),
		RefChoice:           a,
		TestChoice:          b,
		Flip:                a != b,
		KLD:                 cross/sr - lnSr + lnSt,
		RefChoiceRankInTest: rankAinT,
		TestChoiceRankInRef: rankBinR,
		varD:                ssd / float64(len(zr)),
	}
	runnerUp := rt.id[1]
	p.RefTop12 = float64(rt.val[0]) - float64(rt.val[1])
	p.RefTop12Prob = math.Exp(lpRef(a)) - math.Exp(lpRef(runnerUp))
	p.Rival, p.MarginOf = runnerUp, "runner_up"
	if p.Flip {
		p.Rival, p.MarginOf = b, "flip"
	}
	p.Margin = float64(zr[a]) - float64(zr[p.Rival])
	p.MarginProb = math.Exp(lpRef(a)) - math.Exp(lpRef(p.Rival))
	// The mean of d cancels in a difference of two of its entries.
	p.PairShift = (float64(zt[p.Rival]) - float64(zr[p.Rival])) - (float64(zt[a]) - float64(zr[a]))

	p.Target = a
	if target >= 0 {
		p.Target = target
		lr, lt := lpRef(target), lpTest(target)
		p.LnPRefTarget, p.LnPTestTarget = &lr, &lt
	}
	p.PRefTarget = math.Exp(lpRef(p.Target))
	p.PTestTarget = math.Exp(lpTest(p.Target))
	p.DeltaP = p.PTestTarget - p.PRefTarget
	return p, nil
}

// chunk is how many of exp64's blocks sums asks for at once. A block's
// terms are summed plainly (in 8 lanes, exp64.KLSums) and the blocks go
// into compensated sums: a plain sum of 151,936 terms loses about 1e-11 of
// S, a relative 1e-6 of a KLD near 1e-5; blocks keep the error near 64 ulp
// of a block at a fraction of the cost of compensating every term.
const chunk = 64

// sums is the second pass over a row: the softmax normalisers S_r and S_t,
// Σ e_r(x_r − x_t), Σ (d − mean d)², and the ranks of a in the test row and
// of b in the reference row (ties count towards the lower id, as argmax).
// The exponentials are exp64's, eight at a time where the CPU has AVX-512,
// with the same bits as its Go: the result does not depend on the CPU.
func sums(zr, zt []float32, maxR, maxT, meanD float64, a, b int) (sr, st, cross, ssd float64, rankA, rankB int) {
	var ksr, kst, kcross ksum
	var out [4 * chunk]float64
	for lo := 0; lo < len(zr); lo += chunk * exp64.Block {
		hi := min(lo+chunk*exp64.Block, len(zr))
		exp64.KLSums(zr[lo:hi], zt[lo:hi], maxR, maxT, meanD, out[:])
		for k := 0; k < 4*((hi-lo+exp64.Block-1)/exp64.Block); k += 4 {
			ksr.add(out[k])
			kst.add(out[k+1])
			kcross.add(out[k+2])
			ssd += out[k+3]
		}
	}
	rankA, rankB = 1, 1
	za, zb := zt[a], zr[b]
	for v, r := range zr {
		if t := zt[v]; t > za || (t == za && v < a) {
			rankA++
		}
		if r > zb || (r == zb && v < b) {
			rankB++
		}
	}
	return ksr.sum(), kst.sum(), kcross.sum(), ssd, rankA, rankB
}

func tokens(t topK, n int, max, lnS float64) []Token {
	out := make([]Token, n)
	for j := range out {
		z := float64(t.val[j])
		out[j] = Token{ID: t.id[j], Logit: z, Prob: math.Exp(z - max - lnS)}
	}
	return out
}

// ksum is Neumaier's compensated sum: the rounding error of each addition
// is carried in c, whichever operand is larger.
type ksum struct{ s, c float64 }

func (k *ksum) add(x float64) {
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

func (k *ksum) sum() float64 { return k.s + k.c }
