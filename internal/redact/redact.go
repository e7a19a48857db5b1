// Package redact removes credentials from text that is about to be shown:
// in logs, errors, pull-request bodies, status and workflow history.
//
// redact imports only the standard library, so that any package may use
// it.
package redact

import "regexp"

// userinfo matches the user-info of URLs in free text.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@`)

// queryCredential matches the value of a query parameter whose name says
// it is a credential (?access_token=, &private_token=, ?sig=).
var queryCredential = regexp.MustCompile(`(?i)([?&][a-z0-9_.-]*(?:token|secret|password|passwd|key|sig|signature|credential|auth)[a-z0-9_.-]*=)[^&#\s'"]+`)

// URLs replaces the credentials of every URL in s with REDACTED, and
// only them: the scheme, host and path stay, so that a message still
// says which repository it is about. https://user:token@host/x becomes
// https://REDACTED@host/x, https://host/x?access_token=t
// https://host/x?access_token=REDACTED.
func URLs(s string) string {
	s = userinfo.ReplaceAllString(s, "${1}REDACTED@")
	return queryCredential.ReplaceAllString(s, "${1}REDACTED")
}
