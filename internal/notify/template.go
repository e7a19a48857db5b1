package notify

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/fleetlift/fleetlift/internal/redact"
)

// Events a subscription can be on (#NotifyEvent).
const (
	// AwaitingApproval: a result waits for someone's approval.
	AwaitingApproval = "awaiting_approval"
	// Paused: a campaign stopped starting repositories until someone
	// continues or aborts it.
	Paused = "paused"
	// Failed: a run ended completed_with_failures, failed or aborted.
	Failed = "failed"
	// Completed: a run ended with every repository completed.
	Completed = "completed"
	// Done: a run ended, in any way.
	Done = "done"
)

// Message is one event of one campaign, as its template receives it.
type Message struct {
	// Event is one of the events above.
	Event string `json:"event"`
	// Campaign is the definition's id; Kind Task or Campaign.
	Campaign string `json:"campaign"`
	Kind     string `json:"kind"`
	// Generation is the run's generation; Revision the campaigns
	// commit it was applied from.
	Generation int64  `json:"generation"`
	Revision   string `json:"revision,omitempty"`
	// Run is the run's Temporal run id.
	Run string `json:"run,omitempty"`
	// Phase and Message are the run's, as fleetlift status shows them.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Target is the task or repository whose result awaits approval
	// (awaiting_approval only), ResultDigest the result's digest.
	Target       string `json:"target,omitempty"`
	ResultDigest string `json:"result_digest,omitempty"`
	// Repositories counts the run's repositories.
	Repositories Counts `json:"repositories"`
	// Text is the message rendered; not given to templates.
	Text string `json:"text"`
	// Key identifies this event of this campaign for this service: a
	// message with the same key is the same message (receivers can
	// deduplicate on it; webhooks send it as X-Fleetlift-Delivery).
	Key string `json:"key"`
}

// Delivery is a message for one of the operator's services, by name.
type Delivery struct {
	Service string  `json:"service"`
	Message Message `json:"message"`
}

// Counts are a run's repositories by how they stand.
type Counts struct {
	Total        int `json:"total"`
	Completed    int `json:"completed"`
	Failed       int `json:"failed"`
	PullRequests int `json:"pull_requests"`
}

// MaxText bounds a rendered message; a longer one is cut.
const MaxText = 4000

// ParseTemplate parses text as a notification template named name,
// refusing what could make executing it cost more than its length: range
// (over a number, it loops), define, block and template (calls).
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "template: "))
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("%s: define and block are not allowed in a notification template", name)
	}
	if err := check(name, t.Tree.Root); err != nil {
		return nil, err
	}
	// Fields must be Message's: a misspelt one is found now, not when
	// the first event comes.
	if _, err := execute(t, sample()); err != nil {
		return nil, err
	}
	return t, nil
}

// check refuses the nodes ParseTemplate does not allow.
func check(name string, n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := check(name, c); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		return fmt.Errorf("%s: range is not allowed in a notification template", name)
	case *parse.TemplateNode:
		return fmt.Errorf("%s: template calls are not allowed in a notification template", name)
	case *parse.IfNode:
		return checkBranch(name, &n.BranchNode)
	case *parse.WithNode:
		return checkBranch(name, &n.BranchNode)
	}
	return nil
}

func checkBranch(name string, b *parse.BranchNode) error {
	if err := check(name, b.List); err != nil {
		return err
	}
	return check(name, b.ElseList)
}

// sample is a Message with every field set, to execute a template once
// when it is parsed.
func sample() Message {
	return Message{Event: Paused, Campaign: "c", Kind: "Campaign", Generation: 1, Revision: "0000000",
		Phase: "paused", Message: "m", Target: "c/r", ResultDigest: "sha256:0",
		Repositories: Counts{Total: 1}}
}

// execute runs t on m, its output cut at MaxText.
func execute(t *template.Template, m Message) (string, error) {
	var b bytes.Buffer
	w := &limited{w: &b, n: MaxText}
	if err := t.Execute(w, m); err != nil && !errors.Is(err, errFull) {
		return "", errors.New(strings.TrimPrefix(err.Error(), "template: "))
	}
	return b.String(), nil
}

var errFull = errors.New("message is full")

// limited writes at most n bytes to w, then fails.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.w.Write(p[:l.n])
		l.n = 0
		return 0, errFull
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// Render sets m.Text: m executed by t, or the built-in line when t is
// nil; credentials in URLs are redacted either way.
func Render(t *template.Template, m Message) (Message, error) {
	m.Text = ""
	var text string
	if t == nil {
		text = Line(m)
	} else {
		var err error
		if text, err = execute(t, m); err != nil {
			return m, err
		}
	}
	m.Text = redact.URLs(strings.TrimSpace(text))
	m.Message = redact.URLs(m.Message)
	return m, nil
}

// Line is the built-in message: what happened, and where to look.
func Line(m Message) string {
	what := map[string]string{
		AwaitingApproval: "has a result awaiting approval",
		Paused:           "paused",
		Failed:           "ended " + m.Phase,
		Completed:        "completed",
		Done:             "ended " + m.Phase,
	}[m.Event]
	if what == "" {
		what = m.Event
	}
	s := fmt.Sprintf("fleetlift: %s/%s (generation %d) %s", strings.ToLower(m.Kind), m.Campaign, m.Generation, what)
	if m.Target != "" {
		s += " for " + m.Target
	}
	if m.Message != "" {
		s += ": " + m.Message
	}
	if r := m.Repositories; r.Total > 0 && m.Event != AwaitingApproval {
		s += fmt.Sprintf(" (%d repositories: %d completed, %d failed, %d pull requests)", r.Total, r.Completed, r.Failed, r.PullRequests)
	}
	return s + fmt.Sprintf(". fleetlift status %s", m.Campaign)
}
