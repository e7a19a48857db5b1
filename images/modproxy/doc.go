// Command modproxy serves a Go module cache to the image builds of this
// machine, without a network: images/build.sh starts it on loopback over
// $GOMODCACHE/cache/download (the GOPROXY protocol's own layout: .info,
// .mod and .zip files under each escaped module path), and the builds,
// on the host's network, use it as their GOPROXY. It serves only files
// that exist under that directory, read-only, and exits when its
// standard input closes, so it never outlives the script that started
// it.
//
// modproxy imports only the standard library.
package main
