package conform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ReadSummary reads the summary.json in dir (a conform --out directory),
// or the file path itself when it is one.
func ReadSummary(path string) (*Summary, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "summary.json")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return &s, nil
}

// Merge combines the summaries of the shards of one suite's run (conform
// --shard i/n on several machines, each given here by its --out
// directory, in any order) into the summary of the whole suite: its cases
// in the suite's order, their counts summed, Seconds the sum of the
// shards' (machine time, as JUnit adds its cases'). Each case's Dir is
// rewritten under the directory it was read from, where a CI job that
// downloads the shards' artifacts finds it. Shards of different suites
// (name or file), runtimes or shard counts, a shard given twice and a
// missing one are refused, naming the directories.
func Merge(dirs []string) (*Summary, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no shard directories to merge")
	}
	shards := make([]*Summary, len(dirs))
	var n int
	for k, d := range dirs {
		s, err := ReadSummary(d)
		if err != nil {
			return nil, err
		}
		sh, err := ParseShard(s.Shard)
		if err != nil {
			return nil, fmt.Errorf("%s: shard %q: %v", d, s.Shard, err)
		}
		// A summary is a file from another machine: its counts bound what
		// the merge allocates and loops over.
		switch {
		case s.SuiteCases < 1 || s.SuiteCases > maxCases:
			return nil, fmt.Errorf("%s: suite_cases %d: want 1 to %d", d, s.SuiteCases, maxCases)
		case sh.N > s.SuiteCases:
			return nil, fmt.Errorf("%s: shard %s of a suite of %d cases: more shards than cases", d, s.Shard, s.SuiteCases)
		}
		first := shards[0]
		if k == 0 {
			first, n = s, sh.N
		}
		switch {
		case s.Suite != first.Suite || s.SuiteSHA256 != first.SuiteSHA256 || s.SuiteCases != first.SuiteCases:
			return nil, fmt.Errorf("%s is suite %s (%d cases, sha256 %.12s), %s is suite %s (%d cases, sha256 %.12s): shards of different suites",
				dirs[0], first.Suite, first.SuiteCases, first.SuiteSHA256, d, s.Suite, s.SuiteCases, s.SuiteSHA256)
		case s.Runtime != first.Runtime:
			return nil, fmt.Errorf("%s ran on runtime %s, %s on %s: shards of different runs", dirs[0], first.Runtime, d, s.Runtime)
		case sh.N != n:
			return nil, fmt.Errorf("%s is shard %s, %s is shard %s: shards of different splits", dirs[0], first.Shard, d, s.Shard)
		}
		for j, o := range shards[:k] {
			if o.Shard == s.Shard {
				return nil, fmt.Errorf("shard %s given twice: %s and %s", s.Shard, dirs[j], d)
			}
		}
		if want := len(Shard{sh.I, sh.N}.Pick(s.SuiteCases)); len(s.Cases) != want {
			return nil, fmt.Errorf("%s: shard %s of %d cases holds %d cases, want %d (an unfinished run?)", d, s.Shard, s.SuiteCases, len(s.Cases), want)
		}
		for i := range s.Cases {
			s.Cases[i].Dir = filepath.Join(d, s.Cases[i].Name)
		}
		shards[k] = s
	}
	if len(shards) < n {
		var missing []string
		for i := 1; i <= n; i++ {
			if !slices.ContainsFunc(shards, func(s *Summary) bool { return s.Shard == Shard{i, n}.String() }) {
				missing = append(missing, Shard{i, n}.String())
			}
		}
		return nil, fmt.Errorf("missing shards %s of %d (have %s)", strings.Join(missing, ", "), n, strings.Join(dirs, ", "))
	}

	first := shards[0]
	m := &Summary{Suite: first.Suite, SuiteSHA256: first.SuiteSHA256, SuiteCases: first.SuiteCases, Runtime: first.Runtime,
		Shard: fmt.Sprintf("1-%d/%d", n, n), Cases: make([]Result, first.SuiteCases)}
	for _, s := range shards {
		sh, _ := ParseShard(s.Shard)
		for k, i := range sh.Pick(s.SuiteCases) {
			m.Cases[i] = s.Cases[k]
		}
		m.Seconds += s.Seconds
	}
	// The counts are the cases', not what the shards' summaries say of
	// them.
	for _, c := range m.Cases {
		switch c.Status {
		case "pass":
			m.Passed++
		case "fail":
			m.Failed++
		case "error":
			m.Errors++
		default:
			return nil, fmt.Errorf("case %s (%s): status %q: want pass, fail or error", c.Name, filepath.Dir(c.Dir), c.Status)
		}
	}
	return m, nil
}

// maxCases bounds a suite's cases (and so its shards) as a summary states
// them.
const maxCases = 100000
