package kvleasebin

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"sync"
	"time"
)

// announceRE reads the URL from the line kvlease serve prints on stdout
// once its listeners are bound ("kvlease serve on http://127.0.0.1:PORT:
// model ...").
var announceRE = regexp.MustCompile(`^kvlease serve on (https?://\S+): `)

// Process is a kvlease serve child started by Serve: its URL is the
// address it bound, as it announced it.
type Process struct {
	Cmd  *exec.Cmd
	URL  string // "http://127.0.0.1:PORT"
	Line string // the announcement, without its newline

	done chan struct{}
	err  error // cmd.Wait's, valid after done
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns cmd.Wait's error.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Serve starts cmd, a `kvlease serve --port 0 ...` the caller prepared
// (its Stderr, SysProcAttr...; Serve sets Stdout), and returns once the
// engine announces the address it bound. The port is the engine's own
// choice, so nothing can take it between a test's pick and the engine's
// bind (the listen-note-close trick's race). If the engine exits first, or
// does not announce within timeout, Serve kills it and says why.
func Serve(cmd *exec.Cmd, timeout time.Duration) (*Process, error) {
	w := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = w
	if cmd.WaitDelay == 0 {
		// Wait returns once the process exited, even if a child of it
		// still holds its stdout.
		cmd.WaitDelay = time.Second
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case l := <-w.line:
		m := announceRE.FindStringSubmatch(l)
		if m == nil {
			cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("%s: announced %q, not \"kvlease serve on URL: ...\"", cmd.Path, l)
		}
		p.URL, p.Line = m[1], l
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited (%v) before announcing its address", cmd.Path, p.err)
	case <-timer.C:
		cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("%s did not announce its address within %v", cmd.Path, timeout)
	}
}

// firstLine is a process's stdout: it sends the first line on line and
// discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- string(w.buf[:i])
		w.sent, w.buf = true, nil
	} else if len(w.buf) > 1<<16 {
		w.line <- string(w.buf) // no newline in 64 KiB: not an announcement
		w.sent, w.buf = true, nil
	}
	return len(b), nil
}
