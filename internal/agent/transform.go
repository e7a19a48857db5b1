package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// agentOutputTail is how much of each agent run's output the result keeps.
const agentOutputTail = 16 << 10

// stuckAfter is how many consecutive agent runs without a change stop
// the loop.
const stuckAfter = 3

// work is one stretch of work: transform every scope, verify, collect.
// steer is the reviewer's feedback, "" the first time.
func (r *runner) work(ctx context.Context, steer string) error {
	r.resetStretch()
	r.setPhase(protocol.PhaseExecuting, "transforming", "")
	for _, sc := range r.scopes {
		live := sc.live()
		if sc.owner != nil && sc.owner.broken || sc.owner == nil && len(live) == 0 {
			continue
		}
		var err error
		switch {
		case r.m.Mode == protocol.ModeReport:
			err = r.reportScope(ctx, sc, steer)
		case r.m.Mode == protocol.ModeCheck:
			err = r.runCheck(ctx, sc)
		case r.m.Execution.Type == protocol.ExecutionDeterministic:
			err = r.deterministic(ctx, sc, steer)
		default:
			err = r.agentic(ctx, sc, steer)
		}
		if err != nil {
			return err
		}
		r.progressed(len(live))
	}
	if err := r.verify(ctx); err != nil {
		return err
	}
	if err := r.collect(ctx); err != nil {
		return err
	}
	// Soon, not at once: what comes next (a decision awaited, the pull
	// requests, the end) writes it at once before its status.
	r.writeResultQuietly()
	return nil
}

// resetStretch forgets the outcome of the previous stretch everywhere but
// in broken repositories.
func (r *runner) resetStretch() {
	r.result.AgentOutput = ""
	reset := func(u *unit) {
		if u == nil || u.res == nil || u.broken {
			return
		}
		u.failure, u.kind, u.skipVerify = "", "", false
		*u.res = protocol.RepositoryResult{Name: u.repo.Name, Status: "running"}
	}
	for _, u := range r.units {
		reset(u)
	}
	reset(r.recipe)
	r.outputs = map[string]string{}
}

// live are the scope's repositories that can still be worked on.
func (sc *scope) live() []*unit {
	var out []*unit
	for _, u := range sc.units {
		if !u.broken && u.failure == "" {
			out = append(out, u)
		}
	}
	return out
}

func failAll(units []*unit, msg string) {
	for _, u := range units {
		if u.failure == "" {
			u.failure = msg
		}
	}
}

// run is one run of the agent CLI or a deterministic command.
type run struct {
	stdout string
	code   int
	// said is the last line the command wrote to its standard error,
	// shortened and redacted: why it failed, for its failure message.
	said string
	// refused is why the model gateway refused the agent CLI a request
	// (a spent token budget), "" when it refused none.
	refused string
}

// exitError is why a run that exited with a status other than 0 failed.
func (res run) exitError(what string) string {
	msg := fmt.Sprintf("%s exited with status %d", what, res.code)
	if res.refused != "" {
		return msg + ": " + res.refused
	}
	if res.said != "" {
		msg += ": " + res.said
	}
	return msg
}

// maxSaid bounds the line of a command's standard error its failure
// message quotes.
const maxSaid = 200

// lastLine is the last non-empty line of s, at most maxSaid bytes (cut
// at a rune boundary), control characters (a terminal's escape
// sequences) shown as '?': the work wrote it.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > maxSaid {
		cut := maxSaid
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// runIn runs argv for sc and records its output. A command that cannot
// start counts as exit status 127; the error is set only when ctx ended.
func (r *runner) runIn(ctx context.Context, sc *scope, argv, env []string, stdin *os.File, jl *jail.Jail) (run, error) {
	stdout := &head{max: maxReportBytes}
	outTail, errTail := newTail(agentOutputTail), newTail(agentOutputTail)
	code, err := command{
		argv: argv, dir: sc.dir, env: env, stdin: stdin,
		stdout: io.MultiWriter(stdout, outTail), stderr: errTail,
		jail: jl,
		disk: r.disk(),
	}.run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return run{}, context.Cause(ctx)
		}
		if stopsRun(err) {
			return run{}, err
		}
		code = 127
		fmt.Fprintf(errTail, "%v\n", err)
	}
	out := outTail.String()
	if e := errTail.String(); e != "" {
		out += "\n[stderr]\n" + e
	}
	r.recordOutput(sc.name, out)
	res := run{stdout: string(stdout.buf), code: code}
	if code != 0 {
		res.said = r.redact(lastLine(errTail.String()))
	}
	return res, nil
}

