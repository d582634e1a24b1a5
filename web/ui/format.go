package main

// Number and text formatting for the page. Pure Go (no syscall/js), so
// it is tested natively with view.go.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/ggufmodel"
)

// fixed formats v with prec decimals; "—" for NaN or infinity.
func fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// pct formats a share (0.25) as a percentage ("25.000%").
func pct(v float64, prec int) string { return fixed(100*v, prec) + "%" }

// est formats an estimate as llama.cpp does, "value ± err", scaled (100
// for percentages) with prec decimals; "n/a" where undefined.
func est(e *margins.Estimate, scale float64, prec int, unit string) string {
	if e == nil {
		return "n/a"
	}
	s := fixed(scale*e.Value, prec)
	if e.Err == nil {
		return s + unit + " ± n/a"
	}
	return s + " ± " + fixed(scale**e.Err, prec) + unit
}

// ms formats a duration in milliseconds for people: "840 ms", "12.4 s".
func ms(v float64) string {
	switch {
	case v <= 0 || math.IsNaN(v):
		return "—"
	case v < 10:
		return fixed(v, 1) + " ms"
	case v < 10000:
		return fixed(v, 0) + " ms"
	}
	return fixed(v/1000, 1) + " s"
}

// size formats a byte count: "512 B", "1.5 MB", "2.31 GB".
func size(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f B", n)
	case n < 10:
		return fmt.Sprintf("%.2f %s", n, units[i])
	case n < 100:
		return fmt.Sprintf("%.1f %s", n, units[i])
	}
	return fmt.Sprintf("%.0f %s", n, units[i])
}

// glyph is a run of a token's text as the page draws it: Class "" for
// text as written, "ws" for whitespace made visible, "ctl" for a control
// character, "byte" for a byte that is no character alone (tokenizer.Piece
// writes it <0xNN>), "empty" for a token without text. The strip, the
// top-k tables and the inspector draw the same glyphs, styled by class.
type glyph struct{ Text, Class string }

// glyphs splits a token's text into glyphs. In the strip (strip true) a
// space stays a space, so that the text reads naturally, and a newline
// is marked ↵ and then breaks the line; elsewhere a space is ␣ and a
// newline ↵ alone; a tab is ⇥. Other control characters are named by
// their byte as byte tokens are (U+000F is <0x0F>, U+007F <0x7F>), C1
// controls by their code point (U+0085): Unicode's control pictures
// (␏) are missing from common fonts (DejaVu has none) and would draw as
// empty boxes.
func glyphs(s string, strip bool) []glyph {
	if s == "" {
		return []glyph{{"∅", "empty"}}
	}
	var out []glyph
	var text strings.Builder
	emit := func(g glyph) {
		if text.Len() > 0 {
			out = append(out, glyph{text.String(), ""})
			text.Reset()
		}
		out = append(out, g)
	}
	for i := 0; i < len(s); {
		if b, ok := byteGlyph(s[i:]); ok {
			emit(glyph{b, "byte"})
			i += len(b)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == ' ' && strip:
			text.WriteRune(r)
		case r == ' ':
			emit(glyph{"␣", "ws"})
		case r == '\n':
			emit(glyph{"↵", "ws"})
			if strip {
				text.WriteByte('\n')
			}
		case r == '\t':
			emit(glyph{"⇥", "ws"})
		case r < 0x20 || r == 0x7f:
			emit(glyph{fmt.Sprintf("<0x%02X>", r), "ctl"})
		case r >= 0x80 && r < 0xa0:
			emit(glyph{fmt.Sprintf("U+%04X", r), "ctl"})
		default:
			text.WriteRune(r)
		}
	}
	if text.Len() > 0 {
		out = append(out, glyph{text.String(), ""})
	}
	return out
}

// byteGlyph is the <0xNN> at the start of s (two upper-case hex digits,
// as tokenizer.Piece writes a byte), if there is one.
func byteGlyph(s string) (string, bool) {
	if len(s) < 6 || s[:3] != "<0x" || s[5] != '>' {
		return "", false
	}
	for _, c := range s[3:5] {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return "", false
		}
	}
	return s[:6], true
}

// visible is a token's glyphs as plain text, for places without markup
// of their own (a quoted token in a sentence, a title).
func visible(s string) string {
	var b strings.Builder
	for _, g := range glyphs(s, false) {
		b.WriteString(g.Text)
	}
	return b.String()
}

// short cuts a hex digest for display.
func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// snapID is the id in a /r/<id> path (32 lowercase hex digits, as the
// server names runs), or "".
func snapID(path string) string {
	id, ok := strings.CutPrefix(path, "/r/")
	if !ok || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	return id
}

// ggufNote describes a side's GGUF file as llama.cpp users name a
// quantization: its tensors per type ("GGUF · Q4_K 169, Q6_K 29, F32
// 113"), its size and sha256, and whether it was read from the user's disk
// (and so never reached the server).
func ggufNote(g *snapshot.GGUF) string {
	s := "GGUF · " + ggufmodel.Mix(g.Types)
	if g.Bytes > 0 {
		s += " · " + size(float64(g.Bytes))
	}
	if g.SHA256 != "" {
		s += " · sha256 " + short(g.SHA256)
	}
	if g.Local {
		s += " · local file, not uploaded"
	}
	return s
}

// hubNote describes a side's hub checkpoint: its format and settings as
// its config.json states them ("gptq 4-bit g128 sym") and its fingerprint,
// the one a capture's receipt records.
func hubNote(h *receipt.Hub) string {
	s := h.Format
	if h.SHA256 != "" {
		s += " · fingerprint " + short(h.SHA256)
	}
	return s
}

// modelName is how the page names a model: a served model's name, or a
// folder from this computer as such.
func modelName(m string) string {
	name, local := snapshot.LocalModel(m)
	switch {
	case !local:
		return m
	case name == "":
		return "a model folder from this computer…"
	}
	return "folder " + name + " (from this computer)"
}

// localModelNote describes a run's model when it was a folder from the
// user's disk: its name, that nothing of it reached the server, and the
// checkpoint's fingerprint, which says exactly which weights ran; "" for
// a served model.
func localModelNote(s *snapshot.Spec) string {
	name, local := snapshot.LocalModel(s.Model)
	if !local || name == "" {
		return ""
	}
	n := "model folder " + name + " · local files, not uploaded"
	if s.Fingerprint != "" {
		n += " · checkpoint fingerprint " + short(s.Fingerprint)
	}
	return n
}
