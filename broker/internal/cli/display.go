package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"narad.dev/broker/client"
)

// ANSI sequences for the dim message header.
const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// messageHeader renders `[p<partition> @<offset>] key=<k> <HH:MM:SS.mmm>` (docs/internals/http-api.md §3).
// The timestamp is Unix seconds (§5 open point 25) shown in loc; a keyless message has no
// key= part.
func messageHeader(m client.Message, loc *time.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[p%d @%d]", m.Partition, m.Offset)
	if m.Key != "" {
		b.WriteString(" key=")
		b.WriteString(m.Key)
	}
	b.WriteByte(' ')
	b.WriteString(time.Unix(m.Timestamp, 0).In(loc).Format("15:04:05.000"))
	return b.String()
}

// messageBody renders the payload for display: JSON verbatim, text unquoted, binary as hex
// with its byte count.
func messageBody(m client.Message) string {
	switch m.Kind() {
	case client.PayloadBinary:
		b, err := m.Bytes()
		if err != nil {
			return fmt.Sprintf("<undecodable payload: %v>", err)
		}
		return fmt.Sprintf("<binary %d bytes> %s", len(b), hex.EncodeToString(b))
	case client.PayloadText:
		b, err := m.Bytes()
		if err != nil {
			return fmt.Sprintf("<undecodable payload: %v>", err)
		}
		return string(b)
	default:
		return string(m.Payload)
	}
}

// writeMessage prints one message: the (optionally dim) header line, then the payload line.
// With raw only the payload bytes are written, followed by a newline.
func writeMessage(w io.Writer, m client.Message, raw, color bool, loc *time.Location) error {
	if raw {
		b, err := m.Bytes()
		if err != nil {
			return fmt.Errorf("partition %d offset %d: %w", m.Partition, m.Offset, err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	h := messageHeader(m, loc)
	if color {
		h = ansiDim + h + ansiReset
	}
	_, err := fmt.Fprintf(w, "%s\n%s\n", h, messageBody(m))
	return err
}

// messagePrinter binds the display options of one command run.
type messagePrinter struct {
	w     io.Writer
	raw   bool
	color bool
	loc   *time.Location
}

func (a *app) newPrinter(w io.Writer, raw bool) *messagePrinter {
	color := a.writerIsTerminal(w) && a.getenv("NO_COLOR") == ""
	return &messagePrinter{w: w, raw: raw, color: color, loc: a.loc}
}

func (p *messagePrinter) print(m client.Message) error {
	return writeMessage(p.w, m, p.raw, p.color, p.loc)
}
