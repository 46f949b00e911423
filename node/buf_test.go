package node

import (
	"context"
	"io"
	"testing"

	"github.com/kvlease/kvlease/engine"
)

// A buffer given to Start takes the stream's outputs: the first Recv
// returns them in it (no allocation of the stream's own), for a consumer
// that takes them at the end and for one that streams them.
func TestStartBufTakesTheOutputs(t *testing.T) {
	n, _ := startNode(t, 0, Config{})
	for _, finishedOnly := range []bool{true, false} {
		buf := make([]engine.Output, 3, 32)
		buf[0].Token = -7 // stale content: the stream starts it empty
		st := n.Start(req("b", 6), SubmitOptions{FinishedOnly: finishedOnly, Buf: buf})
		outs, err := st.Recv(context.Background(), nil)
		if err != nil || len(outs) == 0 {
			t.Fatalf("finishedOnly %v: Recv: %d outputs, %v", finishedOnly, len(outs), err)
		}
		if &outs[0] != &buf[:1][0] {
			t.Errorf("finishedOnly %v: the outputs are not in the given buffer", finishedOnly)
		}
		all := append([]engine.Output(nil), outs...)
		for {
			outs, err = st.Recv(context.Background(), outs)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, outs...)
		}
		if len(all) != 6 || !all[5].Finished || all[0].Token == -7 {
			t.Errorf("finishedOnly %v: outputs %+v", finishedOnly, all)
		}
	}
}
