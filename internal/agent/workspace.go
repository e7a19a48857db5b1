package agent

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// outputTail is how much command output is kept for results.
const outputTail = 4096

// checkout clones every repository and runs its setup commands. A
// repository that fails is marked broken; a transformation repository
// that fails fails the run.
func (r *runner) checkout(ctx context.Context) error {
	r.setPhase(protocol.PhaseInitializing, "cloning", "cloning repositories")
	if r.recipe != nil {
		if err := r.checkoutRecipe(ctx, r.recipe); err != nil {
			return fmt.Errorf("transformation repository %s: %w", r.recipe.repo.Name, err)
		}
	}
	// A group's repositories are cloned and set up Manifest.Parallel at
	// once; a killed jail stops the others.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	ok := 0
	var fatal error
	r.each(cctx, r.units, func(u *unit) {
		err := r.checkoutUnit(cctx, u)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fatal != nil:
			return
		case err == nil:
			ok++
		case stopsRun(err):
			fatal = err
			cancel()
			return
		default:
			r.resultMu.Lock()
			u.broken = true
			u.res.Status = "failed"
			u.res.Error = err.Error()
			r.resultMu.Unlock()
		}
		r.progressed(1)
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if fatal != nil {
		return fatal
	}
	if ok == 0 {
		return fmt.Errorf("no repository could be cloned and set up: %s", r.units[0].res.Error)
	}
	return nil
}

func (r *runner) checkoutUnit(ctx context.Context, u *unit) error {
	r.setStep("cloning", "cloning "+u.repo.Name)
	// Check again right before cloning, after creating the parent: no
	// path component may be a symbolic link.
	if _, err := git.SafeJoin(r.ws, u.elems...); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(u.dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(u.dir), err)
	}
	if _, err := git.SafeJoin(r.ws, u.elems...); err != nil {
		return err
	}
	if err := r.clone(ctx, u, u.dir); err != nil {
		return err
	}
	var current string
	var err error
	if u.base, current, err = r.g.Head(ctx, u.dir); err != nil {
		return err
	}
	u.baseBranch = cmp.Or(u.repo.Branch, current)
	if err := r.remember(u); err != nil {
		return fmt.Errorf("read the clone: %w", err)
	}
	return r.setup(ctx, u)
}

// recipeClone is where the transformation repository is cloned, inside
// the protocol directory that no command sees, before its files move to
// the workspace root.
const recipeClone = "recipe-clone"

// recipeExclude is what the transformation repository's git ignores at the
// workspace root: the protocol directory and the targets.
const recipeExclude = "/" + protocol.Dir + "/\n/" + targetsDir + "/\n"

// checkoutRecipe clones the transformation repository into the workspace
// root, which already holds the protocol directory: it is cloned aside,
// then each of its top-level entries (its .git among them) is renamed
// into the root. A recipe with a top-level .fleetlift or targets, which
// the workspace keeps for itself, is refused.
func (r *runner) checkoutRecipe(ctx context.Context, u *unit) error {
	r.setStep("cloning", "cloning "+u.repo.Name)
	tmp := filepath.Join(r.pdir, recipeClone)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	defer os.RemoveAll(tmp)
	if err := r.clone(ctx, u, tmp); err != nil {
		return err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("read the clone: %w", err)
	}
	for _, e := range entries {
		switch e.Name() {
		case protocol.Dir:
			return fmt.Errorf("it has a top-level %s, where the workspace keeps fleetlift's protocol files", protocol.Dir)
		case targetsDir:
			return fmt.Errorf("it has a top-level %s, where the workspace keeps the target repositories", targetsDir)
		}
		dst := filepath.Join(r.ws, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("the workspace already holds %s", e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(r.ws, e.Name())); err != nil {
			return fmt.Errorf("move %s to the workspace: %w", e.Name(), err)
		}
	}
	// git status in the workspace shows the recipe's changes, not the
	// protocol directory or the targets, which are repositories of their
	// own.
	info := filepath.Join(r.ws, ".git", "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", info, err)
	}
	f, err := os.OpenFile(filepath.Join(info, "exclude"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("write .git/info/exclude: %w", err)
	}
	_, err = f.WriteString(recipeExclude)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write .git/info/exclude: %w", err)
	}
	if u.base, u.baseBranch, err = r.g.Head(ctx, u.dir); err != nil {
		return err
	}
	if err := r.remember(u); err != nil {
		return fmt.Errorf("read the clone: %w", err)
	}
	return r.setup(ctx, u)
}

// clone clones u's repository into dir, from a place the operator allows
// (a local repository the gateway serves, the gateway checks).
func (r *runner) clone(ctx context.Context, u *unit, dir string) error {
	from, g := r.gitGW.route(r, u.repo.Name, u.repo.URL)
	depth := r.m.GitConfig.CloneDepth
	if from == u.repo.URL {
		if err := r.checkLocal(u.repo.URL); err != nil {
			return err
		}
	} else {
		// The gateway's copy is already the manifest's depth, its
		// shallow commits sent with its references: the clone takes all
		// of it, in one request for the pack where asking for a depth
		// takes two.
		depth = 0
	}
	err := g.Clone(ctx, from, dir, git.CloneOptions{
		Branch:     u.repo.Branch,
		Depth:      depth,
		Submodules: u.repo.Submodules,
	})
	if err != nil {
		return fmt.Errorf("%s", r.redact(err.Error()))
	}
	return nil
}

// setup runs u's setup commands in its directory.
func (r *runner) setup(ctx context.Context, u *unit) error {
	for _, line := range u.repo.Setup {
		r.setStep("setup", fmt.Sprintf("%s: %s", u.repo.Name, line))
		out := newTail(outputTail)
		code, err := command{
			argv:   []string{"sh", "-c", line},
			dir:    u.dir,
			env:    withEnv(r.env, protocol.EnvWorkspace+"="+r.ws, protocol.EnvRepository+"="+u.repo.Name),
			stdout: out, stderr: out,
			jail: r.jail(),
			disk: r.disk(),
		}.run(ctx)
		if err != nil {
			return fmt.Errorf("setup %q: %w", line, err)
		}
		if code != 0 {
			return fmt.Errorf("setup %q: exit status %d: %s", line, code, r.redact(out.String()))
		}
	}
	return nil
}

// checkLocal refuses a local repository outside Options.FileRoots
// (git.CheckLocal).
func (r *runner) checkLocal(raw string) error {
	return git.CheckLocal(raw, r.o.FileRoots)
}
