//go:build !linux

package git

import "os"

// stageSupported: elsewhere git add stages, comparing what it records.
const stageSupported = false

// noFollow: elsewhere, the checkout relies on creating every path itself.
const noFollow = 0

func statData(b []byte, fi os.FileInfo) { statDataPortable(b, fi) }
