package agent

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// ReportFile is the report an agent writes in report mode (capture
// "file"): in the repository it runs in, or in the workspace for the
// transformation + targets layout.
const ReportFile = "REPORT.md"

// maxReportBytes bounds a report.
const maxReportBytes = 4 << 20

// ReportError is a report that could not be collected. Kind is one of
// protocol.ReportMissing, ReportFrontmatterInvalid, ReportSchemaInvalid.
type ReportError struct {
	Kind string
	Err  error
}

func (e *ReportError) Error() string { return e.Err.Error() }
func (e *ReportError) Unwrap() error { return e.Err }

// ParseReport splits a report into its YAML frontmatter, between a first
// line "---" and the next line "---" (or "..."), and its markdown body. A
// report without frontmatter is all body. Errors are *ReportError of kind
// frontmatter_invalid; the returned Report always carries Raw.
func ParseReport(raw string) (*protocol.Report, error) {
	rep := &protocol.Report{Raw: raw}
	text := strings.TrimPrefix(raw, "\ufeff")
	text = strings.TrimLeft(text, " \t\r\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t\r") != "---" {
		rep.Body = strings.TrimSpace(text)
		return rep, nil
	}
	var yamlText string
	closed := false
	for len(rest) > 0 {
		line, after, _ := strings.Cut(rest, "\n")
		if l := strings.TrimRight(line, " \t\r"); l == "---" || l == "..." {
			rest = after
			closed = true
			break
		}
		yamlText += line + "\n"
		rest = after
	}
	if !closed {
		return rep, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: errors.New("frontmatter is not closed by a --- line")}
	}
	var doc any
	if err := yaml.Unmarshal([]byte(yamlText), &doc); err != nil {
		return rep, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: fmt.Errorf("frontmatter is not valid YAML: %w", err)}
	}
	if doc == nil {
		doc = map[string]any{}
	}
	norm, err := jsonValue(doc)
	if err != nil {
		return rep, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: fmt.Errorf("frontmatter: %w", err)}
	}
	fm, ok := norm.(map[string]any)
	if !ok {
		return rep, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: fmt.Errorf("frontmatter must be a YAML mapping, not %T", norm)}
	}
	rep.Frontmatter = fm
	rep.Body = strings.TrimSpace(rest)
	return rep, nil
}

// jsonValue turns decoded YAML into values JSON can hold.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%v cannot be represented in JSON", v)
		}
		return v, nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case []byte:
		return string(v), nil
	default:
		return v, nil
	}
}

// collectReport parses raw. A report that is empty, or has neither
// frontmatter data nor body text, is kept with
// protocol.ReportEmptyWarning: seed 001 flags it for review rather than
// failing it. Otherwise a report without frontmatter fails when there is
// a schema (schema set); the frontmatter is checked against it by the
// control plane.
func collectReport(raw string, schema bool) (*protocol.Report, error) {
	if strings.TrimSpace(strings.TrimPrefix(raw, "\ufeff")) == "" {
		return &protocol.Report{Raw: raw, Warning: protocol.ReportEmptyWarning}, nil
	}
	rep, err := ParseReport(raw)
	if err != nil {
		return rep, err
	}
	if len(rep.Frontmatter) == 0 && rep.Body == "" {
		rep.Warning = protocol.ReportEmptyWarning
		return rep, nil
	}
	if schema && rep.Frontmatter == nil {
		return rep, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: errors.New("report has no YAML frontmatter between --- lines")}
	}
	return rep, nil
}
