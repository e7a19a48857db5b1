package jobspec

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("Campaign_Repo.", 8) + "-run1"
	for _, id := range []string{"st-run-1234abcd", "Campaign/slog-acme_repo.x-0a1b", long, "---", "UPPER"} {
		n, l := Name(id), LabelValue(id)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("Name(%q) = %q: %v", id, n, errs)
		}
		if errs := validation.IsValidLabelValue(l); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q: %v", id, l, errs)
		}
	}
	if Name("st-run-1234abcd") != "st-run-1234abcd" || LabelValue("A_b.c") != "A_b.c" {
		t.Error("a valid id is not kept as it is")
	}
	if Name(long) == Name(long+"x") || Name("a_b") == Name("a-b") {
		t.Error("distinct ids share a name")
	}
}
