package sim

import (
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/faultapi"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/proxy/route"
	"github.com/kvlease/kvlease/sched"
	"github.com/kvlease/kvlease/xfer"
)

// The in-simulation proxy and its clients.

// Submit sends r through the proxy at instant t: to P (max_tokens 1,
// do_remote_decode), then with P's lease to D, or straight to D when Local.
func (c *World) Submit(t clock.Instant, r *Req) {
	if _, dup := c.Requests[r.ID]; dup {
		panic("sim: duplicate request id " + r.ID)
	}
	c.Requests[r.ID] = r
	if c.fleet == nil { // a fleet forgets its requests once they end
		c.order = append(c.order, r.ID)
	}
	c.At(t, func() {
		r.SentAt = c.Now
		c.mix(traceSubmit, hashString(r.ID))
		if r.Local {
			c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, nil) })
			return
		}
		c.After(c.Spec.HTTPDelay, func() {
			if r.clientGone {
				return
			}
			if r.P == nil {
				r.P = c.route(engine.RolePrefill)
			}
			c.legStart(r, r.P)
			ok := c.call(r.P, r, func() {
				if r.clientGone {
					return
				}
				p := c.decideFaults(r, faultapi.Request{ID: r.ID, Prefill: true})
				if p.HTTPStatus > 0 {
					c.fail(r, "injected http_error", p.HTTPStatus)
					return
				}
				r.dropAnswer = p.DropAnswer
				r.DecodeLegDelay += p.DelayAnswer
				add := func() {
					if r.clientGone {
						return
					}
					res, _ := r.P.Loop.Add(c.Now, &engine.Request{
						ID: r.ID, Prompt: r.Prompt, MaxTokens: 1, Sampling: r.Sampling, SeedSet: r.SeedSet,
						RemoteDecode: true, LeaseFaults: p.LeaseFaults(),
					})
					if res != engine.Accepted {
						c.fail(r, "prefill rejected: "+res.String(), res.HTTPStatus())
					}
				}
				if p.Latency > 0 {
					// The engine's edge holds the request, then hands it
					// to its core (which may have crashed or hung since).
					c.After(p.Latency, func() {
						if !c.call(r.P, r, add) {
							c.fail(r, "prefill engine crashed", 502)
						}
					})
					return
				}
				add()
			})
			if !ok {
				c.unreachable(r.P)
				c.fail(r, "prefill unreachable", 502)
			}
		})
	})
}

// route picks an engine of role for a leg with the proxy's routing policy.
func (c *World) route(role engine.Role) *Node {
	if c.fleet != nil {
		return c.fleetRoute(role)
	}
	pick := c.pickD
	if role == engine.RolePrefill {
		pick = c.pickP
	}
	if pick == nil {
		panic("sim: a request without engines and no Spec.Routing")
	}
	c.loads, c.cands = c.loads[:0], c.cands[:0]
	for _, n := range c.Nodes {
		if n.Role != role {
			continue
		}
		l := route.Load{InFlight: c.inFlight[n], DownUntil: c.downUntil[n]}
		if !n.Crashed && !n.Hung { // a scrape of a dead or hung engine fails
			st := n.Core.Stats()
			l.Scraped, l.ScrapedAt = true, c.Now
			l.Waiting, l.KVUsage = float64(st.Waiting), n.Core.Pool().Usage()
		}
		c.loads = append(c.loads, l)
		c.cands = append(c.cands, n)
	}
	i, ok := pick.Pick(c.Now, c.loads, nil)
	if !ok {
		panic("sim: no engine to route to")
	}
	return c.cands[i]
}

// legStart and legEnd count the proxy's legs in flight per engine.
func (c *World) legStart(r *Req, n *Node) {
	c.legEnd(r)
	if c.inFlight != nil {
		r.leg = n
		c.inFlight[n]++
	}
}

func (c *World) legEnd(r *Req) {
	if r.leg != nil {
		c.inFlight[r.leg]--
		r.leg = nil
	}
}

// unreachable pauses routing to n.
func (c *World) unreachable(n *Node) {
	if c.downUntil != nil {
		c.downUntil[n] = c.Now.Add(RoutingPause)
	}
}

// Abort makes r's client disconnect at instant t. The proxy carries the
// abort to whichever engine has the request (the in-sim proxy knows).
func (c *World) Abort(t clock.Instant, r *Req) {
	c.At(t, func() {
		if r.Done || r.clientGone {
			return
		}
		r.clientGone = true
		r.Done = true
		r.Status = sched.FinishedAborted
		r.DoneAt = c.Now
		c.legEnd(r)
		c.mix(traceAbort, hashString(r.ID))
		c.After(c.Spec.HTTPDelay, func() {
			switch {
			case r.atD:
				c.call(r.D, nil, func() { r.D.Loop.Abort(c.Now, r.ID) })
				if c.AbortBothLegs && !r.Local && r.P != nil {
					c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
				}
			case r.P != nil:
				c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
			}
		})
	})
}

func (c *World) fail(r *Req, why string, status int) {
	if r.Done {
		return
	}
	r.Done, r.Error, r.HTTPStatus, r.Status, r.DoneAt = true, why, status, sched.FinishedError, c.Now
	c.legEnd(r)
	c.mix(traceFail, hashString(r.ID))
}

