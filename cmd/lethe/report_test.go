package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/lethe-io/lethe"
)

// TestReportCodes checks the command line's side of every library code:
// "lethe: message", the hint, a "code:" line with the code, and exit
// status 1, as README.md says. The codes are read from the library's
// source, so a new one is covered without editing this test.
func TestReportCodes(t *testing.T) {
	src, err := os.ReadFile("../../internal/grains/errors.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\tCode[A-Za-z]+ +Code = "([a-z_]+)"`).FindAllSubmatch(src, -1)
	if len(codes) < 15 {
		t.Fatalf("found %d codes in internal/grains/errors.go; the pattern is wrong", len(codes))
	}
	for _, m := range codes {
		code := lethe.Code(m[1])
		var stderr bytes.Buffer
		status := report(&lethe.Error{Code: code, Message: "it failed", Hint: "do this"}, &stderr)
		want := "lethe: it failed\nhint: do this\ncode: " + string(code) + "\n"
		if status != 1 || stderr.String() != want {
			t.Errorf("%s: exit %d, stderr %q; want exit 1, %q", code, status, stderr.String(), want)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`otherwise the library's codes, ` + "`verify_failed`" + `,\s+` + "`decrypt_failed`" + `\s+or ` + "`io`" + `, exit status 1`).Match(readme) {
		t.Error("README.md no longer says the library's codes exit with status 1")
	}
}
