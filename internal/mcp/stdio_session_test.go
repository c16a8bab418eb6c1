package mcp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe/internal/mcp"
)

// stdioSession is a server running over StdioTransport on pipes, for the
// tests that write lines to it and read its replies.
type stdioSession struct {
	t       *testing.T
	in      *io.PipeWriter
	out     *io.PipeReader
	replies *bufio.Scanner
	done    chan error
}

// startStdio runs s over StdioTransport until end.
func startStdio(t *testing.T, ctx context.Context, s *sdk.Server) *stdioSession {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss := &stdioSession{t: t, in: inW, out: outR, replies: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() {
		err := s.Run(ctx, mcp.StdioTransport(inR, outW))
		outW.Close() // a session that ended has no more replies
		ss.done <- err
	}()
	return ss
}

// send writes line and its newline; an error means the session ended.
func (ss *stdioSession) send(line string) error {
	_, err := io.WriteString(ss.in, line+"\n")
	return err
}

// next returns the next reply line, failing the test if there is none.
func (ss *stdioSession) next(what string) []byte {
	ss.t.Helper()
	if !ss.replies.Scan() {
		ss.t.Fatalf("%s: no reply: %v", what, ss.replies.Err())
	}
	return ss.replies.Bytes()
}

// end closes the input and checks that the session ended cleanly.
func (ss *stdioSession) end() {
	ss.t.Helper()
	ss.in.Close()
	go io.Copy(io.Discard, ss.out)
	if err := <-ss.done; err != nil && !errors.Is(err, io.EOF) {
		ss.t.Errorf("Run: %v", err)
	}
}

// postRaw POSTs body, as it is, to the MCP endpoint at url with the headers
// a streamable-HTTP client sends (and any more, name then value), and
// returns the status and the answer.
func postRaw(t *testing.T, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
