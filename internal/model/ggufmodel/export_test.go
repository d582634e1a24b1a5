package ggufmodel

// Internals the external tests (package ggufmodel_test) check directly.
var (
	TokenizerKV   = tokenizerKV
	Llama3Scaling = llama3Scaling
	RopeFreqs     = ropeFreqs
)

// PreTokenizer is the tokenizer.json pre_tokenizer a split name derives.
func PreTokenizer(name string) any { return preSplits[name].pre }
