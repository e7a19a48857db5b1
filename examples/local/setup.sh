#!/usr/bin/env bash
# Makes the three local repositories the examples in this directory change
# or report on: bare repositories under /tmp/fleetlift-demo (or
# $FLEETLIFT_DEMO_DIR), each a tiny Go module that says `go 1.21`. Run again
# to start over.
set -euo pipefail
demo=${FLEETLIFT_DEMO_DIR:-/tmp/fleetlift-demo}
rm -rf "$demo"
mkdir -p "$demo/src"
for name in payments ledger search; do
  src="$demo/src/$name"
  git init -q -b main "$src"
  printf 'module example.com/acme/%s\n\ngo 1.21\n' "$name" > "$src/go.mod"
  printf 'package %s\n\n// Version is the service version.\nconst Version = "1.0.0"\n' "$name" > "$src/version.go"
  git -C "$src" add .
  git -C "$src" -c user.email=demo@example.com -c user.name=demo commit -qm "Initial commit"
  git clone -q --bare "$src" "$demo/$name.git"
done
echo "made $demo/{payments,ledger,search}.git"
