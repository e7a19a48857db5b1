//go:build !linux

package git

import "os"

// noFollow: elsewhere, the checkout relies on creating every path itself.
const noFollow = 0

func statData(b []byte, fi os.FileInfo) { statDataPortable(b, fi) }
