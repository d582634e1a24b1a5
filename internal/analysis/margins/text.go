package margins

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"logitscope/internal/format/routing"
)

// WriteText writes the report for a person: geometry and criterion, the
// summary in llama.cpp's layout (so numbers can be read side by side with
// its output), then the first flips and the first disagreement. It lists at
// most Options.MaxFlips flips and counts the rest, which keeps it under
// about 60 lines.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	s := &r.Summary

	mode := "argmax mode: Δp is of the reference's top-1, no PPL without targets"
	if s.TeacherForced {
		mode = "teacher-forced: Δp and PPL are of the given target tokens"
	}
	p("logitscope margins: %d positions × %d vocab, %s\n", r.Rows, r.Vocab, mode)
	p("criterion: %s\n", r.Criterion.Text)
	p("           m = z_ref[a] − z_ref[b], a = reference top-1, b = test top-1; capture σ = %.6f\n", s.CaptureSigma)

	if ppl := s.PPL; ppl != nil {
		p("\n====== Perplexity statistics ======\n")
		p("Mean PPL(Q)                   : %s\n", est(ppl.Test, 1, "%10.6f", "%10.6f"))
		p("Mean PPL(base)                : %s\n", est(ppl.Ref, 1, "%10.6f", "%10.6f"))
		if ppl.Cor != nil {
			p("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100**ppl.Cor)
		} else {
			p("Cor(ln(PPL(Q)), ln(PPL(base))):    n/a\n")
		}
		p("Mean ln(PPL(Q)/PPL(base))     : %s\n", est(ppl.LnRatio, 1, "%10.6f", "%10.6f"))
		p("Mean PPL(Q)/PPL(base)         : %s\n", est(ppl.Ratio, 1, "%10.6f", "%10.6f"))
		p("Mean PPL(Q)-PPL(base)         : %s\n", est(ppl.Diff, 1, "%10.6f", "%10.6f"))
	}

	p("\n====== KL divergence statistics ======\n")
	p("Mean    KLD: %s\n", est(&s.KLD, 1, "%10.6f", "%10.6f"))
	for _, row := range s.KLDQuant.rows() {
		p("%s KLD: %10.6f\n", row.label, row.v)
	}

	p("\n====== Token probability statistics ======\n")
	p("Mean    Δp: %s %%\n", est(&s.DeltaP, 100, "%6.3f", "%5.3f"))
	for _, row := range s.DeltaPQ.rows() {
		p("%s Δp: %6.3f%%\n", row.label, 100*row.v)
	}
	p("RMS Δp    : %s %%\n", est(&s.DeltaPRMS, 100, "%6.3f", "%5.3f"))
	p("Same top p: %s %%\n", est(&s.SameTop, 100, "%6.3f", "%5.3f"))
	p("Ref top-1 in test top-5: %7.3f%%\n", 100*s.RefTop1InTestTop5)
	p("Test top-1 in ref top-5: %7.3f%%\n", 100*s.TestTop1InRefTop5)

	r.writeFlips(p)
	r.writeRouting(p)
	return bw.Flush()
}

