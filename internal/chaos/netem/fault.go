package netem

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Fault is what a link does to each packet, with netem's meanings.
// Probabilities are in [0, 1]; the zero Fault forwards every packet at
// once, unchanged.
type Fault struct {
	// Delay is how long a packet waits; Jitter spreads it uniformly over
	// [Delay-Jitter, Delay+Jitter] (never below zero), which reorders
	// packets sent closer together than the spread.
	Delay, Jitter time.Duration
	// Loss drops a packet.
	Loss float64
	// Duplicate sends a packet twice, each copy delayed on its own.
	Duplicate float64
	// Reorder sends a packet at once, ahead of the delayed ones (as
	// netem's reorder, it needs a Delay to act).
	Reorder float64
	// Corrupt flips one random bit of a packet.
	Corrupt float64
}

// maxDelay bounds Delay+Jitter: a packet held longer is a partition, not
// a slow link, and the harness makes those otherwise.
const maxDelay = time.Minute

// Validate reports a Fault that cannot be applied.
func (f Fault) Validate() error {
	var errs []error
	if f.Delay < 0 || f.Jitter < 0 || f.Delay+f.Jitter > maxDelay {
		errs = append(errs, fmt.Errorf("netem: delay %v jitter %v: want both >= 0 and their sum <= %v", f.Delay, f.Jitter, maxDelay))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", f.Loss}, {"duplicate", f.Duplicate}, {"reorder", f.Reorder}, {"corrupt", f.Corrupt}} {
		if !(p.v >= 0 && p.v <= 1) { // NaN too
			errs = append(errs, fmt.Errorf("netem: %s %v: want a probability in [0, 1]", p.name, p.v))
		}
	}
	return errors.Join(errs...)
}

// IsZero reports whether f leaves packets alone.
func (f Fault) IsZero() bool { return f == Fault{} }

// Plus is the fault of a path through two impaired links: the delays add
// up, and a packet escapes a random event only if it escapes both.
func (f Fault) Plus(g Fault) Fault {
	either := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return a + b // exact: no rounding for a healthy link
		}
		return 1 - (1-a)*(1-b)
	}
	return Fault{
		Delay: f.Delay + g.Delay, Jitter: f.Jitter + g.Jitter,
		Loss: either(f.Loss, g.Loss), Duplicate: either(f.Duplicate, g.Duplicate),
		Reorder: either(f.Reorder, g.Reorder), Corrupt: either(f.Corrupt, g.Corrupt),
	}
}

// String gives f in tc netem's syntax ("delay 50ms 50ms loss 20%"), or
// "none".
func (f Fault) String() string {
	var b []string
	if f.Delay > 0 || f.Jitter > 0 {
		d := "delay " + f.Delay.String()
		if f.Jitter > 0 {
			d += " " + f.Jitter.String()
		}
		b = append(b, d)
	}
	pct := func(name string, v float64) {
		if v > 0 {
			b = append(b, name+" "+strconv.FormatFloat(100*v, 'g', 4, 64)+"%")
		}
	}
	pct("loss", f.Loss)
	pct("duplicate", f.Duplicate)
	pct("reorder", f.Reorder)
	pct("corrupt", f.Corrupt)
	if len(b) == 0 {
		return "none"
	}
	return strings.Join(b, " ")
}
