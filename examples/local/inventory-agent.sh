#!/bin/sh
# Plays an AI agent CLI for examples/local/go-inventory.yaml, so that report
# mode can be tried without one. Like a real agent CLI it gets the prompt on
# standard input and runs in the repository; unlike one, it does not read
# the prompt: it always takes the same inventory of the Go module it is in
# and writes it to REPORT.md, YAML frontmatter first.
set -eu
cat > /dev/null
module=$(sed -n 's/^module //p' go.mod)
go_version=$(sed -n 's/^go //p' go.mod)
go_files=$(find . -name '*.go' -not -path './.git/*' | wc -l | tr -d ' ')
has_tests=false
if find . -name '*_test.go' -not -path './.git/*' | grep -q .; then
	has_tests=true
fi
cat > REPORT.md <<REPORT
---
module: $module
go_version: "$go_version"
go_files: $go_files
has_tests: $has_tests
---

# Inventory of \`$module\`

The module asks for Go $go_version and has $go_files Go file(s); tests: $has_tests.

## Files

$(find . -name '*.go' -not -path './.git/*' | sort | sed 's/^\.\//- /')
REPORT
echo "wrote REPORT.md for $module"
