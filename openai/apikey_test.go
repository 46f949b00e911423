package openai

import "testing"

func TestAPIKeys(t *testing.T) {
	none := NewAPIKeys("", "")
	if none.Enabled() || !none.Allow("") || !none.Allow("Bearer anything") {
		t.Fatal("no key configured must allow every request")
	}
	k := NewAPIKeys("sk-one", "sk-two")
	if !k.Enabled() {
		t.Fatal("two keys: not enabled")
	}
	for _, tt := range []struct {
		auth string
		want bool
	}{
		{"Bearer sk-one", true},
		{"Bearer sk-two", true},
		{"bearer sk-one", true}, // the scheme is case-insensitive
		{"BEARER sk-two", true},
		{"", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Bearer sk-on", false},
		{"Bearer sk-one ", false}, // the key is everything after the first space
		{"Bearer  sk-one", false},
		{"Basic sk-one", false},
		{"sk-one", false},
		{"Token sk-one", false},
	} {
		if got := k.Allow(tt.auth); got != tt.want {
			t.Errorf("Allow(%q) = %v, want %v", tt.auth, got, tt.want)
		}
	}
	if e := Unauthorized(); e.Status != 401 || e.Code != CodeInvalidAPIKey || e.Type != TypeInvalidRequest {
		t.Errorf("Unauthorized() = %+v", e)
	}
}
