// Command benchtable turns `go test -bench` output on stdin into a table
// with one row per benchmark and one column per reported unit.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	type row struct {
		name string
		vals map[string]string
	}
	var rows []row
	var units []string
	seen := map[string]bool{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Text()
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "---") || strings.Contains(line, "_test.go") {
				fmt.Fprintln(os.Stderr, line)
			}
			continue
		}
		// Name-GOMAXPROCS  N  value unit  value unit ...
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		r := row{name: name, vals: map[string]string{}}
		for i := 2; i+1 < len(f); i += 2 {
			val, unit := f[i], f[i+1]
			// Per-op profiles report "<op>-ms": one row per op.
			if op, ok := strings.CutSuffix(unit, "-ms"); ok {
				rows = append(rows, row{name: name + " " + op, vals: map[string]string{"ms/op": val}})
				unit = "ms/op"
				if !seen[unit] {
					seen[unit] = true
					units = append(units, unit)
				}
				continue
			}
			r.vals[unit] = val
			if !seen[unit] {
				seen[unit] = true
				units = append(units, unit)
			}
		}
		rows = append(rows, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "benchmark\t")
	for _, u := range units {
		fmt.Fprintf(w, "%s\t", u)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t", r.name)
		for _, u := range units {
			fmt.Fprintf(w, "%s\t", r.vals[u])
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark lines on stdin")
		os.Exit(1)
	}
}
