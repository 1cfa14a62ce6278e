package move

import (
	"os"
	"syscall"
)

// openDirect opens path for direct writes; nil when the filesystem refuses O_DIRECT (tmpfs,
// some overlays), and the copy writes through the page cache.
func openDirect(path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}
