package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the stdio transport (newline-delimited JSON-RPC 2.0
// messages on r, replies on w) that survives a bad line. The SDK's
// IOTransport ends the session at the first line that is not a JSON-RPC
// message, and its error quotes the line; this one answers such a line as
// JSON-RPC 2.0 says, with a parse error (-32700, when the line is not
// JSON) or an invalid request (-32600, when it is JSON but no message),
// with a null id and a message that does not quote the line, and reads on.
// A line longer than sdk.DefaultMaxLineLength is an invalid request too,
// and a message with a key repeated in one of its objects gets the error
// of repeatedInMessage, with its id; a notification with a key repeated in
// its params is dropped unanswered, as JSON-RPC 2.0 answers no
// notification.
func StdioTransport(r io.Reader, w io.Writer) sdk.Transport {
	sw := &syncWriter{w: w}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(filterLines(r, pw, sw, sdk.DefaultMaxLineLength)) }()
	return &sdk.IOTransport{Reader: pr, Writer: sw}
}

// syncWriter serialises the SDK's writes and the filter's replies; each
// is one Write of one line.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) Close() error { return nil }

// filterLines copies the lines of r that are JSON-RPC messages (or
// batches) to out, and answers the others on reply. It returns nil at the
// end of r, and the error of a read or of a write to out (the SDK closed
// the session).
func filterLines(r io.Reader, out io.Writer, reply io.Writer, max int) error {
	br := bufio.NewReader(r)
	for {
		line, tooLong, err := readLine(br, max)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			id, problem := lineProblem(line, tooLong)
			switch {
			case problem == nil:
				if _, werr := out.Write(append(line, '\n')); werr != nil {
					return werr
				}
			case problem.Code == jsonrpc.CodeInvalidParams && notification(line):
				// A notification is never answered (JSON-RPC 2.0,
				// section 4.1), its refusal included: it is dropped.
			default:
				if _, werr := reply.Write(append(errorReply(id, problem), '\n')); werr != nil {
					return werr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// notification reports whether line is one JSON-RPC notification (a
// request without an id).
func notification(line []byte) bool {
	msg, err := jsonrpc.DecodeMessage(line)
	req, ok := msg.(*jsonrpc.Request)
	return err == nil && ok && !req.ID.IsValid()
}

// readLine returns the next line without its end, or, past max bytes,
// discards the rest of the line and reports it too long.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// lineProblem is the JSON-RPC error a line gets instead of reaching the
// server, and the id to answer it with (nil for null), or a nil error for
// a message or a batch.
func lineProblem(line []byte, tooLong bool) (any, *jsonrpc.Error) {
	switch {
	case tooLong:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the line is too long"}
	case !json.Valid(line):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the line is not JSON"}
	case jsonrpcProblem(line) != "":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the line is not a JSON-RPC 2.0 message"}
	}
	return repeatedInMessage(line)
}
