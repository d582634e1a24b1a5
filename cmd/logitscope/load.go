package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"logitscope/quant"
	"logitscope/variant"
)

// variantDir maps --variant to a directory: "" for f32 (the checkpoint's
// own bytes), MODEL/variants/SCHEME for a scheme name, else the path given.
func variantDir(modelDir, name string) string {
	switch {
	case name == "f32" || name == "":
		return ""
	case !strings.ContainsAny(name, `/\`):
		if _, err := quant.ParseScheme(name); err == nil {
			return variant.DefaultDir(modelDir, name)
		}
	}
	return name
}

// variantLabel is the scheme a --variant value names, for receipts.
func variantLabel(name string) string {
	if name == "" {
		return "f32"
	}
	if _, err := quant.ParseScheme(name); err == nil || name == "f32" {
		return name
	}
	return filepath.Base(name)
}

// loadProgress reports weight loading on the terminal, at most every 5%.
func loadProgress(w io.Writer) func(done, total int64) {
	last := int64(-1)
	return func(done, total int64) {
		if pct := done * 100 / max(total, 1); pct/5 != last/5 || done == total {
			last = pct
			fmt.Fprintf(w, "\rloading weights: %3d%% (%d / %d MB)", pct, done>>20, total>>20)
			if done == total {
				fmt.Fprintln(w)
			}
		}
	}
}
