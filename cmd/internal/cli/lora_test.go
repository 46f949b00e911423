package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/kvlease/kvlease/httpapi"
)

// TestLoRAFlags: --lora-modules in vLLM's two forms, repeated or several
// after one flag as vLLM takes them; --max-loras reaches the scheduler;
// VLLM_ALLOW_RUNTIME_LORA_UPDATING turns the endpoints on; the real-model
// backend and bad values are refused naming the flag.
func TestLoRAFlags(t *testing.T) {
	t.Setenv(secretEnv, "")
	t.Setenv(runtimeLoRAEnv, "true")
	f, err := parseServeFlags([]string{"--lora-modules", "sql=/a/sql", `{"name":"chat","path":"/a/chat","base_model_name":"m"}`,
		"--max-loras", "3", "--lora-modules", "x=/a/x", "--model", "m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []httpapi.LoRAModule{{Name: "sql", Path: "/a/sql"}, {Name: "chat", Path: "/a/chat", BaseModelName: "m"}, {Name: "x", Path: "/a/x"}}
	if f.lora == nil || !slices.Equal(f.lora.Modules, want) || f.lora.MaxLoRAs != 3 || f.sched.MaxLoRAs != 3 ||
		f.lora.MaxLoRARank != httpapi.DefaultMaxLoRARank || !f.lora.RuntimeUpdates {
		t.Fatalf("lora %+v, sched max loras %d", f.lora, f.sched.MaxLoRAs)
	}
	t.Setenv(runtimeLoRAEnv, "")
	if f, err = parseServeFlags([]string{"--enable-lora"}, io.Discard); err != nil || f.lora == nil || f.lora.RuntimeUpdates ||
		f.lora.MaxLoRAs != 1 || len(f.lora.Modules) != 0 {
		t.Fatalf("--enable-lora: %v %+v", err, f.lora)
	}
	if f, err = parseServeFlags(nil, io.Discard); err != nil || f.lora != nil || f.sched.MaxLoRAs != 0 {
		t.Fatalf("no LoRA flags: %v %+v", err, f.lora)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lora-modules", "{bad"}, "invalid JSON for --lora-modules"},
		{[]string{"--lora-modules", `{"name":"a"}`}, "name and path are required"},
		{[]string{"--lora-modules", `{"name":"a","path":"/p","rank":8}`}, "unknown field"},
		{[]string{"--lora-modules", "=/p"}, "want name=path"},
		{[]string{"--max-loras", "2"}, "go with --enable-lora"},
		{[]string{"--enable-lora", "--max-loras", "0"}, "--max-loras: want at least 1"},
		{[]string{"--enable-lora", "--max-lora-rank", "0"}, "--max-lora-rank"},
		{[]string{"--enable-lora", "--model-file", "/x.gguf"}, "simulated model only"},
	} {
		var stderr strings.Builder
		_, err := parseServeFlags(tc.args, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("%q: %v %s, want %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

func TestExpandLoRAModules(t *testing.T) {
	got := expandLoRAModules([]string{"--port", "1", "--lora-modules", "a=/a", "b=/b", "-x", "--lora-modules", "-c", "--", "d"})
	want := []string{"--port", "1", "--lora-modules", "a=/a", "--lora-modules", "b=/b", "-x", "--lora-modules", "-c", "--", "d"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
