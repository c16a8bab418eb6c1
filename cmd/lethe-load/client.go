package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// sender sends one request and returns the response's status and body.
type sender interface {
	send(req *http.Request) (status int, body []byte, err error)
}

// goClient sends through Go's http.Client (--go-client, and https://).
type goClient struct{ hc *http.Client }

func (g goClient) send(req *http.Request) (int, []byte, error) {
	resp, err := g.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// connClient writes each request and reads its response on the calling
// goroutine, over connections kept for the next request (one per
// concurrent caller at most). Go's http.Client hands every request from
// the caller to the connection's write loop and the response back from
// its read loop, two goroutines of its own: between two processes on this
// 2-core virtual machine that costs 100-140 µs a request
// (BenchmarkLoopbackFloor), which is the load generator's cost, not the
// server's. HTTP/1.1 only; the server must be http://.
type connClient struct {
	addr    string
	timeout time.Duration

	mu   sync.Mutex
	idle []*keptConn
}

type keptConn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	last time.Time // when its last response was read
}

// staleAfter is how long a connection may stay idle and still be used:
// the server closes idle connections (lethe serve after idle_timeout, two
// minutes by default), and a request written on a closed one fails.
const staleAfter = 30 * time.Second

func (k *connClient) get() (*keptConn, error) {
	k.mu.Lock()
	for len(k.idle) > 0 {
		kc := k.idle[len(k.idle)-1]
		k.idle = k.idle[:len(k.idle)-1]
		if time.Since(kc.last) < staleAfter {
			k.mu.Unlock()
			return kc, nil
		}
		kc.c.Close()
	}
	k.mu.Unlock()
	c, err := net.DialTimeout("tcp", k.addr, k.timeout)
	if err != nil {
		return nil, err
	}
	return &keptConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

func (k *connClient) put(kc *keptConn) {
	kc.last = time.Now()
	k.mu.Lock()
	k.idle = append(k.idle, kc)
	k.mu.Unlock()
}

func (k *connClient) send(req *http.Request) (int, []byte, error) {
	kc, err := k.get()
	if err != nil {
		return 0, nil, err
	}
	reused := !kc.last.IsZero()
	status, b, err := k.sendOn(kc, req)
	if err != nil && reused && req.Method == http.MethodGet {
		// The server may have closed the kept connection; a GET is
		// safe to send again, on a new one. Other methods are not.
		if kc, err = k.get(); err == nil {
			status, b, err = k.sendOn(kc, req)
		}
	}
	return status, b, err
}

// sendOn sends req on kc, keeping kc for the next request if the response
// allows it and closing it otherwise.
func (k *connClient) sendOn(kc *keptConn, req *http.Request) (int, []byte, error) {
	deadline := time.Now().Add(k.timeout)
	if d, ok := req.Context().Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	kc.c.SetDeadline(deadline)
	// A cancelled request (a signal) stops its reads and writes at once;
	// its connection is then not kept.
	stop := context.AfterFunc(req.Context(), func() { kc.c.SetDeadline(time.Unix(1, 0)) })
	status, b, keep, err := kc.exchange(req)
	if stop() && keep {
		k.put(kc)
	} else {
		kc.c.Close()
	}
	return status, b, err
}

// exchange writes req on kc and reads its response; keep reports whether
// kc may carry the next request.
func (kc *keptConn) exchange(req *http.Request) (status int, body []byte, keep bool, err error) {
	// One write for the request line, headers and body.
	if err := req.Write(kc.w); err != nil {
		return 0, nil, false, err
	}
	if err := kc.w.Flush(); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(kc.r, req)
	if err != nil {
		return 0, nil, false, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, err == nil && !resp.Close, err
}

// close closes the kept connections.
func (k *connClient) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kc := range k.idle {
		kc.c.Close()
	}
	k.idle = nil
}
