// Package sensitivity says which matrices a quantization's damage comes
// from. Over a teacher-forced panel it runs the reference with one unit
// (a matrix, a layer's matrices, or one kind of matrix in every layer)
// taken from the test weights, the forward sweep, and the test with one
// unit restored to the reference's, the reverse sweep; it ranks the units
// by what each did to the logits, attributes each clear call to the units
// whose restoring gives its margin back, and follows the hidden state's
// divergence layer by layer. Every run is the engine's own forward pass
// (engine.Mix), started at the unit's first layer from the residual stream
// the reference (or the test) had there, so only what follows a change is
// recomputed and no unit is quantized twice; on a device (engine.Mix
// with one), each run is the WGSL program from the embeddings. Recipe
// sweeps a model in several schemes and makes, builds and measures a
// scheme per unit within a size. What they find is package attribution's.
package sensitivity

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"slices"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/dump"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/tempfile"
)

// Options configure Sweep.
type Options struct {
	// Unit is how the units were grouped (Units), for the result.
	Unit string
	// Margins is the close/clear rule (margins.Options; TopK is not used).
	Margins margins.Options
	// Controls adds the noise floor (the reference with every matrix
	// perturbed by bf16-rounding-sized noise) and, per unit, the forward
	// sweep with its error replaced by isotropic noise of the same norm:
	// is it the error's direction or its size that hurts?
	Controls bool
	// Culprits is how many units each clear call lists (default 5).
	Culprits int
	// ForwardOnly skips the reverse sweep, and with it the clear calls'
	// culprits and the reverse additivity: what a recipe needs of a
	// scheme is each unit's forward effect alone, in half the runs.
	ForwardOnly bool
	// Progress, if set, is told the runs done of the total.
	Progress func(done, total int)
	// Resume, if set, is where the sweep keeps its state after each
	// window; a sweep of the same Key goes on from there and removes it
	// when done.
	Resume string
	// Key names what is swept (model, test, panel, unit, options): a
	// resume file of another key is refused.
	Key string
}

// state is a sweep's progress: everything a Result is made of, after
// Done windows.
type state struct {
	Key       string             `json:"key"`
	Done      int                `json:"windows_done"`
	Positions int                `json:"positions"`
	Whole     acc                `json:"whole"`
	Floor     acc                `json:"floor"`
	Units     []unitAcc          `json:"units"`
	Layers    []layerAcc         `json:"layers"`
	Calls     []attribution.Call `json:"calls"`
	Criterion margins.Criterion  `json:"criterion"`
}

type unitAcc struct {
	Forward, Reverse, Iso acc
}

// acc gathers an Effect's positions.
type acc struct {
	KLD   []float64 `json:"kld"`
	Flips int       `json:"flips"`
	Clear int       `json:"clear"`
	DP    float64   `json:"sum_delta_p"`
}

func (a *acc) add(r *margins.Report) {
	for _, p := range r.Positions {
		a.KLD = append(a.KLD, p.KLD)
		a.DP += p.DeltaP
		if p.Flip {
			a.Flips++
		}
		if p.Class == margins.Clear {
			a.Clear++
		}
	}
}

