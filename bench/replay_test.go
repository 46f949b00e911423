package bench

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestReplayReproducesTheRequests(t *testing.T) {
	for _, kind := range []WorkloadKind{WorkloadRandom, WorkloadMultiTurn} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFakeServer(t)
			cfg := testConfig(f)
			cfg.Workload.Kind = kind
			cfg.Workload.Turns = 3
			cfg.Requests = 24
			cfg.AbortRate, cfg.InvalidRate = 0.2, 0.1
			cfg.RecordOutputs = true
			wl := newWorkload(cfg.withDefaults())
			f.plan = func(job, turn int) abortPlan { return wl.job(job).turns[turn].abort }
			res := run(t, cfg)
			keys := CompletedKeys(res.Records)
			if len(keys) == 0 || len(keys) == len(res.Records) {
				t.Fatalf("%d completed of %d: want some, not all", len(keys), len(res.Records))
			}
			sent := map[TurnKey]map[string]any{}
			for _, k := range keys {
				sent[k] = f.body(k.Job, k.Turn)
			}
			f.plan = nil
			texts, failed, err := Replay(context.Background(), res.Config, f.srv.URL, keys, 4)
			if err != nil || len(failed) != 0 || len(texts) != len(keys) {
				t.Fatalf("replay: %d texts of %d, failed %v, err %v", len(texts), len(keys), failed, err)
			}
			for _, k := range keys {
				if got := f.body(k.Job, k.Turn); !reflect.DeepEqual(got, sent[k]) {
					t.Fatalf("%+v: replayed body\n%v\nwant\n%v", k, got, sent[k])
				}
			}
			checked, missing, mism := CompareOutputs(res.Records, texts)
			if checked != len(keys) || missing != 0 || len(mism) != 0 {
				t.Fatalf("checked %d, missing %d, mismatches %v", checked, missing, mism)
			}
			// A changed output is caught, and named.
			for i := range res.Records {
				if res.Records[i].Outcome == OutcomeOK {
					res.Records[i].Text += "garbage"
					_, _, mism = CompareOutputs(res.Records, texts)
					if len(mism) != 1 || mism[0].ID != res.Records[i].ID || !strings.Contains(mism[0].String(), "garbage") {
						t.Fatalf("mismatches %v", mism)
					}
					break
				}
			}
			delete(texts, keys[0])
			if _, missing, _ := CompareOutputs(res.Records, texts); missing != 1 {
				t.Fatalf("missing %d, want 1", missing)
			}
		})
	}
}

func TestReplayRefusesUnknownRequests(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(f)
	cfg.Model = "fake-model"
	if _, _, err := Replay(context.Background(), cfg, f.srv.URL, []TurnKey{{Job: 1, Turn: 1}}, 2); err == nil {
		t.Fatal("replayed turn 1 of a single-turn workload")
	}
	cfg.Model = ""
	if _, _, err := Replay(context.Background(), cfg, f.srv.URL, []TurnKey{{Job: 1}}, 2); err == nil {
		t.Fatal("replayed without a model")
	}
	if f.requests.Load() != 0 {
		t.Fatalf("%d requests sent", f.requests.Load())
	}
}
