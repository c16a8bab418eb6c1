package forgetting_test

import (
	"fmt"
	"time"

	"github.com/lethe-io/lethe/internal/forgetting"
)

func Example() {
	p := forgetting.Default()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f := forgetting.Facts{
		Type:       "fact",
		Namespace:  "default",
		Importance: 0,
		Salience:   1,
		CreatedAt:  now.AddDate(0, 0, -90), // 90 days old, never retrieved
	}

	fmt.Printf("retention %.3f, purge %v\n", p.Decay.Retention(f, now), p.PurgeCandidate(f, now))
	fmt.Printf("retrieval score %.3f\n", p.Retrieval.Score(f, now))
	action, risk := p.Assess(f, now)
	fmt.Printf("risk %.0f: %s\n", risk, action)

	f.Type = "caveat"
	_, reason, _ := p.Protected(f)
	fmt.Println(reason)
	// Output:
	// retention 0.125, purge true
	// retrieval score 0.750
	// risk 360: drop
	// grains of type "caveat" are protected by policy (risk.protected_types)
}

func ExampleParse() {
	_, err := forgetting.Parse([]byte("decay:\n  threshold: 1.5\n  half_life: 30\n"))
	fmt.Println(err)
	// Output:
	// decay.half_life: unknown key; want one of enabled, schedule, curve, half_life_days, decay_per_day, strength_days, threshold, min_age_days, batch, namespace, immune_types
}
