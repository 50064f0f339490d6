package projection_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
)

func TestNewRequiresStoreAndEvents(t *testing.T) {
	_, err := projection.New(nil, nil)
	if err == nil || !strings.Contains(err.Error(), "store is required") || !strings.Contains(err.Error(), "events is required") {
		t.Errorf("New(nil, nil) = %v, want both refusals", err)
	}
}

// Every bad parameter of a listing is refused at once, each naming its
// member and rule.
func TestFilterValidateNamesEveryBadParameter(t *testing.T) {
	err := projection.Filter{Cloud: "a\x00", Status: "gone", Limit: 1001, Cursor: "not-a-cursor"}.Validate()
	var ve *event.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want *event.ValidationError", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.Member+" "+string(p.Rule))
	}
	want := []string{"/cloud " + string(event.RuleNUL), "/status " + string(event.RuleEnum),
		"/limit " + string(event.RuleMaximum), "/cursor " + string(event.RuleFormat)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if err := (projection.Filter{}).Validate(); err != nil {
		t.Errorf("zero Filter: %v", err)
	}
}
