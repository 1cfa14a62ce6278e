package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Scratch filesystems for the disk suites: a size-limited tmpfs (a disk that fills up and can
// be grown while a node runs) and a small ext4 image on a loop device (a disk the kernel can
// force read-only under a running node). Both need root on Linux.
//
// Why not `mount -o remount,ro` on a tmpfs under a running node: the kernel refuses to make a
// filesystem read-only while any file on it is open for writing (EBUSY), and a running node
// always holds its WAL, partition logs and metastore open. The only way a filesystem goes
// read-only under open files is the kernel's own error handling, which TriggerError uses.

// Tmpfs is a tmpfs mounted at a fresh directory. Its size can change while files are open:
// shrinking or filling it gives writers ENOSPC, growing it gives the space back.
type Tmpfs struct {
	Dir string // the mount point
}

// MountTmpfs mounts a tmpfs of sizeMiB at a fresh directory under os.TempDir.
func MountTmpfs(sizeMiB int) (*Tmpfs, error) {
	dir, err := os.MkdirTemp("", "narad-tmpfs-")
	if err != nil {
		return nil, err
	}
	if err := run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &Tmpfs{Dir: dir}, nil
}

// Resize changes the tmpfs size limit in place (open files stay open).
func (t *Tmpfs) Resize(sizeMiB int) error {
	return run("mount", "-o", fmt.Sprintf("remount,size=%dm", sizeMiB), t.Dir)
}

// SetReadOnly remounts the tmpfs read-only (true) or read-write (false). The kernel refuses
// (EBUSY) to make it read-only while any file on it is open for writing, so stop the node
// first.
func (t *Tmpfs) SetReadOnly(ro bool) error {
	mode := "rw"
	if ro {
		mode = "ro"
	}
	return run("mount", "-o", "remount,"+mode, t.Dir)
}

// Unmount unmounts the tmpfs and removes the mount point. Kill every process using it first.
func (t *Tmpfs) Unmount() error {
	if err := unmountDir(t.Dir); err != nil {
		return err
	}
	return os.Remove(t.Dir)
}

// Ext4Image is an ext4 filesystem (without a journal) in a sparse image file, loop-mounted at
// Dir with errors=remount-ro: after TriggerError every write on it, including writes to files
// that are already open, fails with EROFS, the way a disk with errors behaves in production.
type Ext4Image struct {
	Dir   string // the mount point
	Image string // the backing image file
	work  string // holds Image and Dir
}

// MountExt4Image creates a sizeMiB ext4 image and loop-mounts it read-write at a fresh
// directory.
func MountExt4Image(sizeMiB int) (*Ext4Image, error) {
	work, err := os.MkdirTemp("", "narad-ext4-")
	if err != nil {
		return nil, err
	}
	e := &Ext4Image{Dir: filepath.Join(work, "mnt"), Image: filepath.Join(work, "disk.img"), work: work}
	fail := func(err error) (*Ext4Image, error) {
		_ = os.RemoveAll(work)
		return nil, err
	}
	if err := os.Mkdir(e.Dir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.Create(e.Image)
	if err != nil {
		return fail(err)
	}
	err = f.Truncate(int64(sizeMiB) << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	// No journal: when the error hits a journalled ext4 in the middle of a commit, the kernel
	// can answer an fdatasync with success and still drop that write (seen on 6.18 in about
	// one trigger in ten, with a plain write+fdatasync loop and no broker involved). Without a
	// journal every fdatasync that succeeded survives the remount.
	if err := run("mkfs.ext4", "-q", "-F", "-O", "^has_journal", e.Image); err != nil {
		return fail(err)
	}
	if err := e.Mount(); err != nil {
		return fail(err)
	}
	return e, nil
}

// Mount loop-mounts the image read-write at Dir (after an Unmount).
func (e *Ext4Image) Mount() error {
	return run("mount", "-t", "ext4", "-o", "loop,errors=remount-ro", e.Image, e.Dir)
}

// TriggerError reports a filesystem error through ext4's sysfs trigger; with errors=remount-ro
// the kernel makes the mounted filesystem read-only at once, open files included. Recent
// kernels keep it read-only until it is unmounted.
func (e *Ext4Image) TriggerError() error {
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "--target", e.Dir).Output()
	if err != nil {
		return fmt.Errorf("findmnt %s: %w", e.Dir, err)
	}
	dev := filepath.Base(strings.TrimSpace(string(out)))
	if dev == "" || dev == "." {
		return fmt.Errorf("no device mounted at %s", e.Dir)
	}
	return os.WriteFile(filepath.Join("/sys/fs/ext4", dev, "trigger_fs_error"), []byte("narad disk test\n"), 0o200)
}

// ReadOnly reports whether a write on the filesystem fails because it is read-only.
func (e *Ext4Image) ReadOnly() bool {
	f, err := os.CreateTemp(e.Dir, ".probe-")
	if err != nil {
		return errors.Is(err, syscall.EROFS)
	}
	name := f.Name()
	f.Close()
	_ = os.Remove(name)
	return false
}

// Unmount unmounts the image (the loop device is released with it). Kill every process using
// it first.
func (e *Ext4Image) Unmount() error { return unmountDir(e.Dir) }

// Remove unmounts the image if it is still mounted and deletes it with its directory.
func (e *Ext4Image) Remove() error {
	var err error
	if mounted(e.Dir) {
		err = unmountDir(e.Dir)
	}
	if rerr := os.RemoveAll(e.work); err == nil {
		err = rerr
	}
	return err
}

// unmountDir unmounts dir; a directory that is not a mount point is left alone.
func unmountDir(dir string) error {
	if !mounted(dir) {
		return nil
	}
	return run("umount", dir)
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	return exec.Command("mountpoint", "-q", dir).Run() == nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
