// Package forge defines where pull requests go: the Forge interface and its
// neutral types. Adapters live in subpackages (local/ now; github/ and
// gitea/ with the reconciler) and import only their SDK and this package.
//
// forge imports only the standard library.
package forge
