package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// logWriter hands each access log line to write.
type logWriter func(p []byte) (int, error)

func (w logWriter) Write(p []byte) (int, error) { return w(p) }

// TestAnswerSentBeforeTheLogLine holds the access log line of a recall
// until its client has read the whole answer: an answer a little larger
// than net/http's 4 KiB connection buffer (a recall page of 12 grains) must
// be sent in full before the line is written, not its first 4 KiB before
// and the rest after.
func TestAnswerSentBeforeTheLogLine(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	secret := f.token("reader", []string{"sent"})
	gs := make([]lethe.Grain, 12)
	for i := range gs {
		gs[i] = lethe.Grain{Memory: "sent", Type: "fact", Subject: "s", Relation: "r", Object: fmt.Sprintf("o-%d", i),
			Content: "c"}
	}
	if _, err := f.db.AddBatch(context.Background(), gs); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	logged := make(chan bool, 1)
	w := logWriter(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte(`"msg":"request"`)) {
			select {
			case <-read:
				logged <- true
			case <-time.After(5 * time.Second):
				logged <- false
			}
		}
		return len(p), nil
	})
	srv := httptest.NewServer(api.New(api.Config{Library: f.db, Tokens: f.tokens, Logger: slog.New(slog.NewJSONHandler(w, nil))}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/memories/sent/recall", strings.NewReader(`{"subject":"s","limit":12}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(body) <= 4<<10 || len(body) >= 7<<10 {
		t.Fatalf("recall: %d, %d bytes, %v; want 200 and between 4 and 7 KiB", resp.StatusCode, len(body), err)
	}
	close(read)
	if !<-logged {
		t.Error("the access log line was written before the whole answer was sent")
	}
}
