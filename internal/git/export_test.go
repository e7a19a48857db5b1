package git

import "path/filepath"

// IndexTree is the root tree the index of the clone at dir amounts to
// when its tree cache gives it without git (see indexTree).
func IndexTree(dir string) (id string, ok bool, err error) {
	return indexTree(filepath.Join(dir, ".git"))
}
