package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// The change every tool makes, and what it must leave in go.mod.
const (
	change = `sed -i 's/^go 1.21$/go 1.26/' go.mod`
	before = "\ngo 1.21\n"
	after  = "\ngo 1.26\n"
	title  = "Raise the go directive"
)

// fleet is the Gitea every round's organisations live on, and the
// working directory.
type fleet struct {
	g    *giteatest.Server
	root string
	opts options
}

// prepare writes the script multi-gitter runs.
func (f *fleet) prepare() error {
	for _, dir := range []string{"logs", "defs"} {
		if err := os.MkdirAll(filepath.Join(f.root, dir), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(f.script(), []byte("#!/bin/sh\nset -e\n"+change+"\n"), 0o755)
}

func (f *fleet) script() string { return filepath.Join(f.root, "change.sh") }

// round makes n repositories in a fresh organisation, runs t on them until
// every pull request exists, and checks them.
func (f *fleet) round(t tool, tag string, n int) (measure, error) {
	org := tag + "-" + t.name
	repos, err := f.makeRepos(org, n)
	if err != nil {
		return measure{}, err
	}
	branch := "peer/" + org
	cmd, err := t.command(f, org, branch, repos)
	if err != nil {
		return measure{}, err
	}
	logPath := filepath.Join(f.root, "logs", org+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return measure{}, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile

	giteaBefore, err := processCPU(f.g.Pid())
	if err != nil {
		return measure{}, err
	}
	start := time.Now()
	runErr := cmd.Run()
	// What the tool left running when it exited is this process's now
	// (adoptOrphans): its CPU is the tool's too.
	orphans, left := reapOrphans(f.g.Pid(), 10*time.Second)
	if runErr != nil {
		return measure{}, fmt.Errorf("%s on %s: %v\n%s", t.name, org, runErr, tail(logPath))
	}
	if len(left) > 0 {
		return measure{}, fmt.Errorf("%s on %s left processes running 10 s after it exited:\n%s", t.name, org, strings.Join(describe(left), "\n"))
	}
	if err := f.awaitPulls(org, n, 2*time.Minute); err != nil {
		return measure{}, fmt.Errorf("%s on %s: %w\n%s", t.name, org, err, tail(logPath))
	}
	m := measure{wall: time.Since(start), cpu: treeCPU(cmd.ProcessState) + orphans}
	giteaAfter, err := processCPU(f.g.Pid())
	if err != nil {
		return measure{}, err
	}
	m.gitea = giteaAfter - giteaBefore
	if err := f.verify(org, branch, repos); err != nil {
		return measure{}, fmt.Errorf("%s on %s: %w", t.name, org, err)
	}
	if left := leftovers(f.root, f.g.Pid()); len(left) > 0 {
		return measure{}, fmt.Errorf("%s on %s left processes running:\n%s", t.name, org, strings.Join(left, "\n"))
	}
	return m, nil
}

// makeRepos creates org and n repositories in it, each a small Go module
// on main, and returns their names.
func (f *fleet) makeRepos(org string, n int) ([]string, error) {
	token := f.g.AdminToken()
	if err := f.g.Call(token, http.MethodPost, "orgs", map[string]any{"username": org, "visibility": "public"}, nil); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%02d", i)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f.makeRepo(token, org, name)
		})
	}
	wg.Wait()
	return names, errors.Join(errs...)
}

func (f *fleet) makeRepo(token, org, name string) error {
	if err := f.g.Call(token, http.MethodPost, "orgs/"+org+"/repos", map[string]any{
		"name": name, "auto_init": true, "default_branch": "main", "readme": "Default",
	}, nil); err != nil {
		return err
	}
	file := func(path, content string) map[string]string {
		return map[string]string{"operation": "create", "path": path, "content": base64.StdEncoding.EncodeToString([]byte(content))}
	}
	return f.g.Call(token, http.MethodPost, "repos/"+org+"/"+name+"/contents", map[string]any{
		"branch":  "main",
		"message": "A small Go service",
		"files": []map[string]string{
			file("go.mod", "module example.com/"+org+"/"+name+"\n"+before),
			file("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+name+"\") }\n"),
		},
	}, nil)
}

// awaitPulls polls Gitea until org has n open pull requests.
func (f *fleet) awaitPulls(org string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var found []struct {
			Number int `json:"number"`
		}
		q := url.Values{"type": {"pulls"}, "state": {"open"}, "owner": {org}, "limit": {strconv.Itoa(n + 1)}}
		if err := f.g.Call(f.g.AdminToken(), http.MethodGet, "repos/issues/search?"+q.Encode(), nil, &found); err != nil {
			return err
		}
		if len(found) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pull requests after %s", len(found), n, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verify checks one pull request per repository, from branch into main,
// changing go.mod alone, as the change does.
func (f *fleet) verify(org, branch string, repos []string) error {
	token := f.g.AdminToken()
	for _, name := range repos {
		path := "repos/" + org + "/" + name
		var pulls []struct {
			Number int `json:"number"`
			Head   struct {
				Ref string `json:"ref"`
			} `json:"head"`
			Base struct {
				Ref string `json:"ref"`
			} `json:"base"`
		}
		if err := f.g.Call(token, http.MethodGet, path+"/pulls?state=all&limit=50", nil, &pulls); err != nil {
			return err
		}
		if len(pulls) != 1 {
			return fmt.Errorf("%s: %d pull requests, want 1", path, len(pulls))
		}
		p := pulls[0]
		if p.Head.Ref != branch || p.Base.Ref != "main" {
			return fmt.Errorf("%s: pull request %d from %s into %s, want %s into main", path, p.Number, p.Head.Ref, p.Base.Ref, branch)
		}
		var files []struct {
			Filename string `json:"filename"`
		}
		if err := f.g.Call(token, http.MethodGet, fmt.Sprintf("%s/pulls/%d/files", path, p.Number), nil, &files); err != nil {
			return err
		}
		if len(files) != 1 || files[0].Filename != "go.mod" {
			return fmt.Errorf("%s: pull request %d changes %+v, want go.mod alone", path, p.Number, files)
		}
		var content struct {
			Content string `json:"content"`
		}
		if err := f.g.Call(token, http.MethodGet, path+"/contents/go.mod?ref="+url.QueryEscape(branch), nil, &content); err != nil {
			return err
		}
		b, err := base64.StdEncoding.DecodeString(content.Content)
		if err != nil {
			return fmt.Errorf("%s: go.mod on %s: %w", path, branch, err)
		}
		if !bytes.HasSuffix(b, []byte(after)) {
			return fmt.Errorf("%s: go.mod on %s is %q, want the go directive raised", path, branch, b)
		}
	}
	return nil
}

// treeCPU is the user and system CPU time of a finished process and of
// every descendant it (or they) waited for.
func treeCPU(ps *os.ProcessState) time.Duration {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return ps.UserTime() + ps.SystemTime()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time of a running process and of its children
// that have ended (for Gitea, the git processes serving clones and
// pushes), from /proc.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command, which ends with the last ')': state is
	// field 3, utime 14, stime 15, cutime 16, cstime 17.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks int64
	for _, i := range []int{14, 15, 16, 17} {
		v, err := strconv.ParseInt(fields[i-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// leftovers lists processes, other than Gitea and its children, whose
// command line names a path under root: a tool's processes that outlived
// it.
func leftovers(root string, gitea int) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == gitea || pid == os.Getpid() || parentOf(pid) == gitea {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(root)) {
			continue
		}
		pids = append(pids, pid)
	}
	return describe(pids)
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// tail is the end of a log, for an error.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}
