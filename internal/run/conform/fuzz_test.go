package conform

import (
	"strings"
	"testing"
)

// FuzzParse: a suite that loads names every case with a plain directory
// name, has its defaults filled and its thresholds in range.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"s","cases":[{"name":"a","model":"m","test":"q8","panel":"p.txt","thresholds":{"max_mean_kld":0.1,"min_same_top1":0.9,"max_clear_flips":0}}]}`))
	f.Add([]byte(`{"cases":[{"name":"..","model":"m","test":"q4","prompts":["hi"]}]}`))
	f.Add([]byte(`{"cases":[{"name":"a/b","model":"m","test":"q4","prompts":["hi"],"max_new":-1}]}`))
	f.Add([]byte(`{"description":["x"],"cases":[{"name":"A","model":"m","test":"q4","prompts":["hi"]},{"name":"a","model":"m","test":"q4","prompts":["hi"]}]}`))
	f.Add([]byte(`{"cases":[]} {}`))
	dir := f.TempDir() // where a golden would be: none is there
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parse(b, dir)
		if err != nil {
			return
		}
		if s.Name == "" || len(s.Cases) == 0 {
			t.Fatalf("suite %q with %d cases", s.Name, len(s.Cases))
		}
		for _, c := range s.Cases {
			if c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsAny(c.Name, `/\`) {
				t.Fatalf("case name %q", c.Name)
			}
			if c.Reference == "" || c.Test == "" || c.Model == "" || c.MaxNew < 1 || c.Window < 2 {
				t.Fatalf("case %q: %+v", c.Name, c)
			}
			th := c.Thresholds
			if th.MinSameTop1 != nil && !(*th.MinSameTop1 >= 0 && *th.MinSameTop1 <= 1) ||
				th.MaxMeanKLD != nil && !(*th.MaxMeanKLD >= 0) ||
				th.MaxClearFlips != nil && *th.MaxClearFlips < 0 ||
				th.MaxAbsLogitDiff != nil && !(*th.MaxAbsLogitDiff >= 0) {
				t.Fatalf("case %q: thresholds out of range", c.Name)
			}
		}
	})
}

// FuzzParseShard: an accepted shard is 1 ≤ i ≤ n and prints back as given
// (less any leading zeros or sign); its Pick is a subset of the cases.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"", "1/2", "2/2", "0/1", "3/2", "-1/2", "1/0", "+1/2", "a/b", "1/2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		if sh.I < 1 || sh.I > sh.N {
			t.Fatalf("%q: shard %+v", s, sh)
		}
		back, err := ParseShard(sh.String())
		if err != nil || back != sh {
			t.Fatalf("%q: %+v prints as %q, which parses as %+v, %v", s, sh, sh.String(), back, err)
		}
		for _, i := range sh.Pick(10) {
			if i < 0 || i >= 10 || i%sh.N != sh.I-1 {
				t.Fatalf("%q: picks case %d", s, i)
			}
		}
	})
}