// recordOutput keeps the latest output of each scope in the result.
func (r *runner) recordOutput(name, out string) {
	r.outputs[name] = r.redact(out)
	var b strings.Builder
	for _, sc := range r.scopes {
		if o, ok := r.outputs[sc.name]; ok {
			fmt.Fprintf(&b, "== %s ==\n%s\n", sc.name, strings.TrimRight(o, "\n"))
		}
	}
	r.result.AgentOutput = b.String()
}

// scopeEnv is the environment of a transform in sc: base (r.env, or
// r.cliEnv for the agent CLI) with the run's context and extra.
func (r *runner) scopeEnv(base []string, sc *scope, extra ...string) []string {
	kv := []string{protocol.EnvWorkspace + "=" + r.ws, protocol.EnvRepository + "=" + sc.name, protocol.EnvIteration + "=" + strconv.Itoa(r.iteration)}
	if r.recipe != nil {
		kv = append(kv, protocol.EnvTransformationDir+"="+r.recipe.dir)
	}
	return withEnv(base, append(kv, extra...)...)
}

func forEachEnv(item *protocol.ForEachTarget) []string {
	if item == nil {
		return nil
	}
	return []string{protocol.EnvForEachName + "=" + item.Name, protocol.EnvForEachContext + "=" + item.Context}
}

// runAgent runs the agent CLI in sc with prompt on stdin and in
// EnvPromptFile.
func (r *runner) runAgent(ctx context.Context, sc *scope, prompt string, attempt int, item *protocol.ForEachTarget) (run, error) {
	r.setStep("running_agent", fmt.Sprintf("running the agent in %s (attempt %d)", sc.name, attempt))
	promptFile := filepath.Join(r.pdir, "prompt.txt")
	if err := writeFileAtomic(promptFile, []byte(prompt)); err != nil {
		return run{}, err
	}
	f, err := os.Open(promptFile)
	if err != nil {
		return run{}, fmt.Errorf("open prompt: %w", err)
	}
	defer f.Close()
	extra := append([]string{protocol.EnvPromptFile + "=" + promptFile, protocol.EnvAttempt + "=" + strconv.Itoa(attempt)}, forEachEnv(item)...)
	jl := r.jail(append([]string{promptFile}, r.cliFiles()...)...)
	gw, done, err := r.modelGateway(jl)
	if err != nil {
		return run{}, err
	}
	defer done()
	env := r.scopeEnv(r.cliEnv, sc, append(extra, gw...)...)
	res, err := r.runIn(ctx, sc, r.cli, env, f, jl)
	if err != nil {
		return res, err
	}
	res.refused = r.readModelUsage()
	return res, nil
}

// cliFiles are the agent CLI's executable, which the operator chose: the
// jail shows it wherever it lives, even in a directory every jail makes
// private (/tmp) or hides. A definition's command gets no such exception.
func (r *runner) cliFiles() []string {
	if len(r.cli) == 0 {
		return nil
	}
	path := r.cli[0]
	if !strings.ContainsRune(path, '/') {
		found, err := exec.LookPath(path)
		if err != nil {
			return nil
		}
		path = found
	}
	// A relative path is the command's directory's, a repository's:
	// nothing of the operator's to show.
	if !filepath.IsAbs(path) {
		return nil
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return nil
	}
	return []string{filepath.Clean(path)}
}

// runCommand runs the deterministic command in sc.
func (r *runner) runCommand(ctx context.Context, sc *scope, steer string, item *protocol.ForEachTarget) (run, error) {
	r.setStep("running_command", "running the command in "+sc.name)
	argv := append(append([]string{}, r.m.Execution.Command...), r.m.Execution.Args...)
	var extra []string
	for k, v := range r.m.Execution.Env {
		extra = append(extra, k+"="+v)
	}
	if steer != "" {
		extra = append(extra, protocol.EnvSteeringPrompt+"="+steer)
	}
	env := r.scopeEnv(r.env, sc, append(extra, forEachEnv(item)...)...)
	return r.runIn(ctx, sc, argv, env, nil, r.jail())
}

// deterministic runs the command once in each repository of sc.
func (r *runner) deterministic(ctx context.Context, sc *scope, steer string) error {
	res, err := r.runCommand(ctx, sc, steer, nil)
	if err != nil {
		return err
	}
	if res.code != 0 {
		for _, u := range sc.live() {
			u.skipVerify = true
			u.failure = res.exitError("command")
		}
	}
	return nil
}

// runCheck runs a check's command in sc: a status other than 0 fails
// its repositories with CheckFailed, saying how it exited.
func (r *runner) runCheck(ctx context.Context, sc *scope) error {
	res, err := r.runCommand(ctx, sc, "", nil)
	if err != nil {
		return err
	}
	for _, u := range sc.live() {
		u.res.Base = u.base
		if res.code != 0 {
			u.failure, u.kind = res.exitError("check"), protocol.CheckFailed
		}
	}
	return nil
}

