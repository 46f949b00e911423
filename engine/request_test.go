package engine

import "testing"

func TestAddResultHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		res  AddResult
		want int
	}{
		{Accepted, 200},
		{RejectedInvalid, 400},
		{RejectedTooLong, 400},
		{RejectedDuplicate, 400}, // as vLLM: "Request id ... already running." is a 400
		{RejectedQueueFull, 429},
		{RejectedShuttingDown, 503},
		{RejectedShuttingDown + 1, 500},
	} {
		if got := tc.res.HTTPStatus(); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.res, got, tc.want)
		}
	}
}
