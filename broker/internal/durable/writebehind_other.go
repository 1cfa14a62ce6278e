//go:build !linux

package durable

import "os"

// platformWB: write-behind is used on Linux only; elsewhere the fdatasync does all of it.
type platformWB struct{}

func (platformWB) start(*os.File, int64, int64) error  { return nil }
func (platformWB) settle(*os.File, int64, int64) error { return nil }
func (platformWB) drop(*os.File, int64, int64)         {}