// agentic runs the agent until the verifiers pass, the limits are reached
// or it stops making progress.
func (r *runner) agentic(ctx context.Context, sc *scope, steer string) error {
	maxIter := r.m.Limits.MaxIterations
	if maxIter == 0 {
		maxIter = DefaultMaxIterations
	}
	maxRetries := DefaultMaxVerifierRetries
	if n := r.m.Limits.MaxVerifierRetries; n != nil {
		maxRetries = *n
	}
	prev, err := r.snapshot(ctx, sc.live())
	if err != nil {
		return err
	}
	stale := 0
	feedback := ""
	for attempt := 1; ; attempt++ {
		res, err := r.runAgent(ctx, sc, r.prompt(sc, nil, steer, feedback), attempt, nil)
		if err != nil {
			return err
		}
		if res.code != 0 {
			for _, u := range sc.live() {
				u.skipVerify = true
				u.failure = res.exitError("agent")
			}
			return nil
		}
		if len(r.m.Verifiers) == 0 {
			return nil
		}
		r.setStep("verifier_feedback", "checking the agent's work in "+sc.name)
		failing, report, err := r.check(ctx, sc.live())
		if err != nil {
			return err
		}
		if len(failing) == 0 {
			return nil
		}
		cur, err := r.snapshot(ctx, sc.live())
		if err != nil {
			return err
		}
		if cur == prev {
			stale++
		} else {
			stale = 0
		}
		prev = cur
		switch {
		case stale >= stuckAfter:
			failAll(failing, fmt.Sprintf("agent made no progress in %d iterations", stuckAfter))
			return nil
		case attempt > maxRetries || attempt >= maxIter:
			failAll(failing, fmt.Sprintf("verifiers still failing after %d attempts", attempt))
			return nil
		}
		feedback = report
	}
}

// snapshot is the combined state of the work trees of units.
func (r *runner) snapshot(ctx context.Context, units []*unit) (string, error) {
	var ids []string
	for _, u := range units {
		if err := r.intact(u); err != nil {
			return "", err
		}
		id, err := r.g.Snapshot(ctx, u.dir)
		if err != nil {
			if ctx.Err() != nil {
				return "", context.Cause(ctx)
			}
			return "", fmt.Errorf("%s: %w", u.repo.Name, err)
		}
		ids = append(ids, id)
	}
	return strings.Join(ids, ","), nil
}

// reportScope runs the transform once per for_each target (or once) and
// collects the reports.
func (r *runner) reportScope(ctx context.Context, sc *scope, steer string) error {
	items := []*protocol.ForEachTarget{nil}
	if len(r.m.ForEach) > 0 {
		items = items[:0]
		for i := range r.m.ForEach {
			items = append(items, &r.m.ForEach[i])
		}
	}
	owner := sc.owner
	path := filepath.Join(sc.dir, ReportFile)
	var results []protocol.ForEachResult
	failed := 0
	for _, item := range items {
		if err := removeReport(path); err != nil {
			return err
		}
		var res run
		var err error
		if r.m.Execution.Type == protocol.ExecutionAgentic {
			res, err = r.runAgent(ctx, sc, r.prompt(sc, item, steer, ""), 1, item)
		} else {
			res, err = r.runCommand(ctx, sc, steer, item)
		}
		if err != nil {
			return err
		}
		r.setStep("collecting_reports", "reading the report of "+sc.name)
		rep, err := r.readReport(path, res.stdout)
		kind := ""
		var re *ReportError
		if errors.As(err, &re) {
			kind = re.Kind
		}
		if kind == protocol.ReportMissing {
			// What the agent said instead is the diagnostic (seed 001).
			if said := lastLines(r.outputs[sc.name], missingDiagnostic); said != "" {
				err = fmt.Errorf("%w; the agent's output ends:\n%s", err, said)
			}
		}
		if err == nil && res.code != 0 {
			err = errors.New(res.exitError("agent"))
		}
		if item == nil {
			owner.res.Report = rep
			if err != nil {
				owner.failure, owner.kind = r.redact(err.Error()), kind
			}
			continue
		}
		fr := protocol.ForEachResult{Name: item.Name, Report: rep}
		if err != nil {
			failed++
			fr.Error, fr.ErrorKind = r.redact(err.Error()), kind
		}
		results = append(results, fr)
		owner.res.ForEach = results
		r.writeResultQuietly()
	}
	if failed > 0 {
		owner.failure = protocol.ReportsFailed(failed, len(items))
	}
	return nil
}

