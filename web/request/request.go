// Package request turns the page's spec into the engine requests of its
// two sides, as abi messages: the page (web/ui) sends them to engine.wasm,
// and the end-to-end tests send the same ones to engine.wasm under wazero.
// It lives on the page's side so that the document (snapshot) need not
// speak the engine's language.
package request

import (
	"fmt"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/run/session"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/wasm/abi"
)

// Ref is the engine request of the reference side. The page tokenizes
// (the same tokenizer package as the engine), so the request carries ids
// and the snapshot can show the prompt's tokens; the prompt is rendered
// with the checkpoint's chat template tmpl (ChatML when empty).
func Ref(s snapshot.Spec, tok *tokenizer.Tokenizer, tmpl chat.TemplateConfig) (abi.Request, error) {
	if err := s.Check(); err != nil {
		return abi.Request{}, err
	}
	if s.Mode == snapshot.Panel {
		w := session.Windows(tok.Encode(s.Panel), s.Window, chat.RawPrefix(tok, tmpl))
		if len(w) == 0 {
			return abi.Request{}, fmt.Errorf("panel: the text is %d token(s): a window needs at least 2", len(tok.Encode(s.Panel)))
		}
		return abi.Request{Mode: session.Panel, Windows: w}, nil
	}
	prompt, err := chat.Render(tmpl, tokenizer.Turns(s.System, s.Prompt), true)
	if err != nil {
		return abi.Request{}, err
	}
	ids := tok.Encode(prompt)
	return abi.Request{Mode: session.Greedy, PromptIDs: ids, MaxNew: s.MaxNew, Stops: s.Stops}, nil
}

// Test is the test side's request given the reference's: the same
// panel, or the reference's prompt and output fed back (teacher-forced
// agreement), so that row i of both sides predicts the same position.
func Test(ref abi.Request, res abi.Result) abi.Request {
	if ref.Mode == session.Panel {
		return ref
	}
	return abi.Request{Mode: session.Forced, PromptIDs: res.PromptIDs, Outputs: res.Output}
}

// Capacity is the KV cache (tokens) a request needs.
func Capacity(r abi.Request) int {
	return session.Request{Mode: r.Mode, PromptIDs: r.PromptIDs, MaxNew: r.MaxNew,
		Outputs: r.Outputs, Windows: r.Windows}.Capacity()
}
