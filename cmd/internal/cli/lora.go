package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kvlease/kvlease/httpapi"
)

// runtimeLoRAEnv is vLLM's switch for the adapter load and unload
// endpoints; kvlease reads the same variable ("1" or "true").
const runtimeLoRAEnv = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"

// loraModules is the repeatable --lora-modules flag: each value is
// name=path or vLLM's JSON form {"name", "path", "base_model_name"}.
type loraModules []httpapi.LoRAModule

func (l *loraModules) String() string { return "" }

func (l *loraModules) Set(v string) error {
	m, err := parseLoRAModule(v)
	if err != nil {
		return err
	}
	*l = append(*l, m)
	return nil
}

// parseLoRAModule parses one --lora-modules value as vLLM does: name=path
// when it has '=' and no ',', else a JSON object.
func parseLoRAModule(v string) (httpapi.LoRAModule, error) {
	v = strings.TrimSpace(v)
	if strings.Contains(v, "=") && !strings.Contains(v, ",") {
		name, path, _ := strings.Cut(v, "=")
		if name == "" || path == "" || strings.Contains(path, "=") {
			return httpapi.LoRAModule{}, fmt.Errorf("%q: want name=path or {\"name\":...,\"path\":...}", v)
		}
		return httpapi.LoRAModule{Name: name, Path: path}, nil
	}
	var m httpapi.LoRAModule
	d := json.NewDecoder(bytes.NewReader([]byte(v)))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return m, fmt.Errorf("invalid JSON for --lora-modules %q (want name=path or {\"name\":...,\"path\":...,\"base_model_name\":...}): %v", v, err)
	}
	if m.Name == "" || m.Path == "" {
		return m, fmt.Errorf("--lora-modules %q: name and path are required", v)
	}
	return m, nil
}

// expandLoRAModules rewrites vLLM's form, several modules after one
// --lora-modules (nargs='+'), into one flag per module, which the flag
// package parses: the values are the arguments after the flag up to the
// next one starting with '-'.
func expandLoRAModules(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if a != "--lora-modules" && a != "-lora-modules" {
			continue
		}
		if i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			out = append(out, a, args[i])
		}
	}
	return out
}

// loraFlags are serve's LoRA flags.
type loraFlags struct {
	enable   *bool
	modules  loraModules
	maxLoRAs *int
	maxRank  *int
}

func loraFlagVars(fs *flag.FlagSet) *loraFlags {
	l := &loraFlags{}
	l.enable = fs.Bool("enable-lora", false, "serve LoRA adapters (the simulated model only): requests name an adapter as their model; "+
		"with "+runtimeLoRAEnv+"=true, POST /v1/load_lora_adapter and /v1/unload_lora_adapter change them")
	fs.Var(&l.modules, "lora-modules", "a LoRA adapter to serve, as name=path or {\"name\":...,\"path\":...,\"base_model_name\":...}; "+
		"path is a PEFT adapter directory (adapter_config.json, weights optional). Repeat the flag, or list several after it as vLLM does; implies --enable-lora")
	l.maxLoRAs = fs.Int("max-loras", httpapi.DefaultMaxLoRAs, "--enable-lora: distinct adapters in one batch at most; a request for one more waits (others pass it)")
	l.maxRank = fs.Int("max-lora-rank", httpapi.DefaultMaxLoRARank, "--enable-lora: the highest rank (adapter_config.json's r) an adapter may have")
	return l
}

// config returns the server's LoRA configuration, nil when LoRA is off.
// set names the flags given.
func (l *loraFlags) config(set map[string]bool, modelFile bool) (*httpapi.LoRAConfig, error) {
	on := *l.enable || len(l.modules) > 0
	switch {
	case !on && (set["max-loras"] || set["max-lora-rank"]):
		return nil, errors.New("--max-loras and --max-lora-rank go with --enable-lora (or --lora-modules)")
	case !on:
		return nil, nil
	case modelFile:
		return nil, errors.New("--enable-lora: LoRA adapters work with the simulated model only " +
			"(the --model-file backend does not apply adapter weights); drop --model-file or the LoRA flags")
	case *l.maxLoRAs < 1:
		return nil, errors.New("--max-loras: want at least 1")
	case *l.maxRank < 1:
		return nil, errors.New("--max-lora-rank: want at least 1")
	}
	v := strings.ToLower(strings.TrimSpace(os.Getenv(runtimeLoRAEnv)))
	return &httpapi.LoRAConfig{MaxLoRAs: *l.maxLoRAs, MaxLoRARank: *l.maxRank, Modules: l.modules,
		RuntimeUpdates: v == "1" || v == "true"}, nil
}
