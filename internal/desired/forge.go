package desired

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// Forge is a forge the operator allows fleetlift to talk to, as far as a
// repository config's forge section can select it. Its token is not
// here: it stays with the operator's configuration, which names the
// variable that holds it.
type Forge struct {
	// Name is what forge.name selects it by.
	Name string
	// Type is github or gitea.
	Type spec.ForgeType
	// URL is the forge's root (Gitea) or API root (GitHub).
	URL string
}

// LocalForge is the forge a repository without a forge section selects:
// branches pushed to the repositories themselves, approvals as commits,
// and no token. Every operator allows it.
var LocalForge = Forge{Name: string(spec.ForgeLocal), Type: spec.ForgeLocal}

func (f Forge) String() string {
	s := string(f.Type)
	if f.URL != "" {
		s += " at " + f.URL
	}
	if f.Name != string(f.Type) {
		s = f.Name + " (" + s + ")"
	}
	return s
}

// SelectForge returns the forge cfg's forge section selects among the
// forges the operator allows: the local forge when cfg is nil or selects
// it; else the allowed forge forge.name names, or the one of forge.type
// at forge.url, or the only one of forge.type. Whatever forge.name and
// forge.url say must match the forge selected. A selection that matches
// no allowed forge, or several, is a *spec.Error naming the config's
// file, the line and the field: fleetlift never talks to a forge the
// operator did not allow, whatever the repository says.
func SelectForge(cfg *spec.Config, allowed []Forge) (Forge, error) {
	if cfg == nil || cfg.Forge.Type == "" || cfg.Forge.Type == spec.ForgeLocal {
		return LocalForge, nil
	}
	want := cfg.Forge
	fail := func(field, format string, args ...any) (Forge, error) {
		return Forge{}, cfg.FieldError(field, fmt.Sprintf(format, args...)+" ("+describeAllowed(allowed)+")")
	}
	if want.Name != "" {
		for _, f := range allowed {
			if f.Name != want.Name {
				continue
			}
			if f.Type != want.Type {
				return fail("forge.type", "the operator's forge %s is a %s forge, not %s", f.Name, f.Type, want.Type)
			}
			if want.URL != "" && !SameURL(want.URL, f.URL) {
				return fail("forge.url", "%q is not where the operator's forge %s is", want.URL, f.Name)
			}
			return f, nil
		}
		return fail("forge.name", "the operator allows no forge named %q", want.Name)
	}
	var found []Forge
	for _, f := range allowed {
		if f.Type == want.Type && (want.URL == "" || SameURL(want.URL, f.URL)) {
			found = append(found, f)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return fail("forge", "several of the operator's forges match: select one with forge.name")
	case want.URL != "":
		return fail("forge.url", "%q is not a forge the operator allows: fleetlift talks only to the forges its operator configured", want.URL)
	}
	return fail("forge.type", "the operator allows no %s forge", want.Type)
}

// describeAllowed lists the allowed forges for an error message.
func describeAllowed(allowed []Forge) string {
	if len(allowed) == 0 {
		return "the operator allows none: fleetlift --forge-type and --forge-url, or --forge, allow one"
	}
	s := make([]string, len(allowed))
	for i, f := range allowed {
		s[i] = f.String()
	}
	return "allowed: " + strings.Join(s, ", ")
}

// SameURL reports whether a and b name the same forge root: the same
// scheme, host and port (the scheme's default port or none), and path
// but for trailing slashes.
func SameURL(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil {
		return false
	}
	return ua.User == nil && ub.User == nil && ua.RawQuery == "" && ub.RawQuery == "" &&
		strings.EqualFold(ua.Scheme, ub.Scheme) && hostPort(ua) == hostPort(ub) &&
		strings.TrimRight(ua.EscapedPath(), "/") == strings.TrimRight(ub.EscapedPath(), "/")
}

// hostPort is u's host in lower case with its port, the scheme's default
// port spelled out.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
