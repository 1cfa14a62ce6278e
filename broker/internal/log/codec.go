package log

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd encoders and the decoder are expensive to create, so they are process-wide and
// shared by every log: EncodeAll and DecodeAll are safe for concurrent use.
var (
	encMu    sync.Mutex
	encoders = map[zstd.EncoderLevel]*zstd.Encoder{}

	decOnce sync.Once
	decoder *zstd.Decoder
	decErr  error
)

func codecConcurrency() int { return min(runtime.GOMAXPROCS(0), 4) }

// zstdEncoder returns the shared encoder of a level name (validated by Options.normalize).
func zstdEncoder(level string) (*zstd.Encoder, error) {
	lvl, err := zstdLevel(level)
	if err != nil {
		return nil, err
	}
	encMu.Lock()
	defer encMu.Unlock()
	if e := encoders[lvl]; e != nil {
		return e, nil
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(lvl),
		zstd.WithEncoderConcurrency(codecConcurrency()),
		zstd.WithEncoderCRC(false), // the frame CRC already covers the stored bytes
	)
	if err != nil {
		return nil, fmt.Errorf("log: zstd encoder: %w", err)
	}
	encoders[lvl] = e
	return e, nil
}

// zstdDecode decompresses src, which must expand to exactly ulen bytes.
func zstdDecode(src []byte, ulen int) ([]byte, error) {
	decOnce.Do(func() {
		decoder, decErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(codecConcurrency()),
			zstd.WithDecoderMaxMemory(maxFrameBytes),
		)
	})
	if decErr != nil {
		return nil, fmt.Errorf("zstd decoder: %w", decErr)
	}
	var zh zstd.Header
	if err := zh.Decode(src); err == nil && zh.HasFCS && zh.FrameContentSize != uint64(ulen) {
		return nil, fmt.Errorf("zstd: content size %d, header says %d", zh.FrameContentSize, ulen)
	}
	out, err := decoder.DecodeAll(src, make([]byte, 0, ulen))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return out, nil
}
