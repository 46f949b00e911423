package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The controls over a running cluster's processes, by index (engines,
// then the proxy's process at ProxyIndex): whether one runs, its pid, and
// the faults and restarts a test or a benchmark scenario applies.

// Running reports whether engine i has a live process.
func (c *Cluster) Running(i int) bool {
	p := c.engine(i)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alive() != nil
}

// alive is p's current run if its process has not exited, else nil.
// Called with p.mu held.
func (p *proc) alive() *run {
	r := p.cur
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	default:
		return r
	}
}

// PID returns engine i's current process id, 0 if none was started.
func (c *Cluster) PID(i int) int {
	p := c.engine(i)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.cmd.Process.Pid
}

func (c *Cluster) engine(i int) *proc {
	if i == len(c.engines) && c.proxyProc != nil {
		return c.proxyProc
	}
	if i < 0 || i >= len(c.engines) {
		panic(fmt.Sprintf("cluster: engine index %d out of range [0, %d)", i, len(c.engines)))
	}
	return c.engines[i]
}

// Kill sends SIGKILL to engine i (a crash) and waits for it to exit. It is
// not reported on Exits. ErrNotRunning if it has already exited.
func (c *Cluster) Kill(i int) error {
	p := c.engine(i)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalAndWait(syscall.SIGKILL, 0)
}

// Stop sends SIGTERM to engine i (a graceful shutdown), waits up to
// StopTimeout, then kills it. It is not reported on Exits.
func (c *Cluster) Stop(i int) error {
	p := c.engine(i)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalAndWait(syscall.SIGTERM, c.opt.StopTimeout)
}

// Pause sends SIGSTOP to engine i: it stays alive but runs no code (its
// sockets stay open, its clock goes on) until Resume. Kill, Stop, Restart
// and Close resume a paused engine as they stop it.
func (c *Cluster) Pause(i int) error { return c.signal(i, syscall.SIGSTOP) }

// Resume sends SIGCONT to engine i.
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) error {
	p := c.engine(i)
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.alive()
	if r == nil {
		return ErrNotRunning
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: signalling %s: %w", p.info.Name(), err)
	}
	return nil
}

// Restart stops engine i if it runs, starts it again on the same ports and
// waits for its /health (bounded by ctx and ReadyTimeout).
func (c *Cluster) Restart(ctx context.Context, i int) error {
	p := c.engine(i)
	p.mu.Lock()
	if err := p.signalAndWait(syscall.SIGTERM, c.opt.StopTimeout); err != nil && !errors.Is(err, ErrNotRunning) {
		p.mu.Unlock()
		return err
	}
	err := c.launch(p)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, p)
}

// signalAndWait stops p's process with sig, escalating to SIGKILL after
// grace (0: wait for sig alone). Called with p.mu held.
func (p *proc) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	r := p.alive()
	if r == nil {
		return ErrNotRunning
	}
	r.asked.Store(true)
	if err := r.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			<-r.done
			return ErrNotRunning
		}
		return fmt.Errorf("cluster: signalling %s: %w", p.info.Name(), err)
	}
	if sig != syscall.SIGKILL {
		r.cmd.Process.Signal(syscall.SIGCONT) // a paused process acts on sig only once resumed
	}
	if grace <= 0 {
		<-r.done
		return nil
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		r.cmd.Process.Kill()
		<-r.done
	}
	return nil
}
