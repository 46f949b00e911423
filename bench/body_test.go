package bench

import (
	"bytes"
	"encoding/json"
	"testing"
)

// mapRequestBody is requestBody's fields in a map, as it encoded them
// before requestJSON: the reference for the bytes of every body.
func mapRequestBody(cfg Config, model string, j *job, history []string, t *turn) []byte {
	body := map[string]any{
		"model":       model,
		"max_tokens":  t.outputTokens,
		"ignore_eos":  true,
		"temperature": 0,
		"stream":      cfg.Stream,
	}
	if cfg.Stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	if t.invalid {
		body["min_tokens"] = t.outputTokens + 1
	}
	if cfg.API == APIChat {
		body["messages"] = chatMessages(j, history, t)
	} else {
		body["prompt"] = completionPrompt(j, history, t)
	}
	out, err := json.Marshal(body)
	if err != nil {
		panic("bench: request body does not encode: " + err.Error())
	}
	return out
}

// requestBody's bytes are those of a map of the same fields.
func TestRequestBodyMatchesMapEncoding(t *testing.T) {
	for _, api := range []API{APICompletions, APIChat} {
		for _, stream := range []bool{false, true} {
			for _, kind := range []WorkloadKind{WorkloadRandom, WorkloadSharedPrefix, WorkloadMultiTurn} {
				cfg := DefaultConfig()
				cfg.API, cfg.Stream, cfg.Workload.Kind = api, stream, kind
				cfg.InvalidRate = 0.5
				cfg.Workload.InputLen, cfg.Workload.PrefixLen = Fixed(8), 8
				wl := newWorkload(cfg)
				for n := range 8 {
					j := wl.job(n)
					for i := range j.turns {
						var history []string
						for k := range i {
							history = append(history, j.turns[k].user, "<answer> & \"quoted\"")
						}
						got := requestBody(cfg, "m<&>", &j, history, &j.turns[i])
						want := mapRequestBody(cfg, "m<&>", &j, history, &j.turns[i])
						if !bytes.Equal(got, want) {
							t.Fatalf("%s stream=%v %s job %d turn %d:\n got %s\nwant %s", api, stream, kind, n, i, got, want)
						}
					}
				}
			}
		}
	}
}
