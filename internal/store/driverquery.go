package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// queryDriver runs q with args on one connection of the SQLite pool,
// through go-sqlite3's own QueryContext rather than database/sql's, and
// hands each row's values to row (valid until row returns, but for the
// []byte and string values, which the driver copies).
//
// For a context that can be cancelled, database/sql starts a goroutine
// per result set to watch it (Rows.awaitDone), and its Rows, Scan and
// conversions cost about 8 µs a query more than the driver's own path: a
// recall's index statement paid 40-50 µs on the 2-core machine of
// docs/performance.md. go-sqlite3 still watches ctx (one watcher per
// result set, which interrupts the statement when ctx ends), and keeps
// the statement prepared on its connection (_stmt_cache_size, see
// sqliteParams).
func (db *DB) queryDriver(ctx context.Context, q string, args []any, row func(vals []driver.Value) error) error {
	sqlDB, err := db.gorm.DB()
	if err != nil {
		return err
	}
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("store: %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, q, named)
		if err != nil {
			return err
		}
		defer rows.Close()
		vals := make([]driver.Value, len(rows.Columns()))
		for {
			err := rows.Next(vals)
			if errors.Is(err, io.EOF) {
				return rows.Close()
			}
			if err != nil {
				return err
			}
			if err := row(vals); err != nil {
				return err
			}
		}
	})
}

// The driver's values as the scans of this package want them.

func valInt(v driver.Value) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("an integer column holds %T", v)
}

func valFloat(v driver.Value) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("a real column holds %T", v)
}

func valString(v driver.Value) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("a text column holds %T", v)
}

func valBytes(v driver.Value) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("a blob column holds %T", v)
}
