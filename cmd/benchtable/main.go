// Command benchtable turns `go test -bench` output on stdin into tables
// with one row per benchmark and one column per reported unit.
//
// A benchmark that measures a peer beside logitscope reports the peer's
// measure of unit U as "peer-U"; such rows make the first table, "ours vs
// peers", where the main measures lead and each pair is followed by its
// ratio, ours / peer, in a column "U x" (named by U up to its first '-':
// "decode x"); ns/op is left out. The other rows make the second table. A
// unit "<op>-ms" (per-op profiles) becomes a row of its own with the unit
// ms/op. Lines that report a failure go to stderr.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	if err := run(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

type row struct {
	name string
	vals map[string]string
}

// table is rows with their columns in the order they first appeared.
type table struct {
	rows  []row
	units []string
	seen  map[string]bool
}

func (t *table) add(r row, units []string) {
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.rows = append(t.rows, r)
	for _, u := range units {
		if !t.seen[u] {
			t.seen[u] = true
			t.units = append(t.units, u)
		}
	}
}

const peerPrefix = "peer-"

// lead are the peers table's first columns, in this order (go test prints
// a benchmark's units sorted by name).
var lead = []string{"prefill-tok/s", "decode-tok/s", "peakRSS-MB", "weight-GB/s", "copy-GB/s", "weight/copy", "dispatches/tok"}

// leadFirst orders units as lead, then the others as they came.
func leadFirst(units []string) []string {
	var out []string
	for _, u := range lead {
		if slices.Contains(units, u) {
			out = append(out, u)
		}
	}
	for _, u := range units {
		if !slices.Contains(lead, u) {
			out = append(out, u)
		}
	}
	return out
}

// ratioUnit names the column of ours / peer for unit u.
func ratioUnit(u string) string {
	name, _, _ := strings.Cut(u, "-")
	return name + " x"
}

func run(in io.Reader, out, errs io.Writer) error {
	var peers, others table
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "---") || strings.Contains(line, "_test.go") {
				fmt.Fprintln(errs, line)
			}
			continue
		}
		// Name-GOMAXPROCS  N  value unit  value unit ...
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		r := row{name: name, vals: map[string]string{}}
		var units []string
		hasPeer := false
		for i := 2; i+1 < len(f); i += 2 {
			val, unit := f[i], f[i+1]
			// Per-op profiles report "<op>-ms": one row per op.
			if op, ok := strings.CutSuffix(unit, "-ms"); ok {
				others.add(row{name: name + " " + op, vals: map[string]string{"ms/op": val}}, []string{"ms/op"})
				continue
			}
			r.vals[unit] = val
			units = append(units, unit)
			hasPeer = hasPeer || strings.HasPrefix(unit, peerPrefix)
		}
		if !hasPeer {
			others.add(r, units)
			continue
		}
		// Each measure that has a peer is followed by the peer's and the
		// ratio; the peer's other measures (its warm-up) keep their place.
		// ns/op is left out: a pass there times both sides and setup.
		var ordered []string
		for _, u := range leadFirst(units) {
			if u == "ns/op" || strings.HasPrefix(u, peerPrefix) && r.vals[strings.TrimPrefix(u, peerPrefix)] != "" {
				continue
			}
			ordered = append(ordered, u)
			if p, ok := r.vals[peerPrefix+u]; ok {
				ordered = append(ordered, peerPrefix+u, ratioUnit(u))
				r.vals[ratioUnit(u)] = ratio(r.vals[u], p)
			}
		}
		peers.add(r, ordered)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(peers.rows)+len(others.rows) == 0 {
		return fmt.Errorf("no benchmark lines on stdin")
	}
	if len(peers.rows) > 0 {
		fmt.Fprintln(out, "ours vs peers (x = ours / peer)")
		peers.print(out)
		if len(others.rows) > 0 {
			fmt.Fprintln(out)
		}
	}
	if len(others.rows) > 0 {
		others.print(out)
	}
	return nil
}

// ratio is ours / peer to three significant digits, "" when either is
// not a positive number.
func ratio(ours, peer string) string {
	a, errA := strconv.ParseFloat(ours, 64)
	b, errB := strconv.ParseFloat(peer, 64)
	if errA != nil || errB != nil || a <= 0 || b <= 0 {
		return ""
	}
	return strconv.FormatFloat(a/b, 'g', 3, 64)
}

func (t *table) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "benchmark\t")
	for _, u := range t.units {
		fmt.Fprintf(w, "%s\t", u)
	}
	fmt.Fprintln(w)
	for _, r := range t.rows {
		fmt.Fprintf(w, "%s\t", r.name)
		for _, u := range t.units {
			fmt.Fprintf(w, "%s\t", r.vals[u])
		}
		fmt.Fprintln(w)
	}
	w.Flush()
}
