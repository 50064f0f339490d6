package event_test

import (
	"testing"

	"github.com/tallyhq/tally/event"
)

// TestCategorize: "It splits the type on dots: a part create makes the event
// a create, a part delete makes it a delete, and every other type is an
// update." When a type has both parts, create wins: "a whole part create makes a create, else
// a whole part delete makes a delete, else update".
func TestCategorize(t *testing.T) {
	tests := []struct {
		eventType string
		want      event.Category
		rule      string
	}{
		{"compute.instance.create.end", event.CategoryCreate, "a part create makes the event a create"},
		{"compute.instance.create.start", event.CategoryCreate, "a part create makes the event a create"},
		{"volume.create.end", event.CategoryCreate, "a part create makes the event a create"},
		{"create.x", event.CategoryCreate, "a part create (the first part)"},
		{"x.create", event.CategoryCreate, "a part create (the last part)"},
		{"compute.instance.delete.end", event.CategoryDelete, "a part delete makes it a delete"},
		{"delete.x", event.CategoryDelete, "a part delete (the first part)"},
		{"x.delete", event.CategoryDelete, "a part delete (the last part)"},
		{"compute.instance.update", event.CategoryUpdate, "every other type is an update"},
		{"compute.instance.resize.confirm.end", event.CategoryUpdate, "every other type is an update"},
		{"x.delete_on_termination", event.CategoryUpdate, "a whole part delete: delete_on_termination is not one"},
		{"x.create_time", event.CategoryUpdate, "a whole part create: create_time is not one"},
		{"x.precreate.undelete", event.CategoryUpdate, "whole parts only"},
		{"x.Create.DELETE", event.CategoryUpdate, "parts are compared exactly"},
		{"sync.create", event.CategoryCreate, "The synthetic events ... sync.create, sync.update and sync.delete ... categorize under the same rule."},
		{"sync.update", event.CategoryUpdate, "sync.update categorizes under the same rule"},
		{"sync.delete", event.CategoryDelete, "sync.delete categorizes under the same rule"},
		{"a.create.delete", event.CategoryCreate, "a whole part create makes a create, else a whole part delete: create wins"},
		{"a.delete.create", event.CategoryCreate, "a whole part create makes a create, else a whole part delete: create wins, whatever the order"},
		{"create", event.CategoryCreate, "Categorize reads the type alone, valid or not"},
		{"delete", event.CategoryDelete, "Categorize reads the type alone, valid or not"},
		{"", event.CategoryUpdate, "every other type is an update"},
		{"..", event.CategoryUpdate, "every other type is an update"},
	}
	for _, tt := range tests {
		if got := event.Categorize(tt.eventType); got != tt.want {
			t.Errorf("Categorize(%q) = %q, want %q (spec: %s)", tt.eventType, got, tt.want, tt.rule)
		}
	}
}
