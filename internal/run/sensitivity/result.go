package sensitivity

import (
	"cmp"
	"math"
	"slices"

	"logitscope/internal/analysis/attribution"
)

func (a acc) effect() attribution.Effect {
	e := attribution.Effect{Flips: a.Flips, Clear: a.Clear}
	if len(a.KLD) == 0 {
		return e
	}
	k := slices.Sorted(slices.Values(a.KLD))
	var sum float64
	for _, v := range k {
		sum += v
	}
	e.MeanKLD = sum / float64(len(k))
	e.KLD99 = k[min(len(k)-1, int(math.Ceil(0.99*float64(len(k))))-1)]
	e.MaxKLD = k[len(k)-1]
	e.MeanDeltaP = a.DP / float64(len(k))
	return e
}

func (sw *sweeper) result(windows int) *attribution.Result {
	st := sw.st
	r := &attribution.Result{Kind: attribution.Kind, Version: attribution.Version, Key: st.Key, Unit: sw.opt.Unit, ForwardOnly: sw.opt.ForwardOnly, NumLayers: sw.layers, Device: sw.x.Device(), Windows: windows,
		Positions: st.Positions, Criterion: st.Criterion, Whole: st.Whole.effect(), Calls: st.Calls}
	if r.Calls == nil {
		r.Calls = []attribution.Call{}
	}
	if sw.floor != nil {
		f := st.Floor.effect()
		r.Floor = &f
	}
	for i, u := range sw.units {
		a := st.Units[i]
		ur := attribution.UnitResult{Unit: u, Forward: a.Forward.effect(), Reverse: a.Reverse.effect()}
		if sw.iso != nil {
			iso, rel := a.Iso.effect(), sw.errNorm[i]
			ur.Iso, ur.RelError = &iso, &rel
		}
		r.Additivity.Forward += ur.Forward.MeanKLD
		if !r.ForwardOnly {
			r.Additivity.Reverse += r.Whole.MeanKLD - ur.Reverse.MeanKLD
		}
		r.Units = append(r.Units, ur)
	}
	if w := r.Whole.MeanKLD; w > 0 {
		r.Additivity.Forward /= w
		r.Additivity.Reverse /= w
	}
	slices.SortStableFunc(r.Units, func(a, b attribution.UnitResult) int { return cmp.Compare(b.Forward.MeanKLD, a.Forward.MeanKLD) })
	grow := math.Inf(-1)
	for l, a := range st.Layers {
		if len(a.Rel) == 0 {
			break // a sweep on a device: no boundaries, no divergence
		}
		d := attribution.Divergence{Layer: l, Rel: a.Rel, MinCos: 1, SQNR: 10 * math.Log10(a.Signal/a.Noise)}
		if a.Noise == 0 {
			d.SQNR = math.Inf(1)
		}
		for i := range a.Rel {
			d.MeanRel += float64(a.Rel[i])
			d.MaxRel = max(d.MaxRel, float64(a.Rel[i]))
			d.MeanCos += float64(a.Cos[i])
			d.MinCos = min(d.MinCos, float64(a.Cos[i]))
		}
		if n := float64(len(a.Rel)); n > 0 {
			d.MeanRel /= n
			d.MeanCos /= n
		}
		prev := 0.0
		if l > 0 {
			prev = r.Layers[l-1].MeanRel
		}
		if d.MeanRel-prev > grow {
			grow, r.Start = d.MeanRel-prev, l
		}
		r.Layers = append(r.Layers, d)
	}
	return r
}
