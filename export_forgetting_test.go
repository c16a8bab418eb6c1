package lethe

import (
	"context"
	"fmt"
	"strings"
)

// StoreSnapshot dumps every grain row (operational columns and blob),
// every tag token, hold and audit event of the store as text, so that
// tests can assert that a dry run changed nothing.
func (db *DB) StoreSnapshot(ctx context.Context) (string, error) {
	var b strings.Builder
	g := db.store.Gorm().WithContext(ctx)
	for _, q := range []string{
		"SELECT id, hash, memory, type, namespace, scope, importance, confidence, salience, pinned, archived, created_us, " +
			"last_retrieved_us, retrieval_count, supersedes, superseded_by, key_chain, blob FROM grains ORDER BY id",
		"SELECT grain_id, token FROM grain_tags ORDER BY grain_id, token",
		"SELECT id, released_us FROM holds ORDER BY id",
		"SELECT event_id, leaf FROM audit_events ORDER BY id",
	} {
		rows, err := g.Raw(q).Rows()
		if err != nil {
			return "", err
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return "", err
			}
			fmt.Fprintf(&b, "%v\n", vals)
		}
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String(), nil
}