// Sweep runs the sweeps of units over windows (each a teacher-forced
// token sequence of at least 2) on x.
func Sweep(x *engine.Mix, windows [][]int, units []attribution.Unit, opt Options) (*attribution.Result, error) {
	g := x.Geometry()
	if opt.Culprits == 0 {
		opt.Culprits = 5
	}
	st, err := resume(opt, len(units), g.NumLayers)
	if err != nil {
		return nil, err
	}
	sw := &sweeper{x: x, units: units, opt: opt, st: st, vocab: g.Vocab, width: g.Vocab + g.Routes(), layers: g.NumLayers}
	if opt.Controls && !x.Boundaries() {
		return nil, fmt.Errorf("the controls run on the CPU: a mix on a device takes no noisy matrices")
	}
	if opt.Controls {
		if err := sw.controls(); err != nil {
			return nil, err
		}
	}
	runs := opt.RunsPerWindow(len(units))
	for w := st.Done; w < len(windows); w++ {
		if err := sw.window(w, windows[w]); err != nil {
			return nil, fmt.Errorf("window %d: %w", w+1, err)
		}
		st.Done = w + 1
		if opt.Progress != nil {
			opt.Progress(st.Done*runs, len(windows)*runs)
		}
		if opt.Resume != "" && st.Done < len(windows) {
			if err := save(opt.Resume, st); err != nil {
				return nil, err
			}
		}
	}
	res := sw.result(len(windows))
	if opt.Resume != "" {
		if err := os.Remove(opt.Resume); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return res, nil
}

// RunsPerWindow is how many forward passes a sweep of units runs per
// window: the reference and the test whole, each unit forward and
// (unless ForwardOnly) reverse, and with controls the noise floor and
// each unit's isotropic control.
func (opt Options) RunsPerWindow(units int) int {
	whole, per := 2, 2
	if opt.ForwardOnly {
		per = 1
	}
	if opt.Controls {
		whole, per = whole+1, per+1
	}
	return whole + per*units
}

type sweeper struct {
	x            *engine.Mix
	units        []attribution.Unit
	opt          Options
	st           *state
	vocab, width int
	layers       int
	floor        map[string][]float32   // every matrix with bf16-rounding noise
	iso          []map[string][]float32 // per unit: its matrices, reference plus isotropic noise
	errNorm      []float64              // per unit: ‖test − ref‖ / ‖ref‖
}

// controls makes the noise floor's and the isotropic control's matrices,
// once: the reference's weights as float32 plus noise (memory: a float32
// copy of the model for each).
func (sw *sweeper) controls() error {
	sw.floor = map[string][]float32{}
	sw.iso = make([]map[string][]float32, len(sw.units))
	sw.errNorm = make([]float64, len(sw.units))
	for i, u := range sw.units {
		rng := rand.New(rand.NewPCG(0x15_0, uint64(i)))
		sw.iso[i] = map[string][]float32{}
		var e2, r2 float64
		for _, name := range u.Tensors {
			ref, test, err := sw.x.Float(name)
			if err != nil {
				return err
			}
			// Isotropic: ref + n·‖test − ref‖/‖n‖ for Gaussian n.
			var en, nn float64
			noise := make([]float32, len(ref))
			for j := range ref {
				d := float64(test[j]) - float64(ref[j])
				en += d * d
				r2 += float64(ref[j]) * float64(ref[j])
				noise[j] = float32(rng.NormFloat64())
				nn += float64(noise[j]) * float64(noise[j])
			}
			e2 += en
			scale := math.Sqrt(en / nn)
			for j := range noise {
				noise[j] = ref[j] + float32(float64(noise[j])*scale)
			}
			sw.iso[i][name] = noise
		}
		sw.errNorm[i] = math.Sqrt(e2 / r2)
	}
	// The floor perturbs every matrix, changed by the test or not.
	rng := rand.New(rand.NewPCG(0xf1_00, 0))
	for _, name := range sw.x.Matrices() {
		ref, _, err := sw.x.Float(name)
		if err != nil {
			return err
		}
		for j, v := range ref {
			// bf16 keeps 8 significant bits: rounding moves a value by up
			// to 2⁻⁹ of itself.
			ref[j] = v * float32(1+(2*rng.Float64()-1)*0x1p-9)
		}
		sw.floor[name] = ref
	}
	return nil
}

// run is one window of the model c chooses from unit layer l's boundary
// (bounds: the residual stream leaving each layer of a full run; none on
// a device, which runs from the embeddings), its rows (T−1, Vocab) copied
// out; seen as Mix.Run's.
func (sw *sweeper) run(ids []int, c engine.Choice, l int, bounds [][]float32, seen func(int, []float32)) ([]float32, error) {
	from, h := 0, []float32(nil)
	if l > 0 && bounds != nil {
		from, h = l, bounds[l-1]
	}
	rows, err := sw.x.Run(ids, c, from, h, seen)
	if err != nil {
		return nil, err
	}
	n := len(ids) - 1
	out := make([]float32, n*sw.vocab)
	for i := range n {
		copy(out[i*sw.vocab:(i+1)*sw.vocab], rows[i*sw.width:])
	}
	return out, nil
}

// full runs a whole window and keeps the residual stream leaving each
// layer (none on a device).
func (sw *sweeper) full(ids []int, c engine.Choice) ([]float32, [][]float32, error) {
	if !sw.x.Boundaries() {
		rows, err := sw.run(ids, c, 0, nil, nil)
		return rows, nil, err
	}
	bounds := make([][]float32, 0, sw.layers)
	rows, err := sw.run(ids, c, 0, nil, func(_ int, h []float32) { bounds = append(bounds, slices.Clone(h)) })
	return rows, bounds, err
}

func (sw *sweeper) compare(ids []int, ref, test []float32) (*margins.Report, error) {
	n := len(ids) - 1
	r, err := margins.Compare(&dump.Logits{Rows: n, Vocab: sw.vocab, Data: ref}, &dump.Logits{Rows: n, Vocab: sw.vocab, Data: test}, ids[1:], sw.opt.Margins)
	if err == nil {
		sw.st.Criterion = r.Criterion
	}
	return r, err
}

func (sw *sweeper) window(w int, ids []int) error {
	if len(ids) < 2 {
		return fmt.Errorf("%d tokens: a window needs at least 2", len(ids))
	}
	all := func(string) bool { return true }
	ref, refB, err := sw.full(ids, engine.Choice{})
	if err != nil {
		return err
	}
	test, testB, err := sw.full(ids, engine.Choice{Test: all})
	if err != nil {
		return err
	}
	whole, err := sw.compare(ids, ref, test)
	if err != nil {
		return err
	}
	sw.st.Whole.add(whole)
	sw.diverge(refB, testB)
	first := len(sw.st.Calls)
	for _, p := range whole.Positions {
		if p.Class == margins.Clear {
			v := sw.vocab
			sw.st.Calls = append(sw.st.Calls, attribution.Call{Window: w, Position: p.Index, Index: sw.st.Positions + p.Index,
				Ref: p.RefChoice, Test: p.TestChoice, Margin: p.Margin,
				Gap: float64(test[p.Index*v+p.RefChoice]) - float64(test[p.Index*v+p.TestChoice])})
		}
	}
	calls := sw.st.Calls[first:]
	shares := make([][]attribution.Share, len(calls))
	sw.st.Positions += len(ids) - 1
	if sw.floor != nil {
		noisy, err := sw.run(ids, engine.Choice{Over: sw.floor}, 0, nil, nil)
		if err != nil {
			return err
		}
		r, err := sw.compare(ids, ref, noisy)
		if err != nil {
			return err
		}
		sw.st.Floor.add(r)
	}
	for i, u := range sw.units {
		in := func(name string) bool { return slices.Contains(u.Tensors, name) }
		a := &sw.st.Units[i]
		// Forward: this unit alone from the test.
		rows, err := sw.run(ids, engine.Choice{Test: in}, u.Layer, refB, nil)
		if err != nil {
			return err
		}
		if err := sw.add(&a.Forward, ids, ref, rows); err != nil {
			return err
		}
		if !sw.opt.ForwardOnly {
			if err := sw.reverse(ids, u, in, testB, ref, &a.Reverse, calls, shares); err != nil {
				return err
			}
		}
		if sw.iso != nil {
			rows, err := sw.run(ids, engine.Choice{Over: sw.iso[i]}, u.Layer, refB, nil)
			if err != nil {
				return err
			}
			if err := sw.add(&a.Iso, ids, ref, rows); err != nil {
				return err
			}
		}
	}
	for c := range calls {
		s := shares[c]
		slices.SortStableFunc(s, func(a, b attribution.Share) int {
			if a.Undoes != b.Undoes {
				if a.Undoes {
					return -1
				}
				return 1
			}
			return cmp.Compare(b.Share, a.Share)
		})
		for _, x := range s {
			calls[c].Total += x.Share
		}
		calls[c].Culprits = s[:min(len(s), sw.opt.Culprits)]
	}
	return nil
}

// reverse runs the test with unit u (its matrices: in) restored to the
// reference's from u's boundary in the test's run (testB), adds the run
// to acc and each clear call's share of its margin given back.
func (sw *sweeper) reverse(ids []int, u attribution.Unit, in func(string) bool, testB [][]float32, ref []float32, a *acc, calls []attribution.Call, shares [][]attribution.Share) error {
	rows, err := sw.run(ids, engine.Choice{Test: func(name string) bool { return !in(name) }}, u.Layer, testB, nil)
	if err != nil {
		return err
	}
	if err := sw.add(a, ids, ref, rows); err != nil {
		return err
	}
	v := sw.vocab
	for c, call := range calls {
		row := rows[call.Position*v : (call.Position+1)*v]
		gap := float64(row[call.Ref]) - float64(row[call.Test])
		shares[c] = append(shares[c], attribution.Share{Unit: u.Name, Share: (gap - call.Gap) / (call.Margin - call.Gap), Undoes: session.Argmax(row) == call.Ref})
	}
	return nil
}

func (sw *sweeper) add(a *acc, ids []int, ref, test []float32) error {
	r, err := sw.compare(ids, ref, test)
	if err != nil {
		return err
	}
	a.add(r)
	return nil
}

// diverge adds a window's hidden states, the reference's and the test's
// leaving each layer (T,d), to the layers' divergence.
func (sw *sweeper) diverge(ref, test [][]float32) {
	for l := range ref {
		d := sw.x.Geometry().Dim
		a := &sw.st.Layers[l]
		for t := 0; t+1 < len(ref[l])/d; t++ { // the rows that predict a target
			r, q := ref[l][t*d:(t+1)*d], test[l][t*d:(t+1)*d]
			var rr, qq, rq, ee float64
			for i := range r {
				rr += float64(r[i]) * float64(r[i])
				qq += float64(q[i]) * float64(q[i])
				rq += float64(r[i]) * float64(q[i])
				e := float64(q[i]) - float64(r[i])
				ee += e * e
			}
			rel := math.Sqrt(ee / rr)
			a.Rel = append(a.Rel, float32(rel))
			a.Cos = append(a.Cos, float32(rq/math.Sqrt(rr*qq)))
			a.Signal += rr
			a.Noise += ee
		}
	}
}

// layerAcc gathers a layer's Divergence.
type layerAcc struct {
	Rel    []float32 `json:"rel"`
	Cos    []float32 `json:"cos"`
	Signal float64   `json:"signal"`
	Noise  float64   `json:"noise"`
}

// resume reads opt.Resume's state if there is one of opt.Key, else starts
// afresh.
func resume(opt Options, units, layers int) (*state, error) {
	fresh := &state{Key: opt.Key, Units: make([]unitAcc, units), Layers: make([]layerAcc, layers)}
	if opt.Resume == "" {
		return fresh, nil
	}
	data, err := os.ReadFile(opt.Resume)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	} else if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %v (remove it to start the sweep again)", opt.Resume, err)
	}
	if st.Key != opt.Key || len(st.Units) != units || len(st.Layers) != layers {
		return nil, fmt.Errorf("%s holds a sweep of another model, test, panel or unit: remove it, or give another --out", opt.Resume)
	}
	return &st, nil
}

func save(path string, st *state) error {
	tmp, err := tempfile.Write(path, func(w io.Writer) error { return json.NewEncoder(w).Encode(st) })
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}
