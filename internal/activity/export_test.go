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
