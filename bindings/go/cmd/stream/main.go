// Command stream prints a story from the model built into llmrt, token by
// token. Ctrl-C cancels the generation.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"llmrt"
)

func main() {
	prompt := "Once upon a time"
	if len(os.Args) > 1 {
		prompt = os.Args[1]
	}
	llm, err := llmrt.Open(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer llm.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := llmrt.DefaultSampling()
	s.Temperature, s.Seed = 0.8, 42
	fmt.Print(prompt)
	res, err := llm.Generate(ctx, llmrt.Request{Prompt: prompt, MaxTokens: 200, Sampling: &s},
		func(ev llmrt.Event) error {
			fmt.Print(ev.Text)
			return nil
		})
	fmt.Println()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m := res.Sequences[0].Metrics
	fmt.Fprintf(os.Stderr, "[%s: %d tokens, %.2f ms/token]\n", res.Finish(), m.GeneratedTokens, m.TPOTMs)
}
