package local

import (
	"path/filepath"
	"strings"
)

// credentialPaths are where tools keep credentials in a user's home:
// hidden again inside a toolchain directory HomeView shows.
var credentialPaths = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gh", ".config/gcloud", ".config/hub",
	".git-credentials", ".netrc", ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml",
}

// HomeView is what the work in local sandboxes sees of this user's home:
// nothing (hidden, with the credential paths inside it, should a shown
// directory hold one), but the toolchains the sandboxes' PATH reaches
// into it (shown): for a PATH entry under home, the home's directory it
// is in (~/.pyenv for ~/.pyenv/shims, ~/go for ~/go/bin), or for an
// entry under ~/.local, ~/.config or ~/.cache the entry itself and its
// sibling lib. A list of what to hide always missed a store (git's
// ~/.config/git/credentials, ~/.vault-token, ~/.pgpass, ~/.claude, shell
// histories): the home is hidden whole instead.
//
// The caller hands hidden to fleetlift-agent serve as --hide and shown as
// --show (Options.ServeArgs). A home of / or a relative one gives
// nothing.
func HomeView(home, path string) (hidden, shown []string) {
	home = filepath.Clean(home)
	if home == "/" || !filepath.IsAbs(home) {
		return nil, nil
	}
	hidden = []string{home}
	for _, p := range credentialPaths {
		hidden = append(hidden, filepath.Join(home, p))
	}
	seen := map[string]bool{}
	show := func(p string) {
		if !seen[p] {
			seen[p] = true
			shown = append(shown, p)
		}
	}
	for _, entry := range filepath.SplitList(path) {
		if !filepath.IsAbs(entry) {
			continue
		}
		rel, err := filepath.Rel(home, filepath.Clean(entry))
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		top := strings.Split(rel, string(filepath.Separator))[0]
		switch top {
		case ".local", ".config", ".cache":
			show(filepath.Join(home, rel))
			show(filepath.Join(home, filepath.Dir(rel), "lib"))
		default:
			show(filepath.Join(home, top))
		}
	}
	return hidden, shown
}