// writeRouting writes the routing comparison of a mixture of experts:
// the counts, per layer, then the first positions whose expert sets
// changed (as many as flips are listed).
func (r *Report) writeRouting(p func(string, ...any)) {
	rt := r.Routing
	if rt == nil {
		return
	}
	s := &rt.Summary
	share := func(n, of int) string {
		if of == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.3f%%", 100*float64(n)/float64(of))
	}
	p("\n====== Expert routing: %d of %d positions routed to another set (%d only reordered) ======\n",
		s.SetChanged, s.Positions, s.OrderOnly)
	p("sparse %s\n", rt.Layout)
	p("Experts swapped: %d of %d choices (%s)\n", s.Swapped, s.Slots, share(s.Swapped, s.Slots))
	p("Flips at positions with another set: %d of %d\n", s.FlipsAtSetChange, s.Flips)
	p("%6s %12s %11s %9s\n", "layer", "set changed", "order only", "swapped")
	for _, l := range s.Layers {
		p("%6d %12d %11d %9d\n", l.Layer, l.SetChanged, l.OrderOnly, l.Swapped)
	}
	if s.SetChanged == 0 {
		p("First routing change: none\n")
		return
	}
	p("%6s %6s  %-16s %s\n", "pos", "layer", "reference", "test")
	listed := 0
	for i := range rt.Positions {
		x := &rt.Positions[i]
		if x.Change != routing.Set {
			continue
		}
		if listed == r.opt.listed() {
			break
		}
		listed++
		for j, layer := range rt.Layers {
			if routing.Of(int32s(x.Ref[j]), int32s(x.Test[j])) == routing.Set {
				p("%6d %6d  %-16s %s\n", i, layer, fmt.Sprint(x.Ref[j]), fmt.Sprint(x.Test[j]))
			}
		}
	}
	if more := s.SetChanged - listed; more > 0 {
		p("… and %d more positions with another set\n", more)
	}
	p("First routing change: position %d\n", s.FirstSetChange)
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func (r *Report) writeFlips(p func(string, ...any)) {
	s := &r.Summary
	p("\n====== Argmax flips: %d of %d positions (%d close, %d clear) ======\n",
		s.Flips, s.Positions, s.CloseFlips, s.ClearFlips)
	if s.Flips == 0 {
		p("First disagreement: none\n")
		return
	}
	maxFlips := r.opt.listed()
	if maxFlips > 0 {
		p("%6s  %-14s %9s %8s  %-14s %9s %8s %9s %7s  %s\n",
			"pos", "ref token a", "z_ref[a]", "p_ref[a]", "test token b", "m logit", "m prob", "σ", "m/σ", "class")
	}
	listed, moreClear := 0, 0
	for i := range r.Positions {
		x := &r.Positions[i]
		if !x.Flip {
			continue
		}
		if listed == maxFlips {
			if x.Class == Clear {
				moreClear++
			}
			continue
		}
		listed++
		ratio := "-"
		if x.Ratio != nil {
			ratio = strconv.FormatFloat(*x.Ratio, 'f', 2, 64)
		}
		p("%6d  %-14s %9.4f %7.3f%%  %-14s %9.4f %7.3f%% %9.4f %7s  %s\n",
			x.Index, r.token(x.RefChoice), x.RefTop[0].Logit, 100*x.RefTop[0].Prob,
			r.token(x.TestChoice), x.Margin, 100*x.MarginProb, x.Sigma, ratio, x.Class)
	}
	if more := s.Flips - listed; more > 0 {
		p("… and %d more flips (%d close, %d clear)\n", more, more-moreClear, moreClear)
	}
	f := &r.Positions[s.FirstDisagreement]
	p("First disagreement: position %d (reference %s, test %s, %s call)\n",
		f.Index, r.token(f.RefChoice), r.token(f.TestChoice), f.Class)
}

// token labels an id, with its text when Options.TokenText is set, cut
// short so that the table keeps its columns.
func (r *Report) token(id int) string {
	label := strconv.Itoa(id)
	if r.opt.TokenText == nil {
		return label
	}
	text := strconv.Quote(r.opt.TokenText(id))
	if runes := []rune(text); len(runes) > 8 {
		text = string(runes[:7]) + "…"
	}
	return label + " " + text
}

type labeled struct {
	label string
	v     float64
}

// rows lists the quantiles that llama.cpp prints, with its labels.
func (q Quantiles) rows() []labeled {
	return []labeled{
		{"Maximum", q.Max}, {"99.9%  ", q.P99_9}, {"99.0%  ", q.P99}, {"95.0%  ", q.P95},
		{"90.0%  ", q.P90}, {"Median ", q.Median}, {"10.0%  ", q.P10}, {" 5.0%  ", q.P5},
		{" 1.0%  ", q.P1}, {" 0.1%  ", q.P0_1}, {"Minimum", q.Min},
	}
}

// est formats value ± error the way llama.cpp does, scaled (100 for
// percentages); "n/a" stands in for an error or value that is undefined.
func est(e *Estimate, scale float64, vf, ef string) string {
	if e == nil {
		return "n/a"
	}
	v := fmt.Sprintf(vf, scale*e.Value)
	if e.Err == nil {
		return v + " ± " + pad("n/a", ef)
	}
	return v + " ± " + fmt.Sprintf(ef, scale**e.Err)
}

// pad right-aligns s in the width of the format verb ef ("%10.6f" → 10).
func pad(s, ef string) string {
	w, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(ef, ".", 2)[0], "%"))
	return fmt.Sprintf("%*s", w, s)
}
