package event

import "strings"

// Categorize derives the category of an event from its event_type alone
// (canonical-event.md, Sources and categories): split on dots, a whole part
// "create" makes a create, else a whole part "delete" makes a delete, and
// every other type is an update. So "x.delete_on_termination" is an update,
// and sync.create, sync.update and sync.delete categorize by the same rule.
// A type holding both parts is a create ("a.delete.create" too). It reads
// any string, valid or not, and never fails.
func Categorize(eventType string) Category {
	hasDelete := false
	for part := range strings.SplitSeq(eventType, ".") {
		switch part {
		case "create":
			return CategoryCreate
		case "delete":
			hasDelete = true
		}
	}
	if hasDelete {
		return CategoryDelete
	}
	return CategoryUpdate
}
