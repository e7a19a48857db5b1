package activity

import (
	"testing"
	"time"
)

// QuietBeats holds back, for the rest of test t, the heartbeats an
// activity without a heartbeat timeout sends of its own: those a test
// counts are then only the ones the activity sends at its steps.
func QuietBeats(t *testing.T) {
	was := quietBeat
	quietBeat = time.Hour
	t.Cleanup(func() { quietBeat = was })
}

// ReadPR is what a pass of RefreshPullRequests does for one pull request.
var ReadPR = (*Activities).readPR

// ShortPaceWait shortens, for the rest of test t, how long an agentic
// sandbox waits for the model's tokens before it is made anyway.
func ShortPaceWait(t *testing.T, d time.Duration) {
	was := paceAgentsWithin
	paceAgentsWithin = d
	t.Cleanup(func() { paceAgentsWithin = was })
}