// releaseAtP is the proxy giving up a lease it holds: it aborts the
// request on P (policy lease revokes the lease at once).
func (c *World) releaseAtP(r *Req) {
	if r.P != nil {
		c.call(r.P, nil, func() { r.P.Loop.Abort(c.Now, r.ID) })
	}
}

// sendToD is the proxy's decode leg.
func (c *World) sendToD(r *Req, g *xfer.Grant) {
	if r.clientGone || r.Done {
		if g != nil {
			c.releaseAtP(r) // the proxy releases the lease it holds
		}
		return
	}
	if r.D == nil {
		r.D = c.route(engine.RoleDecode)
	}
	d := r.D
	c.legStart(r, d)
	var in *engine.Request
	var remote *xfer.Remote
	if g != nil {
		remote = &xfer.Remote{EngineID: string(r.P.Name), Addr: string(r.P.Name), Lease: g.Lease, Token: g.Token,
			NumBlocks: len(g.BlockIDs), NumTokens: g.NumTokens, ExpiresIn: g.ExpiresIn}
	}
	in = &engine.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Sampling: r.Sampling,
		SeedSet: r.SeedSet, IgnoreEOS: r.IgnoreEOS, Remote: remote}
	ok := c.call(d, r, func() {
		if r.clientGone || r.Done {
			if g != nil {
				c.releaseAtP(r)
			}
			return
		}
		r.atD = true
		if r.EdgeReject != "" {
			d.Loop.Reject(c.Now, remote)
			c.fail(r, "decode rejected: "+r.EdgeReject, 400)
			return
		}
		p := c.decideFaults(r, faultapi.Request{ID: r.ID, Decode: remote != nil})
		if st := max(p.HTTPStatus, p.RejectStatus); st > 0 {
			d.Loop.Reject(c.Now, remote)
			c.fail(r, "injected rejection", st)
			return
		}
		if remote != nil {
			remote.Faults = p.PullFaults()
		}
		add := func() {
			if r.clientGone || r.Done {
				d.Loop.Reject(c.Now, remote) // the client left during the latency
				return
			}
			res, id := d.Loop.Add(c.Now, in)
			if res != engine.Accepted {
				c.fail(r, "decode rejected: "+res.String(), res.HTTPStatus())
				return
			}
			r.dReq, r.dCore = id, d.Core
		}
		if p.Latency > 0 {
			c.After(p.Latency, func() {
				if !c.call(d, r, add) {
					c.fail(r, "decode engine crashed", 502)
					if g != nil {
						c.releaseAtP(r)
					}
				}
			})
			return
		}
		add()
	})
	if !ok {
		c.unreachable(d)
		c.fail(r, "decode unreachable", 502)
		if g != nil {
			c.releaseAtP(r)
		}
	}
}

// outputs routes a node's outputs to the proxy and clients.
func (c *World) outputs(n *Node, outs []engine.Output) {
	for _, o := range outs {
		r, ok := c.Requests[o.ID]
		if !ok {
			continue
		}
		c.mix(traceOutput, hashString(o.ID), uint64(uint32(o.Token)), uint64(o.Status))
		if n.Role == engine.RolePrefill && !r.atD {
			if !o.Finished {
				continue
			}
			if o.Status != sched.FinishedLength && o.Status != sched.FinishedStopped {
				if !r.clientGone {
					c.fail(r, "prefill "+o.Status.String(), 500)
				}
				continue
			}
			// P writes the response now: it reaches a client that is still
			// there, or it is undelivered.
			if c.fleet != nil && o.Grant != nil {
				c.fleet.granted(c.Now, n, o.Grant)
			}
			c.legEnd(r)
			ok := !r.clientGone && !r.dropAnswer
			n.Loop.Delivered(c.Now, r.ID, ok)
			n.fed = true
			if r.dropAnswer && !r.clientGone {
				c.fail(r, "injected drop_response", 502)
			}
			if !ok {
				continue
			}
			g := o.Grant
			r.Grant = g
			r.GrantedAt = c.Now
			r.responded = true
			if g != nil {
				c.byLease[leaseKey{n.Name, g.Lease}] = r
				c.checkClaimDeadline(n, g.Lease)
			}
			if r.LostAfterPrefill {
				if c.fleet != nil {
					c.leftAfterPrefill(r)
				}
				continue
			}
			c.After(c.Spec.HTTPDelay+r.DecodeLegDelay, func() {
				if g == nil {
					c.sendToD(r, nil) // no lease: D computes the prompt
					return
				}
				c.After(c.Spec.HTTPDelay, func() { c.sendToD(r, g) })
			})
			continue
		}
		if r.clientGone || r.Done {
			continue // the client left, or already has its answer
		}
		if o.Pulled {
			r.Pulled = true
		}
		if o.Fallback != 0 {
			r.Fallback = o.Fallback
		}
		if o.Token != model.NoToken {
			if r.ntok == 0 {
				r.FirstAt = c.Now
			}
			r.ntok++
			if c.fleet == nil || r.keep {
				r.Tokens = append(r.Tokens, o.Token)
			}
		}
		if o.Finished {
			r.Done, r.Status, r.DoneAt = true, o.Status, c.Now
			c.legEnd(r)
			if o.Status == sched.FinishedError {
				r.Error = "decode failed: " + o.Fallback.String()
				r.HTTPStatus = 502
			}
		}
	}
}
