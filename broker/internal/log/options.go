package log

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Codec selects how new frames are compressed. Reads always take the codec from each frame's
// flags, never from Options, so a log may be reopened with another codec (docs/internals/storage-format.md §5).
type Codec uint8

const (
	// CodecNone stores frame payloads as is (flag value 0).
	CodecNone Codec = 0
	// CodecZstd compresses each frame payload with zstd (flag value 1).
	CodecZstd Codec = 1
)

// String returns the configuration spelling of c.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec maps the configuration value (`none`, `zstd`; empty = none) to a Codec.
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "", "none":
		return CodecNone, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("log: unknown codec %q (want none or zstd)", s)
}

// Compression levels accepted by Options.CompressionLevel (docs/internals/storage-format.md §5).
const (
	LevelFastest = "fastest" // default
	LevelDefault = "default"
	LevelBetter  = "better"
	LevelBest    = "best"
)

// ParseCompressionLevel validates a compression level name (empty = fastest).
func ParseCompressionLevel(s string) (string, error) {
	if _, err := zstdLevel(s); err != nil {
		return "", err
	}
	if s == "" {
		return LevelFastest, nil
	}
	return s, nil
}

func zstdLevel(s string) (zstd.EncoderLevel, error) {
	switch s {
	case "", LevelFastest:
		return zstd.SpeedFastest, nil
	case LevelDefault:
		return zstd.SpeedDefault, nil
	case LevelBetter:
		return zstd.SpeedBetterCompression, nil
	case LevelBest:
		return zstd.SpeedBestCompression, nil
	}
	return 0, fmt.Errorf("log: unknown compression level %q (want fastest, default, better or best)", s)
}

// DefaultSegmentBytes is the roll threshold of the active segment (64 MiB, docs/internals/storage-format.md §11).
// A segment may exceed it by one commit's frames.
const DefaultSegmentBytes int64 = 64 << 20

// Options configures Open. The zero value is valid: no compression, 64 MiB segments, no
// observer, discarded logs, time.Now.
type Options struct {
	// Codec compresses newly written frames. Existing frames keep their own codec.
	Codec Codec
	// CompressionLevel is the zstd level: fastest (default) | default | better | best.
	// Ignored for CodecNone but still validated.
	CompressionLevel string
	// SegmentBytes is the roll threshold in bytes; 0 → DefaultSegmentBytes. An engine
	// internal (not user-configurable); tests use small values.
	SegmentBytes int64
	// Observer receives durations of the commit's disk steps; nil disables.
	Observer Observer
	// Logger receives recovery and failure reports; nil discards.
	Logger *slog.Logger
	// Now is the clock used to time disk steps for the Observer; nil → time.Now.
	Now func() time.Time
}

// Observer receives timings of the commit path. Methods are called synchronously by the
// committing goroutine while it holds the log's write lock: they must be fast and must not
// call back into the log.
type Observer interface {
	// ObserveFsync reports one segment fsync.
	ObserveFsync(d time.Duration)
	// ObserveFlush reports one write of a commit's frames (bytes = frame bytes written).
	ObserveFlush(d time.Duration, bytes int)
	// ObserveHWMPersist reports one HWM-file persist in the commit path (err nil on success).
	ObserveHWMPersist(d time.Duration, err error)
}

type nopObserver struct{}

func (nopObserver) ObserveFsync(time.Duration)             {}
func (nopObserver) ObserveFlush(time.Duration, int)        {}
func (nopObserver) ObserveHWMPersist(time.Duration, error) {}

// normalize fills defaults and validates o.
func (o Options) normalize() (Options, error) {
	if o.Codec != CodecNone && o.Codec != CodecZstd {
		return o, fmt.Errorf("log: unknown codec %d", o.Codec)
	}
	lvl, err := ParseCompressionLevel(o.CompressionLevel)
	if err != nil {
		return o, err
	}
	o.CompressionLevel = lvl
	if o.SegmentBytes < 0 {
		return o, fmt.Errorf("log: negative SegmentBytes %d", o.SegmentBytes)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
