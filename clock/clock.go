package clock

import (
	"math"
	"time"
)

// Instant is a point on a monotonic timeline, in nanoseconds since an
// arbitrary epoch chosen by whoever drives the core. Instants from different
// processes are not comparable.
type Instant int64

// Never is an instant later than any real one; a deadline of Never does not
// expire.
const Never Instant = math.MaxInt64

// Add returns t+d, saturating at Never.
func (t Instant) Add(d time.Duration) Instant {
	if d > 0 && t > Never-Instant(d) {
		return Never
	}
	return t + Instant(d)
}

// Sub returns the duration t-u.
func (t Instant) Sub(u Instant) time.Duration { return time.Duration(t - u) }

// Before reports whether t is strictly before u.
func (t Instant) Before(u Instant) bool { return t < u }

// After reports whether t is strictly after u.
func (t Instant) After(u Instant) bool { return t > u }

// Max returns the later of t and u.
func Max(t, u Instant) Instant {
	if t > u {
		return t
	}
	return u
}

// Seconds returns t as seconds since the epoch, for reports.
func (t Instant) Seconds() float64 { return float64(t) / 1e9 }

// String formats t as a duration since the epoch ("1.5s").
func (t Instant) String() string {
	if t == Never {
		return "never"
	}
	return time.Duration(t).String()
}
