package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/kvlease/kvlease/model/llamafile"
)

// modelFileFlags point the engines a command starts (up, demo, bench
// --scenario) at a real model file: serve's --model-file and
// --tokenizer-file, passed on to every engine.
type modelFileFlags struct {
	model, tokenizer string
	name             string // the served model name the file gives (serve's default)
}

func addModelFileFlags(fs *flag.FlagSet) *modelFileFlags {
	m := &modelFileFlags{}
	fs.StringVar(&m.model, "model-file", "", "every engine runs this real llama-family model (kvlease serve --model-file): a GGUF v3 file (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) or a llama2.c checkpoint; default: the simulated model")
	fs.StringVar(&m.tokenizer, "tokenizer-file", "", "the tokenizer.bin of a llama2.c --model-file (kvlease serve --tokenizer-file); default tokenizer.bin beside it")
	return m
}

// check opens the files once, so that a missing, truncated or unsupported
// model fails at start under the flag's name rather than in every engine's
// log, and makes the paths absolute for the engines.
func (m *modelFileFlags) check() error {
	if m.tokenizer != "" && m.model == "" {
		return errors.New("--tokenizer-file: goes with --model-file")
	}
	if m.model == "" {
		return nil
	}
	llm, err := llamafile.Open(m.model, m.tokenizer)
	if err != nil {
		return fmt.Errorf("--model-file: %w", err)
	}
	m.name = llm.Name()
	if err := llm.Close(); err != nil {
		return fmt.Errorf("--model-file: %w", err)
	}
	for _, p := range []*string{&m.model, &m.tokenizer} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	return nil
}

// serveArgs are the engines' flags: none without --model-file.
func (m *modelFileFlags) serveArgs() []string {
	if m.model == "" {
		return nil
	}
	args := []string{"--model-file", m.model}
	if m.tokenizer != "" {
		args = append(args, "--tokenizer-file", m.tokenizer)
	}
	return args
}

// describe names what the engines serve: the model file, or the simulated
// profile.
func (m *modelFileFlags) describe(profile string) string {
	if m.model == "" {
		return "profile " + profile
	}
	return "model file " + m.model
}
