package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// platformWB is write-behind with sync_file_range(2) and posix_fadvise(2).
type platformWB struct{}

func (platformWB) start(f *os.File, off, n int64) error {
	return ignoreUnsupported(unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE))
}

func (platformWB) settle(f *os.File, off, n int64) error {
	return ignoreUnsupported(unix.SyncFileRange(int(f.Fd()), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER))
}

func (platformWB) drop(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED) // advice: a refusal changes nothing
}

// ignoreUnsupported: a kernel or filesystem without sync_file_range leaves the whole write-back
// to the caller's fdatasync.
func ignoreUnsupported(err error) error {
	if err == unix.ENOSYS || err == unix.ESPIPE {
		return nil
	}
	return err
}
