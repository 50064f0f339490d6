package sizenames

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// Resolve applies the size-name rule (canonical-event.md, Size names) to one
// size object with the rows of its event's (cloud, resource_type): a member
// of size that holds a string equal to a row's Value under that row's Member
// is replaced by the row's Name. A member that is absent, is not a string,
// or matches no row stays as it arrived; so does every member when rows is
// empty. Rows are matched by Member and Value only (the caller passes the
// rows of the right pair); when several rows share a (Member, Value), the
// first wins.
//
// It returns the new size and replaced, which maps each replaced member to
// the value it arrived with (nil when nothing was replaced). When nothing is
// replaced the returned size is size itself, byte for byte. Otherwise it is
// size with only the replaced values' bytes changed: every other byte
// (member names, values not replaced, white space) is kept as it arrived
// (docs/decisions.md, Faithfulness).
//
// A size that is absent, null or not an object is returned unchanged with no
// error: the rule applies only to an object. An error is returned only for
// an object that is not valid JSON (or has a member given twice), which
// [github.com/tallyhq/tally/event.Decode] has already refused for any item
// that reaches the pipeline. Resolve is pure and safe for concurrent use.
func Resolve(rows []Row, size jsontext.Value) (jsontext.Value, map[string]string, error) {
	if len(rows) == 0 || size.Kind() != '{' {
		return size, nil, nil
	}
	type key struct{ member, value string }
	names := make(map[key]string, len(rows))
	for _, r := range rows {
		k := key{r.Member, r.Value}
		if _, dup := names[k]; !dup {
			names[k] = r.Name
		}
	}

	dec := jsontext.NewDecoder(bytes.NewReader(size))
	if _, err := dec.ReadToken(); err != nil { // '{'
		return nil, nil, fmt.Errorf("sizenames: size: %w", err)
	}
	var (
		out      []byte
		replaced map[string]string
		kept     int64 // size[:kept] is in out already
	)
	for dec.PeekKind() == '"' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, fmt.Errorf("sizenames: size: %w", err)
		}
		member := nameTok.String()
		val, err := dec.ReadValue()
		if err != nil {
			return nil, nil, fmt.Errorf("sizenames: size: %w", err)
		}
		if val.Kind() != '"' {
			continue
		}
		s, err := unquote(val)
		if err != nil {
			return nil, nil, fmt.Errorf("sizenames: size: %w", err)
		}
		name, ok := names[key{member, s}]
		if !ok {
			continue
		}
		if replaced == nil {
			replaced = make(map[string]string)
		}
		replaced[member] = s
		// Splice: everything before this value as it arrived, then the name.
		end := dec.InputOffset()
		start := end - int64(len(val))
		out = append(out, size[kept:start]...)
		if out, err = jsontext.AppendQuote(out, name); err != nil {
			return nil, nil, fmt.Errorf("sizenames: name of %q: %w", member, err)
		}
		kept = end
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return nil, nil, fmt.Errorf("sizenames: size: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, nil, errors.New("sizenames: size: data after the object")
	}
	if replaced == nil {
		return size, nil, nil
	}
	return jsontext.Value(append(out, size[kept:]...)), replaced, nil
}

func unquote(v jsontext.Value) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	return tok.String(), nil
}

// ReplaceCloud replaces every size-name row of cloud by rows, in one
// transaction of s (canonical-event.md, Size names: "every run of a cloud
// whose adapter lists names replaces that cloud's rows with the list in one
// transaction"). It is what a reconciliation run calls; an empty rows clears
// the cloud.
//
// Before writing it checks cloud and the rows and, if any rule is broken,
// returns an [*event.ValidationError] (errors.Is(err, event.ErrInvalid))
// listing every problem and writes nothing. Each problem's member is a JSON
// Pointer into {"cloud": cloud, "rows": rows}, the rows as [Row]'s JSON
// names them: cloud must be non-empty ("/cloud", rule required); every
// row's cloud must equal cloud ("/rows/3/cloud", rule const); its
// resource_type, member, value and name must be non-empty ("/rows/3/name",
// rule required); and no two rows may share the primary key (cloud,
// resource_type, member, value) ("/rows/3", rule duplicateMember, naming
// the earlier row). The problems come row by row, in that order. Otherwise
// it returns the error of s.ReplaceSizeNames, wrapped. It is safe for
// concurrent use when s is.
func ReplaceCloud(ctx context.Context, s Store, cloud string, rows []Row) error {
	var problems []event.Problem
	if cloud == "" {
		problems = append(problems, event.Problem{Member: "/cloud", Rule: event.RuleRequired, Message: "is required"})
	}
	problems = append(problems, CheckRows("/rows", cloud, rows)...)
	if problems != nil {
		return &event.ValidationError{Problems: problems}
	}
	if err := s.ReplaceSizeNames(ctx, cloud, rows); err != nil {
		return fmt.Errorf("sizenames: replace rows of cloud %q: %w", cloud, err)
	}
	return nil
}

// CheckRows returns every problem of rows as the complete list of cloud's
// rows, in the order [ReplaceCloud] reports them, each member a JSON
// Pointer below prefix ("/rows/3/name"): a row's cloud that is not cloud
// (rule const), an empty resource_type, member, value or name (rule
// required), and a row with the primary key of an earlier one (rule
// duplicateMember). It returns nil when there is none. Pure.
func CheckRows(prefix, cloud string, rows []Row) []event.Problem {
	var problems []event.Problem
	type pk struct{ rt, member, value string }
	seen := make(map[pk]int, len(rows))
	for i, r := range rows {
		row := prefix + "/" + strconv.Itoa(i)
		if r.Cloud != cloud {
			problems = append(problems, event.Problem{Member: row + "/cloud", Rule: event.RuleConst,
				Message: fmt.Sprintf("is %q; every row must name the cloud replaced, %q", r.Cloud, cloud)})
		}
		for _, f := range [...]struct{ name, v string }{
			{"resource_type", r.ResourceType}, {"member", r.Member}, {"value", r.Value}, {"name", r.Name},
		} {
			if f.v == "" {
				problems = append(problems, event.Problem{Member: row + "/" + f.name, Rule: event.RuleRequired, Message: "is required"})
			}
		}
		k := pk{r.ResourceType, r.Member, r.Value}
		if j, dup := seen[k]; dup {
			problems = append(problems, event.Problem{Member: row, Rule: event.RuleDuplicateMember,
				Message: fmt.Sprintf("has the same (cloud, resource_type, member, value) as row %d", j)})
		} else {
			seen[k] = i
		}
	}
	return problems
}
