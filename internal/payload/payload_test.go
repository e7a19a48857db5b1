package payload_test

import (
	"fmt"
	"reflect"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// blobLimit is Temporal's default limit on one payload (limit.blobSize.error).
const blobLimit = 2 << 20

// campaignOf is what a campaign of n repositories, every one of them done
// and with its pull request, carries into its next run (continue-as-new).
func campaignOf(n int) workflow.CampaignInput {
	in := workflow.CampaignInput{ID: "fleet-wide", BatchSize: 10, MaxParallel: 8,
		Progress: &workflow.CampaignProgress{Next: n, Results: map[string]status.UnitResult{}, Phase: status.CampaignRunning}}
	for i := range n {
		key := fmt.Sprintf("service-%05d", i)
		url := fmt.Sprintf("https://git.example.com/acme/%s.git", key)
		in.Units = append(in.Units, workflow.Unit{Key: key, Repositories: []protocol.Repository{{Name: key, URL: url, Branch: "main"}}})
		in.Progress.Results[key] = status.UnitResult{Key: key, Phase: status.TaskCompleted, Attempts: 1,
			WorkflowID: "campaign/fleet-wide/" + key + "@1",
			PRs: []protocol.PullRequestInfo{{URL: fmt.Sprintf("https://git.example.com/acme/%s/pulls/%d", key, i%50+1), Number: i%50 + 1,
				Branch: "auto/fleet-wide", Commit: fmt.Sprintf("%040x", i*7919), Tree: fmt.Sprintf("%040x", i*104729)}}}
	}
	return in
}

// A campaign of 10,000 repositories carries its state into its next run
// within Temporal's limit on one payload, which as plain JSON it exceeds;
// it reads back as it was written.
func TestTenThousandRepositoriesFitOnePayload(t *testing.T) {
	in := campaignOf(10_000)
	plain, err := converter.GetDefaultDataConverter().ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := payload.Converter.ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 repositories: %d bytes as JSON, %d compressed", len(plain.GetData()), len(p.GetData()))
	if len(plain.GetData()) <= blobLimit {
		t.Logf("as plain JSON it fits too (%d bytes): the state grew smaller", len(plain.GetData()))
	}
	if len(p.GetData()) > blobLimit/4 {
		t.Errorf("compressed, the state is %d bytes; want it well within the %d-byte limit", len(p.GetData()), blobLimit)
	}
	var back workflow.CampaignInput
	if err := payload.Converter.FromPayload(p, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Units, in.Units) || !reflect.DeepEqual(back.Progress.Results, in.Progress.Results) {
		t.Error("the state read back differs from what was written")
	}
}

// Small payloads, nearly all of them, are left as JSON; and a payload
// written without the codec (an older run's, a search attribute) reads
// as before.
func TestSmallAndOldPayloadsReadAsBefore(t *testing.T) {
	small, err := payload.Converter.ToPayload(map[string]string{"id": "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if string(small.GetMetadata()["encoding"]) != "json/plain" {
		t.Errorf("a small payload is encoded %q; want plain JSON", small.GetMetadata()["encoding"])
	}
	old, err := converter.GetDefaultDataConverter().ToPayload(campaignOf(500))
	if err != nil {
		t.Fatal(err)
	}
	var back workflow.CampaignInput
	if err := payload.Converter.FromPayload(old, &back); err != nil || len(back.Units) != 500 {
		t.Errorf("a payload written without the codec: %v, %d units", err, len(back.Units))
	}
	large, _ := payload.Converter.ToPayload(campaignOf(500))
	if string(large.GetMetadata()["encoding"]) != "binary/zlib" {
		t.Errorf("a payload of %d bytes is encoded %q; want binary/zlib", len(old.GetData()), large.GetMetadata()["encoding"])
	}
}
