package lethe

import "github.com/lethe-io/lethe/internal/recall"

// Page is one page of recall results: Grains, newest first for a listing
// (no filter), else ranked (see Recall), and Next, when not empty, the
// Cursor of the following page.
type Page = recall.Page
