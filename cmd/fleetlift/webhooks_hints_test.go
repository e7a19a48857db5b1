package main

import (
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// A push to a branch of a repository where pull requests are followed is
// a hint to read them and, for those merged into that branch, to run
// done_when again; a tag, a status or a repository nobody follows is no
// push hint.
func TestWebhookPushesHintAtTheBranch(t *testing.T) {
	const key = "git.example/acme/api"
	for _, tc := range []struct {
		ev   webhook.Event
		want []status.PushHint
	}{
		{webhook.Event{Kind: webhook.Push, Followed: true, Key: key, Ref: "refs/heads/main"}, []status.PushHint{{Repository: key, Branch: "main"}}},
		{webhook.Event{Kind: webhook.Push, Followed: true, Key: key, Ref: "refs/tags/v1"}, nil},
		{webhook.Event{Kind: webhook.Status, Followed: true, Key: key}, nil},
		{webhook.Event{Kind: webhook.Push, Watched: true, Key: key, Ref: "refs/heads/main"}, nil},
	} {
		h := hintsOf(tc.ev)
		if !slices.Equal(h.Pushes, tc.want) {
			t.Errorf("%v to %s (followed %v): pushes %v; want %v", tc.ev.Kind, tc.ev.Ref, tc.ev.Followed, h.Pushes, tc.want)
		}
	}
}
