package synth

import (
	"fmt"
	"strings"

	"logitscope/sidecar"
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

// demoPanel is the corpus's first two paragraphs: plain prose about what
// the page shows, a few hundred tokens of the built-in tokenizer, which
// the tiny preset runs in well under a second.
func demoPanel() string {
	paras := strings.SplitN(corpus, "\n\n", 3)
	return strings.Join(paras[:2], "\n\n") + "\n"
}
