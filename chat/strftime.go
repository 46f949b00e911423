package chat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// strftime formats t as Python's datetime.strftime does on Linux (glibc)
// for the directives chat templates use; t is the render's clock, a naive
// local time as Hugging Face's strftime_now sees it (so %z and %Z are
// empty). A directive it does not know is an error naming it, not a
// guess.
func strftime(format string, t time.Time) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true // glibc's "%-d": no padding
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if pad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'Y':
			num(t.Year(), 4)
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			s := strconv.Itoa(t.Day())
			if pad && len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'j':
			num(t.YearDay(), 3)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			w := int(t.Weekday())
			if w == 0 {
				w = 7
			}
			b.WriteString(strconv.Itoa(w))
		case 'F':
			s, _ := strftime("%Y-%m-%d", t)
			b.WriteString(s)
		case 'T':
			s, _ := strftime("%H:%M:%S", t)
			b.WriteString(s)
		case 'D':
			s, _ := strftime("%m/%d/%y", t)
			b.WriteString(s)
		case 'z', 'Z': // a naive datetime has no zone
		case '%':
			b.WriteByte('%')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default:
			return "", fmt.Errorf("strftime_now: the directive %%%c is not supported", format[i])
		}
	}
	return b.String(), nil
}
