package webhook

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/redact"
)

// repoKey reduces a repository URL to host/path, lower-cased, without
// scheme, user, port or .git suffix, so every way of naming one repository
// on one forge gives the same key: https://GitHub.com/Acme/Camp.git,
// ssh://git@github.com:22/acme/camp and git@github.com:acme/camp all give
// github.com/acme/camp.
func repoKey(raw string) (string, error) {
	host, path, err := split(raw)
	if err != nil {
		return "", err
	}
	path = strings.ToLower(strings.Trim(path, "/"))
	path = strings.Trim(strings.TrimSuffix(path, ".git"), "/")
	if host == "" || !strings.Contains(path, "/") {
		return "", fmt.Errorf("repository %q: want https://host/owner/name or git@host:owner/name", redact.URLs(raw))
	}
	return host + "/" + path, nil
}

// split returns the lower-cased host (without port) and the path of an
// https, ssh or scp-like URL.
func split(raw string) (host, path string, err error) {
	s := strings.TrimSpace(raw)
	if scheme, _, ok := strings.Cut(s, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, "/:@") {
		u, err := url.Parse(s)
		if err != nil {
			return "", "", fmt.Errorf("repository %q is not a valid URL", redact.URLs(raw))
		}
		switch strings.ToLower(u.Scheme) {
		case "https", "http", "ssh", "git+ssh", "ssh+git", "git":
		default:
			return "", "", fmt.Errorf("repository %q: scheme %q is not a forge's (https, ssh)", redact.URLs(raw), u.Scheme)
		}
		return strings.ToLower(u.Hostname()), u.Path, nil
	}
	// scp-like: [user@]host:owner/name, the colon before any slash.
	host, path, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(host, "/") {
		return "", "", fmt.Errorf("repository %q is not a URL: want https://host/owner/name or git@host:owner/name", raw)
	}
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	return strings.ToLower(host), path, nil
}

// PullRequestKey is the repository of a pull request's web page
// (https://github.com/acme/api/pull/7, https://gitea.example/acme/api/pulls/7)
// as Options.Followed is asked about it: host/owner/name in lower case.
// It is empty for a URL that is not a pull request's page.
func PullRequestKey(page string) string {
	host, p, err := split(page)
	if err != nil || host == "" {
		return ""
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	n := len(parts)
	if n < 4 || parts[n-2] != "pull" && parts[n-2] != "pulls" {
		return ""
	}
	if _, err := strconv.Atoi(parts[n-1]); err != nil {
		return ""
	}
	// The owner and name only: a forge served under a path prefix
	// (https://host/gitea/acme/api) names the repository acme/api.
	return strings.ToLower(host + "/" + parts[n-4] + "/" + parts[n-3])
}
