package conform

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one line a case: its result, metrics and what failed.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tMEAN KLD\tSAME TOP-1\tCLEAR FLIPS\tTIME\tDETAIL")
	for _, r := range s.Cases {
		kld, same, clear := "-", "-", "-"
		if m := r.Metrics; m != nil {
			kld, same, clear = fmt.Sprintf("%.4g", m.MeanKLD), fmt.Sprintf("%.2f%%", 100*m.SameTop1), strconv.Itoa(m.ClearFlips)
		}
		detail := strings.Join(r.Failures, "; ")
		if detail != "" {
			detail += r.viewHint()
		}
		if r.Error != "" {
			detail = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f s\t%s\n", r.Name, r.Status, kld, same, clear, r.Seconds, detail)
	}
	return tw.Flush()
}

// JUnit XML as Jenkins, GitLab and GitHub test reporters read it.
type (
	JUnitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []JUnitSuite `xml:"testsuite"`
	}
	JUnitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Time       string          `xml:"time,attr"`
		Properties []JUnitProperty `xml:"properties>property"`
		Cases      []JUnitCase     `xml:"testcase"`
	}
	JUnitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	JUnitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *JUnitProblem `xml:"failure,omitempty"`
		Error     *JUnitProblem `xml:"error,omitempty"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	JUnitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

// JUnit is the summary as JUnit XML: one testsuite, a testcase per case,
// a failure naming every metric past its bound, an error for a case that
// could not run.
func (s *Summary) JUnit() JUnitSuites {
	secs := func(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
	js := JUnitSuite{Name: s.Suite, Tests: len(s.Cases), Failures: s.Failed, Errors: s.Errors, Time: secs(s.Seconds),
		Properties: []JUnitProperty{{"runtime", s.Runtime}, {"shard", s.Shard}, {"out", s.Out}}}
	for _, r := range s.Cases {
		jc := JUnitCase{Name: r.Name, Classname: "logitscope.conform." + s.Suite, Time: secs(r.Seconds),
			SystemOut: "outputs: " + r.Dir}
		switch r.Status {
		case "fail":
			// The message names the snapshot (and its link) that shows the
			// positions behind the failing metrics.
			jc.Failure = &JUnitProblem{Message: strings.Join(r.Failures, "; ") + r.viewHint(), Type: "threshold",
				Text: strings.Join(append(slices.Clone(r.Failures), r.snapshotLines()...), "\n")}
		case "error":
			jc.Error = &JUnitProblem{Message: r.Error, Type: "error", Text: r.Error}
		}
		js.Cases = append(js.Cases, jc)
	}
	return JUnitSuites{Name: s.Suite, Tests: js.Tests, Failures: js.Failures, Errors: js.Errors, Time: js.Time,
		Suites: []JUnitSuite{js}}
}

// WriteJUnit writes JUnit() to path.
func (s *Summary) WriteJUnit(path string) error {
	b, err := xml.MarshalIndent(s.JUnit(), "", "  ")
	if err != nil {
		return err
	}
	b = append([]byte(xml.Header), append(b, '\n')...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}

// snapshotLines name each snapshot file and its link, for the JUnit
// failure's text.
func (r *Result) snapshotLines() []string {
	var out []string
	for i, p := range r.Snapshots {
		l := "snapshot: " + p
		if i < len(r.Links) && r.Links[i] != "" {
			l += " " + r.Links[i]
		}
		out = append(out, l)
	}
	return out
}
