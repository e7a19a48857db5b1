package main

import (
	"slices"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestCampaignYAML(t *testing.T) {
	fx := &fixture{targets: "/tmp/t", names: []string{"svc-00", "svc-01"}}
	var c struct {
		ID       string `yaml:"id"`
		Template struct {
			Execution struct {
				Deterministic struct {
					Command []string `yaml:"command"`
				} `yaml:"deterministic"`
			} `yaml:"execution"`
			RequireApproval bool `yaml:"require_approval"`
		} `yaml:"template"`
		MaxParallel  int `yaml:"max_parallel"`
		Repositories []struct {
			URL  string `yaml:"url"`
			Name string `yaml:"name"`
		} `yaml:"repositories"`
	}
	src := campaignOptions{maxParallel: 4, requireApproval: true, work: 1500 * time.Millisecond}.yaml(fx)
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatalf("the campaign is not YAML: %v\n%s", err, src)
	}
	want := []string{"sh", "-c", `sleep 1.5 && sed -i 's/^go 1\.21$/go 1.26/' go.mod`}
	if !slices.Equal(c.Template.Execution.Deterministic.Command, want) {
		t.Errorf("command = %q, want %q", c.Template.Execution.Deterministic.Command, want)
	}
	if c.ID != campaignID || !c.Template.RequireApproval || c.MaxParallel != 4 || len(c.Repositories) != 2 ||
		c.Repositories[1].URL != "file:///tmp/t/svc-01.git" || c.Repositories[1].Name != "svc-01" {
		t.Errorf("campaign = %+v", c)
	}
}
