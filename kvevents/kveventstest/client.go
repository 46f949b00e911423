package kveventstest

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Msg is one published message.
type Msg struct {
	Topic   string
	Seq     int64
	Payload []byte
}

// Subscriber is a ZMQ SUB socket (go-zeromq/zmq4) connected to a
// publisher.
type Subscriber struct {
	sock   zmq4.Socket
	cancel context.CancelFunc
	msgs   chan Msg
	errs   chan error
}

// Subscribe dials endpoint (tcp://HOST:PORT) and subscribes to topic (a
// prefix; "" is every topic).
func Subscribe(endpoint, topic string) (*Subscriber, error) {
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewSub(ctx, zmq4.WithDialerRetry(50*time.Millisecond), zmq4.WithDialerMaxRetries(100))
	if err := sock.Dial(endpoint); err != nil {
		cancel()
		sock.Close()
		return nil, err
	}
	if err := sock.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		cancel()
		sock.Close()
		return nil, err
	}
	s := &Subscriber{sock: sock, cancel: cancel, msgs: make(chan Msg, 1<<16), errs: make(chan error, 1)}
	go s.recv()
	return s, nil
}

func (s *Subscriber) recv() {
	for {
		m, err := s.sock.Recv()
		if err != nil {
			s.errs <- err
			return
		}
		if len(m.Frames) != 3 {
			s.errs <- fmt.Errorf("a message of %d frames, want 3 (topic, seq, payload)", len(m.Frames))
			return
		}
		seq, err := Seq(m.Frames[1])
		if err != nil {
			s.errs <- err
			return
		}
		s.msgs <- Msg{Topic: string(m.Frames[0]), Seq: seq, Payload: m.Frames[2]}
	}
}

// Next returns the next message, waiting at most timeout.
func (s *Subscriber) Next(timeout time.Duration) (Msg, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-s.msgs:
		return m, nil
	case err := <-s.errs:
		return Msg{}, err
	case <-t.C:
		return Msg{}, fmt.Errorf("no message within %v", timeout)
	}
}

// Close closes the socket.
func (s *Subscriber) Close() {
	s.cancel()
	s.sock.Close()
}

// Replay asks the replay endpoint (a ROUTER) for every buffered batch from
// start on, as vLLM's clients do (a DEALER sending the empty delimiter and
// the 8-byte big-endian start sequence), and returns the batches up to the
// end marker (seq -1, empty payload), which it checks.
func Replay(endpoint string, start int64, timeout time.Duration) ([]Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(50*time.Millisecond), zmq4.WithDialerMaxRetries(100))
	defer sock.Close()
	if err := sock.Dial(endpoint); err != nil {
		return nil, err
	}
	var seqb [8]byte
	binary.BigEndian.PutUint64(seqb[:], uint64(start))
	if err := sock.Send(zmq4.NewMsgFrom([]byte{}, seqb[:])); err != nil {
		return nil, err
	}
	var out []Msg
	for {
		m, err := sock.Recv()
		if err != nil {
			return out, fmt.Errorf("replay: %v after %d batches", err, len(out))
		}
		if len(m.Frames) != 3 || len(m.Frames[0]) != 0 {
			return out, fmt.Errorf("replay: a reply of %d frames, want [empty, seq, payload]", len(m.Frames))
		}
		seq, err := Seq(m.Frames[1])
		if err != nil {
			return out, err
		}
		if seq == -1 {
			if len(m.Frames[2]) != 0 {
				return out, fmt.Errorf("replay: end marker with a %d-byte payload", len(m.Frames[2]))
			}
			return out, nil
		}
		out = append(out, Msg{Seq: seq, Payload: m.Frames[2]})
	}
}
