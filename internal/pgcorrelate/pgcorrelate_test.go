package pgcorrelate

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/tallyhq/tally/correlate"
)

// Every write statement takes exactly the arguments Write gives
// it: its highest parameter is the last argument, for every step with and
// without an idempotencyKey (the statements are made once, in writeSQL, and
// number step 5's parameters after the step's own).
func TestWriteStatementParameters(t *testing.T) {
	param := regexp.MustCompile(`\$(\d+)`)
	for _, step := range []correlate.Step{correlate.StepRecord, correlate.StepOccurrence, correlate.StepResolution} {
		for _, key := range []string{"", "key-1"} {
			query, args, err := Write(correlate.Create{Step: step, IdempotencyKey: key})
			if err != nil {
				t.Fatalf("step %d, key %q: %v", step, key, err)
			}
			highest := 0
			for _, m := range param.FindAllStringSubmatch(query, -1) {
				n, _ := strconv.Atoi(m[1])
				highest = max(highest, n)
			}
			if highest != len(args) {
				t.Errorf("step %d, key %q: highest parameter $%d, %d arguments", step, key, highest, len(args))
			}
		}
	}
}
