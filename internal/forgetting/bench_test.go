package forgetting

import "testing"

var sinkFloat float64

func BenchmarkRetention(b *testing.B) {
	for _, curve := range Curves {
		b.Run(string(curve), func(b *testing.B) {
			c := Default().Decay
			c.Curve = curve
			f := aged(45, 0.3)
			for b.Loop() {
				sinkFloat = c.Retention(f, now)
			}
		})
	}
}

func BenchmarkScore(b *testing.B) {
	c := Default().Retrieval
	f := retrieved(40, 7, 0.3)
	for b.Loop() {
		sinkFloat = c.Score(f, now)
	}
}

func BenchmarkAssess(b *testing.B) {
	c := Default().Risk
	f := retrieved(40, 7, 0.3)
	for b.Loop() {
		_, sinkFloat = c.Assess(f, now)
	}
}

func BenchmarkAutoPinned(b *testing.B) {
	p, err := Parse([]byte("auto_pin:\n  - {name: allergy, pattern: '(?i)\\ballerg(y|ies|ic)\\b'}\n  - {name: vip, field: tags, pattern: '(^|,)vip(,|$)'}\n"))
	if err != nil {
		b.Fatal(err)
	}
	fields := map[string]string{"content": "prefers email over phone; no known allergies", "tags": "support,billing"}
	for b.Loop() {
		_ = p.AutoPinned(fields)
	}
}

func BenchmarkParseDefault(b *testing.B) {
	for b.Loop() {
		if _, err := Parse(nil); err != nil {
			b.Fatal(err)
		}
	}
}
