package httpapi

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// KVPeers are the prefill engines' transfer endpoints a decode engine may
// dial (kvlease serve --kv-peers): a request whose kv_transfer_params name
// another remote_host:remote_port is refused with 400 before anything is
// dialled, so a client cannot make the engine open connections where it
// likes. Entries are CIDR prefixes (10.0.0.0/8, fd00::/8) or IP addresses,
// which allow any port of an address in them, and host:port pairs, which
// allow that endpoint only. A remote_host that is a name, not an IP
// address, matches only a host:port entry of that name (names are not
// resolved: the check would not hold for the address dialled later).
type KVPeers struct {
	prefixes  []netip.Prefix
	endpoints map[string]bool // host:port, the host lower-cased and unbracketed
	text      string
}

// ParseKVPeers parses a comma-separated --kv-peers list; an empty list
// is an error (leave the flag unset to allow any endpoint).
func ParseKVPeers(s string) (*KVPeers, error) {
	p := &KVPeers{endpoints: map[string]bool{}, text: s}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if pr, err := netip.ParsePrefix(part); err == nil {
			p.prefixes = append(p.prefixes, pr.Masked())
			continue
		}
		if a, err := netip.ParseAddr(part); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(part)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q: want a CIDR prefix (10.0.0.0/8), an IP address or host:port", part)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not 1..65535", part, port)
		}
		p.endpoints[endpointKey(host, n)] = true
	}
	if len(p.prefixes) == 0 && len(p.endpoints) == 0 {
		return nil, fmt.Errorf("%q: no endpoint; leave --kv-peers unset to allow any", s)
	}
	return p, nil
}

func endpointKey(host string, port int) string {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Allow reports whether host:port (remote_host, remote_port) may be
// dialled.
func (p *KVPeers) Allow(host string, port int) bool {
	if p.endpoints[endpointKey(host, port)] {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, pr := range p.prefixes {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

func (p *KVPeers) String() string { return p.text }
