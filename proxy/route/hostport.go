package route

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HeaderPrefillerHostPort is llm-d's header naming the prefill engine(s)
// chosen by the endpoint picker: "host:port", or a comma list.
const HeaderPrefillerHostPort = "x-prefiller-host-port"

// MaxHostPorts bounds the entries of one x-prefiller-host-port header.
const MaxHostPorts = 64

// maxHostPortBytes bounds one entry (a DNS name is at most 253 bytes).
const maxHostPortBytes = 300

// ErrBadHostPort is wrapped by ParseHostPorts's and NormalizeHostPort's
// errors.
var ErrBadHostPort = errors.New("route: bad host:port")

// ParseHostPorts parses an x-prefiller-host-port value: host:port entries
// separated by commas, spaces around them ignored, empty entries skipped.
// Each is returned normalized (see NormalizeHostPort). An empty value gives
// no entries and no error; more than MaxHostPorts entries is an error.
func ParseHostPorts(v string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if len(out) == MaxHostPorts {
			return nil, fmt.Errorf("%w: more than %d entries", ErrBadHostPort, MaxHostPorts)
		}
		hp, err := NormalizeHostPort(part)
		if err != nil {
			return nil, err
		}
		out = append(out, hp)
	}
	return out, nil
}

// NormalizeHostPort checks that s is host:port with a port in 1..65535 and
// returns it with the host lower-cased, an IPv6 host in brackets and the
// port without leading zeros, so equal endpoints compare equal as strings.
// Names are not resolved: "localhost:8000" and "127.0.0.1:8000" differ.
func NormalizeHostPort(s string) (string, error) {
	if len(s) > maxHostPortBytes {
		return "", fmt.Errorf("%w: %.40q... is longer than %d bytes", ErrBadHostPort, s, maxHostPortBytes)
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", fmt.Errorf("%w %q: want host:port", ErrBadHostPort, s)
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") || len(host) < 3 {
			return "", fmt.Errorf("%w %q: unbalanced brackets", ErrBadHostPort, s)
		}
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return "", fmt.Errorf("%w %q: put an IPv6 address in brackets", ErrBadHostPort, s)
	}
	if host == "" {
		return "", fmt.Errorf("%w %q: empty host", ErrBadHostPort, s)
	}
	for j := 0; j < len(host); j++ {
		if c := host[j]; c <= ' ' || c >= 0x7f || c == '/' || c == '[' || c == ']' || c == '@' {
			return "", fmt.Errorf("%w %q: invalid character in host", ErrBadHostPort, s)
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", fmt.Errorf("%w %q: port must be 1..65535", ErrBadHostPort, s)
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.FormatUint(n, 10), nil
}

// Match returns a skip mask over engines (their normalized host:port, as
// NormalizeHostPort returns) that keeps only the engines named in named,
// and whether any engine is kept. An empty named keeps every engine.
func Match(named, engines []string) (skip []bool, any bool) {
	skip = make([]bool, len(engines))
	if len(named) == 0 {
		return skip, len(engines) > 0
	}
	for i, e := range engines {
		skip[i] = true
		for _, n := range named {
			if n == e {
				skip[i], any = false, true
				break
			}
		}
	}
	return skip, any
}
