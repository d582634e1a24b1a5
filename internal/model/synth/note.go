package synth

import (
	"fmt"
	"strings"

	"logitscope/internal/format/sidecar"
)

// Note is the sidecar Write puts beside a synthetic checkpoint: it says the
// weights are random, so the page does not present the numbers as a
// model's quality, and gives the page a ready prompt and panel text from
// the corpus the tokenizer learned (so its tokens read as words).
func Note(p Preset, seed uint64) sidecar.Note {
	return sidecar.Note{
		Nature: sidecar.Synthetic,
		About: fmt.Sprintf("synthetic %s checkpoint (%s, seed %d): random weights, not a trained model, so its text is noise; it shows how the page works",
			p.Name, p.Arch, seed),
		Prompt: "What is the capital of France?",
		Panel:  demoPanel(),
	}
}

// demoPanel is the corpus's first paragraph: plain prose about what the
// page shows, 211 tokens of the built-in tokenizer (four windows of 64),
// short enough that the first screen finishes soon after the page
// loads and long enough to show several window starts.
func demoPanel() string {
	return strings.SplitN(corpus, "\n\n", 2)[0] + "\n"
}
