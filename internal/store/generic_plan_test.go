package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestForgetStatementsKeepTheirPlan checks that the statements a forget of
// one hash sends with a per-grain or per-event parameter keep the generic
// plan PostgreSQL makes for a prepared statement, rather than being
// planned again at every call: each is run ten times on one connection
// (as pgx prepares and caches it), then pg_prepared_statements says how
// often it was planned for its values. Their array forms (the batch
// paths') are the control: planned at every call, which under lethe-load
// took twice their execution time.
func TestForgetStatementsKeepTheirPlan(t *testing.T) {
	db := openPostgres(t)
	ctx := context.Background()
	// Tables of a store in use: PostgreSQL plans the array forms once
	// when their tables are empty.
	fillEvents(t, db, "default", "old", 0, 30000, true)
	if err := db.gorm.Exec(`INSERT INTO grains (id, hash, memory, type, namespace, scope, importance, confidence, salience, pinned, archived,
		created_us, last_retrieved_us, retrieval_count, supersedes, superseded_by, key_chain, user_key_id, user_ref, s_tok, r_tok, o_tok, dedup_tok, blob)
		SELECT g, 'h' || g, 'default', 'fact', '', 'acme', 0.5, 1, 1, false, false, 0, 0, 0, '', '', '', 0, ''::bytea, NULL, NULL, NULL, ('\x' || lpad(to_hex(g), 32, '0'))::bytea, '\x00'::bytea
		FROM generate_series(1, 30000) AS g`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.gorm.Exec(`INSERT INTO grain_docs (grain_id, memory, len, dim, block, toks) SELECT g, 'default', 1, 0, g / 100, '\x00'::bytea FROM generate_series(1, 30000) AS g`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.gorm.Exec("ANALYZE grains, grain_docs, audit_events").Error; err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, q string
		arg     any
		generic bool
	}{
		{"queueGarbageOne", queueGarbageOne, int64(1 << 40), true},
		{"queueDeliveryOne", queueDeliveryOne, "00000000000000000000000000000000", true},
		{"queueGarbage (control)", queueGarbage, []int64{1 << 40}, false},
		{"queueDeliveriesAny (control)", queueDeliveriesAny, []string{"00000000000000000000000000000000"}, false},
	}
	err := db.pgConn(ctx, func(pc *pgx.Conn) error {
		for _, c := range cases {
			for range 10 {
				if _, err := pc.Exec(ctx, c.q, c.arg); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
			}
			var generic, custom int64
			if err := pc.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, c.q).Scan(&generic, &custom); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if keeps := generic > 0 && custom <= 5; keeps != c.generic {
				t.Errorf("%s: %d generic and %d custom plans in 10 runs; want it planned once: %v", c.name, generic, custom, c.generic)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