// missingDiagnostic is how much of the agent's output the error of a
// missing report quotes.
const missingDiagnostic = 1024

// lastLines is the end of s, at most n bytes, starting on a whole line.
func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// writeResultQuietly writes result.json mid-phase, soon rather than at
// once (see protocolFile), logging a failure.
func (r *runner) writeResultQuietly() {
	r.resultMu.Lock()
	defer r.resultMu.Unlock()
	if err := r.file(&r.resultFile, protocol.ResultFile).write(r.result, false, nil); err != nil {
		r.o.Log.Error("write result", "err", err)
	}
}

// removeReport removes a stale report so that a missing one is noticed.
func removeReport(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", ReportFile, err)
	}
	return nil
}

// readReport reads the report from the file or from stdout, as the
// manifest says, and validates it.
func (r *runner) readReport(path, stdout string) (*protocol.Report, error) {
	var raw string
	if r.m.Output != nil && r.m.Output.Capture == "stdout" {
		if strings.TrimSpace(stdout) == "" {
			return nil, &ReportError{Kind: protocol.ReportMissing, Err: errors.New("the agent printed no report on standard output")}
		}
		raw = stdout
	} else {
		data, err := readRegular(path, maxReportBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ReportError{Kind: protocol.ReportMissing, Err: fmt.Errorf("%s was not written", ReportFile)}
		}
		if errors.Is(err, errTooLarge) {
			return nil, &ReportError{Kind: protocol.ReportFrontmatterInvalid, Err: err}
		}
		if err != nil {
			return nil, &ReportError{Kind: protocol.ReportMissing, Err: fmt.Errorf("read %s: %w", ReportFile, err)}
		}
		raw = string(data)
	}
	return collectReport(r.redactSecrets(raw), r.schema)
}

var placeholder = regexp.MustCompile(`\{\{\s*\.(context|Context|name|Name)\s*\}\}`)

// substitute fills {{.context}}, {{.Context}}, {{.name}} and {{.Name}}
// with the for_each target; nothing else in the prompt is a template.
func substitute(prompt string, item *protocol.ForEachTarget) string {
	if item == nil {
		return prompt
	}
	return placeholder.ReplaceAllStringFunc(prompt, func(m string) string {
		if strings.Contains(strings.ToLower(m), "context") {
			return item.Context
		}
		return item.Name
	})
}

// prompt is what the agent CLI gets: the manifest's prompt, the verifier
// and report instructions, and feedback.
func (r *runner) prompt(sc *scope, item *protocol.ForEachTarget, steer, feedback string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(substitute(r.m.Execution.Prompt, item), "\n"))
	if len(r.m.Verifiers) > 0 {
		where := "in the repository"
		if r.recipe != nil {
			where = "in each repository under " + filepath.Join(r.ws, targetsDir)
		}
		fmt.Fprintf(&b, "\n\nBefore finishing, make sure these commands succeed %s:\n", where)
		for _, v := range r.m.Verifiers {
			fmt.Fprintf(&b, "- %s: %s\n", v.Name, shellJoin(v.Command))
		}
		b.WriteString("Fix any errors before completing the task.")
	}
	if r.m.Mode == protocol.ModeReport {
		b.WriteString("\n\n")
		b.WriteString(r.reportInstructions(filepath.Join(sc.dir, ReportFile)))
	}
	if steer != "" {
		fmt.Fprintf(&b, "\n\nFeedback from the reviewer on your previous work (steering iteration %d):\n%s", r.iteration, steer)
	}
	if feedback != "" {
		b.WriteString("\n\nThe verifiers failed after your last attempt. Fix the problems so that they pass:\n\n")
		b.WriteString(feedback)
	}
	b.WriteString("\n")
	return b.String()
}

func (r *runner) reportInstructions(path string) string {
	var b strings.Builder
	if r.m.Output != nil && r.m.Output.Capture == "stdout" {
		b.WriteString("Print your report on standard output as your final answer, with:\n")
	} else {
		fmt.Fprintf(&b, "Write your report to %s with:\n", path)
	}
	b.WriteString(`- YAML frontmatter between --- delimiters containing structured data
- Markdown body with detailed analysis

Example format:
---
key: value
items:
  - item1
  - item2
---

# Report Title

Your detailed analysis here...`)
	if r.schema {
		fmt.Fprintf(&b, "\n\nThe frontmatter must validate against this JSON Schema:\n%s", strings.TrimSpace(string(r.m.Output.Schema)))
	}
	return b.String()
}

// shellJoin shows argv as a shell would need it.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]{}~#!") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
