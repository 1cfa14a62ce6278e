package httpload

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("httpload: bad configuration")

// MinSize is the smallest payload: the tag, the sequence and the JSON around them fit in it.
const MinSize = 64

// Config is the shape of one run. Count messages of Size bytes are produced by Workers
// producers; with Consumers > 0 the run is a full flow and ends once every accepted message
// was acked (or Timeout passes).
type Config struct {
	Server     string        // base URL, e.g. http://127.0.0.50:7942
	Topic      string        // topic name; must exist unless Create
	Create     bool          // create the topic first (an existing one is fine)
	Partitions int           // partitions for Create; 0: the server's default
	Count      int           // messages to produce
	Size       int           // payload bytes, at least MinSize
	Workers    int           // producers
	Consumers  int           // consumers; 0: produce only
	Wait       time.Duration // consume long-poll budget
	Timeout    time.Duration // whole run
}

// Check returns an error wrapping ErrConfig when a field is out of range.
func (c Config) Check() error {
	u, err := url.Parse(c.Server)
	switch {
	case err != nil || u.Scheme != "http" || u.Host == "":
		return fmt.Errorf("%w: server %q is not an http:// URL", ErrConfig, c.Server)
	case c.Topic == "":
		return fmt.Errorf("%w: topic is empty", ErrConfig)
	case c.Count < 1:
		return fmt.Errorf("%w: count %d < 1", ErrConfig, c.Count)
	case c.Size < MinSize:
		return fmt.Errorf("%w: size %d < %d", ErrConfig, c.Size, MinSize)
	case c.Workers < 1:
		return fmt.Errorf("%w: workers %d < 1", ErrConfig, c.Workers)
	case c.Consumers < 0:
		return fmt.Errorf("%w: consumers %d < 0", ErrConfig, c.Consumers)
	case c.Wait <= 0 || c.Timeout <= 0:
		return fmt.Errorf("%w: wait and timeout must be positive", ErrConfig)
	}
	return nil
}
