package durable

import (
	"os"
	"unsafe"
)

// DirectAlign is the alignment of a direct (O_DIRECT) write's or read's memory, file position
// and length: the largest logical block size of the disks Narad runs on (512 B or 4 KiB).
const DirectAlign = 4096

// OpenDirect opens the existing file at path for direct reads and writes (O_RDWR|O_DIRECT),
// which bypass the page cache; nil when the platform or the filesystem refuses it (tmpfs, some
// overlays), and the caller reads and writes through the page cache. A direct write is not
// durable before an fdatasync either: it may sit in the disk's volatile cache, its extent in
// the journal.
func OpenDirect(path string) *os.File { return openDirect(path) }

// AlignedBuffer returns n bytes starting at a DirectAlign boundary.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := (DirectAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign)) % DirectAlign
	return b[skip : skip+n : skip+n]
}

// Aligned reports whether b starts at a DirectAlign boundary.
func Aligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign == 0
}
