package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Sub-seed streams: each use of randomness draws from its own PCG stream
// of the run's seed, so that adding a draw in one place does not shift the
// others, and the content of job n does not depend on timing.
const (
	streamArrivals uint64 = 1 << 62
	streamGroups   uint64 = 1<<62 + 1<<40
	// streamInvalid + n is job n's stream for its invalid requests: a
	// stream of its own, so that InvalidRate shifts nothing else.
	streamInvalid uint64 = 1<<62 + 1<<41
)

// words is the vocabulary of generated prompts: short common words, so the
// text reads as text to any tokenizer.
var words = strings.Fields(`the of and to in is was for on that with as by at from
his her it an be are were this which or had not but have one all their they
there been has more when who will would can time so into only some its over
new most other after first two also about than what then many these may such
out these up like use her them well year part said each made state how
city long world day work school water room air light river house game land`)

// promptText returns text of about tokens tokens (tokens × charsPerToken
// characters, exactly, for a byte-level tokenizer with charsPerToken 1),
// drawn from r. It starts with a tag so that prompts of different jobs
// differ from their first block on, avoiding accidental prefix-cache hits.
func promptText(r *rand.Rand, tokens int, charsPerToken float64, tag string) string {
	n := max(1, int(math.Round(float64(tokens)*charsPerToken)))
	var b strings.Builder
	b.Grow(n + 16)
	b.WriteString(tag)
	for b.Len() < n {
		b.WriteByte(' ')
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()[:n]
}

// The abort phases, as recorded in Record.AbortPhase.
const (
	AbortBeforeFirstToken = "before_first_token"
	AbortMidStream        = "mid_stream"
)

// abortPlan is a request's planned abort: none (zero value), before the
// first token after delay, or mid-stream after afterTokens chunks.
type abortPlan struct {
	active      bool
	afterTokens int // 0: before the first token
	delay       time.Duration
}

// turn is one request of a job.
type turn struct {
	user         string
	inputTokens  int // requested length of user
	outputTokens int // max_tokens
	abort        abortPlan
	invalid      bool // sent with min_tokens > max_tokens (InvalidRate)
}

// job is one unit of work handed to a worker or an arrival: a single
// request, or a conversation whose turns run one after the other.
type job struct {
	index  int
	group  int    // shared-prefix group, or -1
	system string // shared prefix, or ""
	turns  []turn
}

// workload makes the jobs of a run. It is safe for concurrent use: it
// holds only immutable data (the group prefixes are made up front).
type workload struct {
	cfg      Config
	prefixes []string
}

func newWorkload(cfg Config) *workload {
	w := &workload{cfg: cfg}
	if cfg.Workload.Kind == WorkloadSharedPrefix {
		r := rand.New(rand.NewPCG(cfg.Seed, streamGroups))
		w.prefixes = make([]string, cfg.Workload.Groups)
		for g := range w.prefixes {
			w.prefixes[g] = promptText(r, cfg.Workload.PrefixLen, cfg.Workload.CharsPerToken, "system "+strconv.Itoa(g)+":")
		}
	}
	return w
}

// job returns job n, a pure function of (cfg, n).
func (w *workload) job(n int) job {
	r := rand.New(rand.NewPCG(w.cfg.Seed, uint64(n)))
	wl := w.cfg.Workload
	j := job{index: n, group: -1}
	turns := 1
	switch wl.Kind {
	case WorkloadSharedPrefix:
		j.group = r.IntN(len(w.prefixes))
		j.system = w.prefixes[j.group]
	case WorkloadMultiTurn:
		turns = wl.Turns
	}
	j.turns = make([]turn, turns)
	inv := rand.New(rand.NewPCG(w.cfg.Seed, streamInvalid+uint64(n)))
	for i := range j.turns {
		t := &j.turns[i]
		t.inputTokens = wl.InputLen.Sample(r)
		t.outputTokens = wl.OutputLen.Sample(r)
		t.user = promptText(r, t.inputTokens, wl.CharsPerToken, "q"+strconv.Itoa(n)+"."+strconv.Itoa(i)+":")
		t.abort = w.abortPlan(r, t.outputTokens)
		if inv.Float64() < w.cfg.InvalidRate {
			// A refused request has nothing to abandon.
			t.invalid, t.abort = true, abortPlan{}
		}
	}
	return j
}

// abortPlan draws whether and when a request is abandoned. It always draws
// the same number of values, so the rest of the job does not depend on
// AbortRate.
func (w *workload) abortPlan(r *rand.Rand, outputTokens int) abortPlan {
	pick, phase, frac := r.Float64(), r.Float64(), r.Float64()
	if pick >= w.cfg.AbortRate {
		return abortPlan{}
	}
	if !w.cfg.Stream || outputTokens < 2 || phase < 0.5 {
		return abortPlan{active: true, delay: time.Duration(frac * float64(w.cfg.AbortMaxDelay))}
	}
	// Mid-stream: after k chunks, 1 ≤ k < outputTokens.
	return abortPlan{active: true, afterTokens: 1 + int(frac*float64(outputTokens-1))}
}

// message is a chat message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// requestJSON is a request body. Its fields are in the order of their
// names, as a map would encode them; a struct encodes several times
// faster.
type requestJSON struct {
	IgnoreEOS     bool           `json:"ignore_eos"`
	MaxTokens     int            `json:"max_tokens"`
	Messages      []message      `json:"messages,omitempty"`
	MinTokens     *int           `json:"min_tokens,omitempty"`
	Model         string         `json:"model"`
	Prompt        *string        `json:"prompt,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	Temperature   int            `json:"temperature"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// requestBody returns the JSON body of a request: the job's system prompt,
// the previous turns with the answers received (history, alternating user
// and assistant texts), and turn t.
func requestBody(cfg Config, model string, j *job, history []string, t *turn) []byte {
	body := requestJSON{
		Model:       model,
		MaxTokens:   t.outputTokens,
		IgnoreEOS:   true,
		Temperature: 0,
		Stream:      cfg.Stream,
	}
	if cfg.Stream {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if t.invalid {
		body.MinTokens = new(t.outputTokens + 1)
	}
	if cfg.API == APIChat {
		body.Messages = chatMessages(j, history, t)
	} else {
		body.Prompt = new(completionPrompt(j, history, t))
	}
	out, err := json.Marshal(body)
	if err != nil {
		panic("bench: request body does not encode: " + err.Error())
	}
	return out
}

// chatMessages are a chat request's messages: the job's system prompt,
// the previous turns (history, alternating user and assistant texts) and
// turn t's user text.
func chatMessages(j *job, history []string, t *turn) []message {
	msgs := make([]message, 0, len(history)+2)
	if j.system != "" {
		msgs = append(msgs, message{"system", j.system})
	}
	for i, h := range history {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, message{role, h})
	}
	return append(msgs, message{"user", t.user})
}

// completionPrompt is a completion request's prompt: the same turns as
// chatMessages, as "User: …\nAssistant:" text.
func completionPrompt(j *job, history []string, t *turn) string {
	var b strings.Builder
	if j.system != "" {
		b.WriteString(j.system)
		b.WriteString("\n\n")
	}
	for i, h := range history {
		if i%2 == 0 {
			b.WriteString("User: ")
			b.WriteString(h)
			b.WriteString("\nAssistant:")
		} else {
			b.WriteString(h)
			b.WriteString("\n")
		}
	}
	if len(history) > 0 {
		b.WriteString("User: ")
		b.WriteString(t.user)
		b.WriteString("\nAssistant:")
	} else {
		b.WriteString(t.user)
	}
	return b.String()
}
