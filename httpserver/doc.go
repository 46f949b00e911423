// Package httpserver is kvlease's HTTP/1.1 server (EDGE): it serves any
// http.Handler, in place of net/http's Server, for `kvlease serve` and
// `kvlease proxy`.
//
// # Why not net/http's server
//
// kvlease must know at once when a client goes away: an engine then
// releases the request's KV leases and aborts it, the proxy aborts its
// legs. net/http knows it only through a goroutine it starts for every
// request to read the connection in the background, which it stops when
// the handler returns by setting a read deadline in the past and waiting
// for it; with the header map built per request and the answer's head
// rendered through a second buffer, that costs several microseconds of
// CPU per request, as much as an engine's whole work on a short request.
// fasthttp is faster but does not see a client leave.
//
// # How a connection is served
//
// Two goroutines serve a connection for its whole life, in two roles
// that pass between them (leader/follower). The reader reads the socket
// all the time, also while a handler runs: what it reads is the
// request's body, or the next request (pipelined requests are kept, up
// to 64 KiB, and served in turn), and an EOF or a reset cancels the
// running request's context at once. The server parses each request from
// what the reader read, runs the handler and writes the answer; when no
// complete request is buffered it waits for the next head and follows:
// the goroutine whose read brings input then takes the server's role
// itself (it parses, runs the handler, answers) and wakes the other,
// which becomes the reader. So a request's handler runs in the goroutine
// that read its bytes, and the wake-up of the other goroutine, which
// only has to watch the socket, is off the request's path: no hand-off
// between goroutines lies between a request's arrival and its handler. A
// head that comes in several reads passes between the goroutines with
// each read, its reading state kept in the connection; the body a
// handler reads comes through the reader's buffer. Per connection
// objects are reused: the request's header map (cleared between
// requests; a handler must not keep it after it returns), the answer's
// header map and the buffers. The answer's head is rendered straight
// into the write buffer with the start of its body, so a small answer
// leaves in one write; a longer one is chunked (HTTP/1.1) or ends with
// the connection (HTTP/1.0). The idle and read-header timeouts are read
// deadlines set only when they would fire earlier than the one already
// armed, so that the hot path sets none.
//
// # What it refuses
//
// A request is read as net/http's reader reads it, and refused where
// net/http refuses it (a differential fuzz test holds the two together);
// it also refuses what net/http tolerates and a hostile peer can abuse:
// both Transfer-Encoding and Content-Length, or Content-Lengths that
// differ (400: request smuggling); a Transfer-Encoding other than chunked
// (501); a chunked body on HTTP/1.0; folded header lines; header names
// that are not tokens; CONNECT (405). A head over MaxHeaderBytes gets 431;
// a peer that speaks another protocol (a TLS ClientHello, the HTTP/2
// preface, binary garbage) gets 400 or 505 as soon as its first bytes show
// it, then the connection closes. Chunk lines, trailers and the framing
// of a chunked body are bounded as net/http bounds them.
//
// # Bounds
//
// Besides the head's timeouts, a body's reading has a deadline that
// follows its progress (BodyReadTimeout from the handler's first wait for
// its bytes, plus a second per MinBodyRate bytes received), each write of
// an answer has one (WriteTimeout), and connections are bounded in all
// (MaxConns) and per client address until they complete a request
// (MaxPendingConnsPerSource): one beyond is closed at once. SetBounds sets
// the defaults kvlease's servers run with.
//
// # TLS
//
// With TLSConfig every connection is TLS (the handshake runs in the
// reader's first read, bounded as the first head); the reader still
// sees a client leave at once. A plain HTTP request to a TLS port gets a
// 400 that says so.
//
// # Lifecycle
//
// Shutdown and Close follow net/http's Server: Shutdown stops accepting,
// closes idle connections and waits for active ones to finish their
// answer; Close closes every connection, which cancels the contexts of
// the requests running.
package httpserver
