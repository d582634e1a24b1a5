// Package checkpoint opens a Hugging Face model directory: config.json,
// generation_config.json, tokenizer files and one or more safetensors shards.
package checkpoint

import (
	"errors"

	"logitscope/safetensors"
)

// Config holds the fields of config.json that the forward pass needs.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	HiddenAct             string   `json:"hidden_act"`
	AttentionBias         *bool    `json:"attention_bias,omitempty"`
	TorchDtype            string   `json:"torch_dtype"`
}

// Arch is the single architecture name.
func (c Config) Arch() string { panic("TODO") }

// ParseConfig parses and validates config.json bytes; name is used in errors.
func ParseConfig(data []byte, name string) (Config, error) { return Config{}, errTODO }

// GenerationConfig holds generation_config.json's token ids.
type GenerationConfig struct {
	BOSTokenID  *int
	EOSTokenIDs []int
}

// ParseGenerationConfig accepts eos_token_id as an int or a list of ints.
func ParseGenerationConfig(data []byte, name string) (GenerationConfig, error) {
	return GenerationConfig{}, errTODO
}

// Checkpoint is an opened model directory.
type Checkpoint struct {
	Dir        string
	Config     Config
	Generation GenerationConfig
}

var errTODO = errors.New("TODO")

// Resolve maps a hub cache repo folder (models--org--name with snapshots/)
// to its only snapshot; any other directory is returned as is.
func Resolve(path string) (string, error) { return "", errTODO }

// Open resolves path and opens config, generation config and all shards.
func Open(path string) (*Checkpoint, error) { return nil, errTODO }

// Names lists every tensor across shards, sorted.
func (c *Checkpoint) Names() []string { return nil }

// Info locates a tensor and names the shard file that holds it.
func (c *Checkpoint) Info(name string) (safetensors.TensorInfo, string, bool) {
	return safetensors.TensorInfo{}, "", false
}

// Float32 decodes a tensor to float32 and returns its shape.
func (c *Checkpoint) Float32(name string) ([]float32, []int, error) { return nil, nil, errTODO }

// TokenizerPath is the path of tokenizer.json in the checkpoint directory.
func (c *Checkpoint) TokenizerPath() string { panic("TODO") }

// Close closes every shard.
func (c *Checkpoint) Close() error { return nil }
