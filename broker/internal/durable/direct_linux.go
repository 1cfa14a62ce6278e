package durable

import (
	"os"
	"syscall"
)

func openDirect(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}
