package grains

import "testing"

func TestCarry(t *testing.T) {
	old := &Grain{Type: "fact", Subject: "john", Object: "coffee", Content: "c", Confidence: 0.5, Tags: []string{"a"}, Pinned: true}
	tests := []struct {
		name    string
		g       Grain
		set     []string
		want    Grain
		wantErr bool
	}{
		{name: "absent carries", g: Grain{Object: "tea"},
			want: Grain{Type: "fact", Subject: "john", Object: "tea", Content: "c", Confidence: 0.5, Tags: []string{"a"}, Pinned: true}},
		{name: "named empty clears", g: Grain{}, set: []string{"content", "confidence", "tags", "pinned"},
			want: Grain{Type: "fact", Subject: "john", Object: "coffee"}},
		{name: "empty list clears unnamed", g: Grain{Tags: []string{}},
			want: Grain{Type: "fact", Subject: "john", Object: "coffee", Content: "c", Confidence: 0.5, Tags: []string{}, Pinned: true}},
		{name: "named empty type carries", g: Grain{}, set: []string{"type"},
			want: Grain{Type: "fact", Subject: "john", Object: "coffee", Content: "c", Confidence: 0.5, Tags: []string{"a"}, Pinned: true}},
		{name: "unknown field", set: []string{"hash"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.g
			err := Carry(&g, old, tt.set)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Carry: %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if ErrorCode(err) != CodeInvalidArgument {
					t.Errorf("code %s", ErrorCode(err))
				}
				return
			}
			if g.Type != tt.want.Type || g.Subject != tt.want.Subject || g.Object != tt.want.Object || g.Content != tt.want.Content ||
				g.Confidence != tt.want.Confidence || g.Pinned != tt.want.Pinned || len(g.Tags) != len(tt.want.Tags) || (g.Tags == nil) != (tt.want.Tags == nil) {
				t.Errorf("got %+v, want %+v", g, tt.want)
			}
			z := ExplicitZeros(&g, tt.set)
			g.Normalize()
			z.Restore(&g)
			if g.Confidence != tt.want.Confidence {
				t.Errorf("confidence after Normalize %g, want %g", g.Confidence, tt.want.Confidence)
			}
		})
	}
}
