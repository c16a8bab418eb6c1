package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
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
		heard := code
		if code == lethe.CodeErased {
			heard = lethe.CodeNotFound // an erased grain is no grain: TestReportErased
		}
		want := "lethe: it failed\nhint: do this\ncode: " + string(heard) + "\n"
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

// TestReportErased: the command line reports a grain the library says was
// erased exactly as one that names nothing, on the embedded store as over
// --server (where the API already answers it so): the erasure's cause
// is not printed, and the code is not_found.
func TestReportErased(t *testing.T) {
	h := strings.Repeat("ab", 32)
	msg := "no grain " + h + " in memory default"
	var erased, none bytes.Buffer
	es := report(&lethe.Error{Code: lethe.CodeErased, Message: msg, Err: errors.New("a key of this grain's chain was erased")}, &erased)
	ns := report(&lethe.Error{Code: lethe.CodeNotFound, Message: msg}, &none)
	if es != ns || erased.String() != none.String() {
		t.Errorf("erased grain: exit %d, %q; a hash that names nothing: exit %d, %q", es, erased.String(), ns, none.String())
	}
}
