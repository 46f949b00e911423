// Package promtext reads samples of chosen metrics from the Prometheus
// text exposition format with expfmt, the format's own parser, one line
// at a time: a line it cannot read is skipped, so one odd line of an
// engine's /metrics does not lose a whole scrape.
package promtext

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Each calls fn for each sample of a metric in names read from r, with its
// labels and value. Comments, blank lines, lines expfmt rejects and NaN
// values are skipped; lines of other metrics are skipped before parsing,
// so their cost is a scan. The error is only r's.
func Each(r io.Reader, names []string, fn func(name string, labels map[string]string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20) // lines up to 1 MiB
	p := expfmt.NewTextParser(model.UTF8Validation)
	var buf []byte
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		i := bytes.IndexAny(line, "{ \t")
		if i <= 0 || !slices.Contains(names, string(line[:i])) {
			continue
		}
		buf = append(append(buf[:0], line...), '\n')
		fams, err := p.TextToMetricFamilies(bytes.NewReader(buf))
		if err != nil {
			continue
		}
		for name, f := range fams {
			for _, m := range f.GetMetric() {
				v := m.GetUntyped().GetValue()
				if math.IsNaN(v) {
					continue
				}
				var labels map[string]string
				if lp := m.GetLabel(); len(lp) > 0 {
					labels = make(map[string]string, len(lp))
					for _, l := range lp {
						labels[l.GetName()] = l.GetValue()
					}
				}
				fn(name, labels, v)
			}
		}
	}
	return sc.Err()
}
