package tokenizer_test

import (
	"fmt"

	"logitscope/internal/text/tokenizer"
)

func ExampleChatML() {
	prompt := tokenizer.ChatML([]tokenizer.Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Hi!"},
	}, true)
	fmt.Print(prompt)
	// Output:
	// <|im_start|>system
	// You are a helpful assistant.<|im_end|>
	// <|im_start|>user
	// Hi!<|im_end|>
	// <|im_start|>assistant
}

func ExampleTokenizer_Encode() {
	tok, err := tokenizer.Load("testdata/small.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("<|im_start|>hello world")
	for _, id := range ids {
		s, _ := tok.Token(id)
		fmt.Printf("%d %q\n", id, s)
	}
	fmt.Printf("%q\n", tok.Decode(ids, true))
	// Output:
	// 281 "<|im_start|>"
	// 260 "hello"
	// 265 "Ġworld"
	// "hello world"
}

func ExampleTokenizer_Decode() {
	tok, err := tokenizer.Load("testdata/small.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	// 0xE2 0x82 0xAC is "€"; cut after two bytes, the prefix becomes one
	// U+FFFD, as in Hugging Face.
	fmt.Printf("%q\n", tok.Decode([]int{0xE2, 0x82, 0xAC}, false))
	fmt.Printf("%+q\n", tok.Decode([]int{0xE2, 0x82, 'x'}, false))
	// Output:
	// "€"
	// "\ufffdx"
}
