// Package forge defines where pull requests go: the Forge interface that
// opens them, the Hub interface for forges with reviews (approval pull
// requests, comments, commit statuses), and their neutral types. Adapters
// live in subpackages (local/, github/, gitea/) and import only their SDK
// and this package.
//
// forge imports only the standard library.
package forge
