package github

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/fleetlift/fleetlift/internal/git"
)

// ownerRepo is a repository on the forge.
type ownerRepo struct {
	owner, name string
}

func (r ownerRepo) String() string { return r.owner + "/" + r.name }

// path is the API path of the repository, repos/owner/name, followed by
// rest (escaped segment by segment).
func (r ownerRepo) path(rest ...string) string {
	return PathEscape(append([]string{"repos", r.owner, r.name}, rest...)...)
}

// name is what owners, repositories, teams and users may be called on
// GitHub and Gitea; anything else never reaches an API path.
var name = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// checkName refuses an owner, repository, team or user name that neither
// GitHub nor Gitea allows.
func checkName(kind, s string) error {
	if !name.MatchString(s) || strings.Contains(s, "..") || len(s) > 100 {
		return fmt.Errorf("invalid %s name %q", kind, s)
	}
	return nil
}

// webRoot is where a forge's clone URLs point, derived from its API
// root: https://api.github.com/ serves github.com; GitHub Enterprise
// (…/api/v3/) and Gitea (…/api/v1/) serve their repositories from the
// root above.
// WebOrigin is the origin of the web (and git) host of the GitHub whose
// API root is apiRoot (empty: GitHub's), the one origin its token goes to
// from git: https://github.com for https://api.github.com/.
func WebOrigin(apiRoot string) (string, error) {
	if apiRoot == "" {
		apiRoot = DefaultBaseURL
	}
	u, err := url.Parse(apiRoot)
	if err != nil {
		return "", fmt.Errorf("forge API URL: %w", err)
	}
	return git.Origin(webRoot(u).String())
}

func webRoot(api *url.URL) *url.URL {
	w := *api
	w.RawQuery, w.Fragment = "", ""
	if strings.EqualFold(w.Host, "api.github.com") {
		w.Host, w.Path = "github.com", "/"
		return &w
	}
	for _, suffix := range []string{"api/v3/", "api/v1/"} {
		if strings.HasSuffix(w.Path, suffix) {
			w.Path = strings.TrimSuffix(w.Path, suffix)
			break
		}
	}
	if !strings.HasSuffix(w.Path, "/") {
		w.Path += "/"
	}
	return &w
}

// canonicalHost is host[:port] in lower case, without the scheme's
// default port.
func canonicalHost(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (port == "443" && strings.EqualFold(u.Scheme, "https")) || (port == "80" && strings.EqualFold(u.Scheme, "http")) {
		return host
	}
	return net.JoinHostPort(host, port)
}

// parseRepository derives owner and name from a clone URL of a
// repository served from web (the forge's web root): https://host/owner/name(.git),
// ssh://[user@]host[:port]/owner/name(.git) or user@host:owner/name(.git).
// A URL on any other host, or one that names anything but a repository,
// is refused.
func parseRepository(web *url.URL, raw string) (ownerRepo, error) {
	if err := git.CheckURL(raw); err != nil {
		return ownerRepo{}, err
	}
	notHere := func() error {
		return fmt.Errorf("repository %s is not on %s", git.Redact(raw), web.Host)
	}
	var rest string
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		u, err := url.Parse(raw)
		if err != nil {
			return ownerRepo{}, fmt.Errorf("repository URL %s: %w", git.Redact(raw), err)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return ownerRepo{}, fmt.Errorf("repository URL %s has a query or fragment", git.Redact(raw))
		}
		switch strings.ToLower(scheme) {
		case "https", "http":
			if !strings.EqualFold(u.Scheme, web.Scheme) || canonicalHost(u) != canonicalHost(web) {
				return ownerRepo{}, notHere()
			}
			var found bool
			if rest, found = strings.CutPrefix(u.Path, web.Path); !found {
				return ownerRepo{}, notHere()
			}
		case "ssh", "git+ssh", "ssh+git":
			if !strings.EqualFold(u.Hostname(), web.Hostname()) {
				return ownerRepo{}, notHere()
			}
			rest = strings.TrimPrefix(u.Path, "/")
		default:
			return ownerRepo{}, notHere()
		}
	} else {
		// scp-like user@host:owner/name; CheckURL accepted it only if a
		// colon comes before the first slash, and local paths start with
		// a slash.
		hostPart, path, ok := strings.Cut(raw, ":")
		if !ok || strings.HasPrefix(raw, "/") {
			return ownerRepo{}, notHere()
		}
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		if !strings.EqualFold(hostPart, web.Hostname()) {
			return ownerRepo{}, notHere()
		}
		rest = strings.TrimPrefix(path, "/")
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/"), ".git")
	owner, repo, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(repo, "/") {
		return ownerRepo{}, fmt.Errorf("repository URL %s does not name owner/repository", git.Redact(raw))
	}
	if err := checkName("owner", owner); err != nil {
		return ownerRepo{}, fmt.Errorf("repository URL %s: %w", git.Redact(raw), err)
	}
	if err := checkName("repository", repo); err != nil {
		return ownerRepo{}, fmt.Errorf("repository URL %s: %w", git.Redact(raw), err)
	}
	return ownerRepo{owner: owner, name: repo}, nil
}

// splitTeam splits "org/team".
func splitTeam(team string) (org, slug string, err error) {
	org, slug, ok := strings.Cut(team, "/")
	if !ok {
		return "", "", fmt.Errorf("team %q is not org/team", team)
	}
	if err := checkName("organization", org); err != nil {
		return "", "", err
	}
	if err := checkName("team", slug); err != nil {
		return "", "", err
	}
	return org, slug, nil
}
