package proxy

import (
	"bytes"
	"math"
	"strconv"
)

// engineLoad is what a scrape of an engine's /metrics tells the router.
type engineLoad struct {
	waiting float64 // vllm:num_requests_waiting, summed over label sets
	kvUsage float64 // vllm:kv_cache_usage_perc, the largest over label sets
}

const (
	metricWaiting = "vllm:num_requests_waiting"
	metricKVUsage = "vllm:kv_cache_usage_perc"
)

// parseLoad reads the Prometheus text exposition format for the two
// metrics the least-loaded policy uses. It accepts what prometheus'
// client_golang writes and tolerates anything else by skipping lines it
// cannot read; ok is false when neither metric was found.
func parseLoad(text []byte) (l engineLoad, ok bool) {
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, v, good := parseSample(line)
		if !good {
			continue
		}
		switch name {
		case metricWaiting:
			l.waiting += v
			ok = true
		case metricKVUsage:
			l.kvUsage = math.Max(l.kvUsage, v)
			ok = true
		}
	}
	return l, ok
}

// parseSample splits `name{labels} value [timestamp]` into the name and
// the value. Label values may hold spaces, braces and escaped quotes.
func parseSample(line []byte) (name string, v float64, ok bool) {
	i := bytes.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", 0, false
	}
	name = string(line[:i])
	rest := line[i:]
	if rest[0] == '{' {
		end := labelsEnd(rest)
		if end < 0 {
			return "", 0, false
		}
		rest = rest[end+1:]
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(string(fields[0]), 64)
	if err != nil || math.IsNaN(v) {
		return "", 0, false
	}
	return name, v, true
}

// labelsEnd returns the index of the '}' closing the label set that s
// starts with, or -1.
func labelsEnd(s []byte) int {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}
