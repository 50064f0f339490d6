package sizenames_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/sizenames"
)

var volumeRows = []sizenames.Row{
	{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203", Name: "ssd"},
	{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "11111111-0000-0000-0000-000000000000", Name: "hdd"},
	{Cloud: "c1", ResourceType: "volume", Member: "tier", Value: "t1", Name: "gold"},
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name         string
		rows         []sizenames.Row
		size         string
		want         string
		wantReplaced map[string]string
	}{{
		// "A size member that holds a string equal to a row's value under
		// that row's member is replaced by the row's name."
		name:         "string equal to a row's value under its member is replaced",
		rows:         volumeRows,
		size:         `{"size_gb": 100, "type": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}`,
		want:         `{"size_gb": 100, "type": "ssd"}`,
		wantReplaced: map[string]string{"type": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"},
	}, {
		name:         "two members replaced, numbers and unknown members kept exact",
		rows:         volumeRows,
		size:         `{"size_gb":1.50000000000000000001,"type":"11111111-0000-0000-0000-000000000000","x":{"a":[1e400]},"tier":"t1"}`,
		want:         `{"size_gb":1.50000000000000000001,"type":"hdd","x":{"a":[1e400]},"tier":"gold"}`,
		wantReplaced: map[string]string{"type": "11111111-0000-0000-0000-000000000000", "tier": "t1"},
	}, {
		// "A member that is absent, is not a string, or matches no row stays
		// as it arrived, and so does every member of an event whose pair has
		// no rows."
		name: "member absent stays",
		rows: volumeRows,
		size: `{"size_gb": 100}`,
		want: `{"size_gb": 100}`,
	}, {
		name: "member not a string stays",
		rows: []sizenames.Row{{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "7", Name: "seven"}},
		size: `{"type": 7}`,
		want: `{"type": 7}`,
	}, {
		name: "string matching no row stays",
		rows: volumeRows,
		size: `{"type": "unknown-id"}`,
		want: `{"type": "unknown-id"}`,
	}, {
		name: "value of another member does not match",
		rows: volumeRows,
		size: `{"flavor": "t1"}`,
		want: `{"flavor": "t1"}`,
	}, {
		name: "no rows changes nothing",
		rows: nil,
		size: `{ "type" : "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203" }`,
		want: `{ "type" : "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203" }`,
	}, {
		name: "nested member is not a size member",
		rows: volumeRows,
		size: `{"x":{"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}}`,
		want: `{"x":{"type":"7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}}`,
	}, {
		name:         "escaped value compares by its text",
		rows:         volumeRows,
		size:         `{"tier":"\u0074\u0031"}`,
		want:         `{"tier":"gold"}`,
		wantReplaced: map[string]string{"tier": "t1"},
	}, {
		name: "absent size",
		rows: volumeRows,
		size: ``,
		want: ``,
	}, {
		name: "null size",
		rows: volumeRows,
		size: `null`,
		want: `null`,
	}, {
		name: "empty object",
		rows: volumeRows,
		size: `{}`,
		want: `{}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, replaced, err := sizenames.Resolve(tt.rows, jsontext.Value(tt.size))
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("size (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantReplaced, replaced); diff != "" {
				t.Errorf("replaced (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveInvalid(t *testing.T) {
	for _, size := range []string{`{"type":`, `{"a":1,"a":2}`, `{"a":1} x`, "{\"a\":\"\xff\"}"} {
		if _, _, err := sizenames.Resolve(volumeRows, jsontext.Value(size)); err == nil {
			t.Errorf("Resolve(%q): no error", size)
		}
	}
}

// FuzzResolve checks, for any input, that Resolve never panics and that a
// size it accepts comes out as valid JSON whose members are the input's,
// with exactly the replaced members changed to their names.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		`{"size_gb": 100, "type": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}`,
		`{"type":"t1","tier":"t1","x":[1,2,{"type":"t1"}]}`,
		`{}`, `null`, `[]`, `{"a":1e999}`, `{"type":"\u0074\u0031"}`,
	} {
		f.Add(s)
	}
	rows := append([]sizenames.Row{{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "t1", Name: "one"}}, volumeRows...)
	f.Fuzz(func(t *testing.T, size string) {
		got, replaced, err := sizenames.Resolve(rows, jsontext.Value(size))
		if err != nil {
			return
		}
		if replaced == nil {
			if !bytes.Equal(got, []byte(size)) {
				t.Fatalf("nothing replaced but size changed: %q -> %q", size, got)
			}
			return
		}
		var in, out map[string]jsontext.Value
		if err := json.Unmarshal([]byte(size), &in); err != nil {
			t.Fatalf("replaced members of an input that is not an object: %v", err)
		}
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("output is not a JSON object: %v (%q)", err, got)
		}
		if len(in) != len(out) {
			t.Fatalf("member count changed: %q -> %q", size, got)
		}
		for m, v := range in {
			if old, ok := replaced[m]; ok {
				var s string
				if err := json.Unmarshal(v, &s); err != nil || s != old {
					t.Fatalf("member %q reported as %q but arrived as %s", m, old, v)
				}
				continue
			}
			if !bytes.Equal(v, out[m]) {
				t.Fatalf("member %q changed from %s to %s", m, v, out[m])
			}
		}
	})
}

type recordingStore struct {
	calls int
	rows  []sizenames.Row
}

func (s *recordingStore) SizeNames(context.Context, string, string) ([]sizenames.Row, error) {
	return nil, nil
}

func (s *recordingStore) ReplaceSizeNames(_ context.Context, _ string, rows []sizenames.Row) error {
	s.calls++
	s.rows = rows
	return nil
}

// ReplaceCloud refuses rows that break a rule as an *event.ValidationError
// listing every problem, each naming its member in {"cloud", "rows"} and
// its rule, and writes nothing.
func TestReplaceCloudRefusesInvalidRows(t *testing.T) {
	ok := sizenames.Row{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "v", Name: "n"}
	req := func(member string) event.Problem {
		return event.Problem{Member: member, Rule: event.RuleRequired, Message: "is required"}
	}
	tests := []struct {
		name  string
		cloud string
		rows  []sizenames.Row
		want  []event.Problem
	}{
		{"empty cloud", "", nil, []event.Problem{req("/cloud")}},
		{"row of another cloud", "c1", []sizenames.Row{ok, {Cloud: "c2", ResourceType: "volume", Member: "type", Value: "w", Name: "n"}},
			[]event.Problem{{Member: "/rows/1/cloud", Rule: event.RuleConst, Message: `is "c2"; every row must name the cloud replaced, "c1"`}}},
		{"empty resource_type", "c1", []sizenames.Row{{Cloud: "c1", Member: "type", Value: "v", Name: "n"}}, []event.Problem{req("/rows/0/resource_type")}},
		{"empty member", "c1", []sizenames.Row{{Cloud: "c1", ResourceType: "volume", Value: "v", Name: "n"}}, []event.Problem{req("/rows/0/member")}},
		{"empty value", "c1", []sizenames.Row{{Cloud: "c1", ResourceType: "volume", Member: "type", Name: "n"}}, []event.Problem{req("/rows/0/value")}},
		{"empty name", "c1", []sizenames.Row{{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "v"}}, []event.Problem{req("/rows/0/name")}},
		{"duplicate primary key", "c1", []sizenames.Row{ok, ok, {Cloud: "c1", ResourceType: "volume", Member: "type", Value: "v", Name: "other"}},
			[]event.Problem{
				{Member: "/rows/1", Rule: event.RuleDuplicateMember, Message: "has the same (cloud, resource_type, member, value) as row 0"},
				{Member: "/rows/2", Rule: event.RuleDuplicateMember, Message: "has the same (cloud, resource_type, member, value) as row 0"},
			}},
		{"every problem at once, row by row", "c1", []sizenames.Row{ok, {Cloud: "c9"}, {Cloud: "c1", ResourceType: "volume", Member: "type", Value: "v"}},
			[]event.Problem{
				{Member: "/rows/1/cloud", Rule: event.RuleConst, Message: `is "c9"; every row must name the cloud replaced, "c1"`},
				req("/rows/1/resource_type"), req("/rows/1/member"), req("/rows/1/value"), req("/rows/1/name"),
				req("/rows/2/name"),
				{Member: "/rows/2", Rule: event.RuleDuplicateMember, Message: "has the same (cloud, resource_type, member, value) as row 0"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &recordingStore{}
			err := sizenames.ReplaceCloud(context.Background(), s, tt.cloud, tt.rows)
			var ve *event.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("err = %v, want an *event.ValidationError matching event.ErrInvalid", err)
			}
			if diff := cmp.Diff(tt.want, ve.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if s.calls != 0 {
				t.Errorf("store called %d times, want 0", s.calls)
			}
		})
	}
	t.Run("valid rows reach the store", func(t *testing.T) {
		s := &recordingStore{}
		rows := []sizenames.Row{ok, {Cloud: "c1", ResourceType: "volume", Member: "type", Value: "w", Name: "n"}}
		if err := sizenames.ReplaceCloud(context.Background(), s, "c1", rows); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rows, s.rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}
