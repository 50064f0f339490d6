package ingesthttp_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestZZProbe(t *testing.T) {
	h := usageHandler(t)
	gb := []string{}
	for i := 0; i < 50; i++ {
		gb = append(gb, fmt.Sprintf("size.m%d", i))
	}
	for _, q := range []string{
		"from=2000-01-01T00:00:00Z&to=2027-05-19T00:00:00Z&window=day",
		"from=2026-01-01T00:00:00Z&to=2027-02-05T00:00:00Z&window=hour",
		"from=0001-01-01T00:00:00Z&to=2027-02-05T00:00:00Z",
		"from=0000-06-15T12:30:00Z&to=0000-06-16T00:00:00Z&window=hour&limit=2",
		"from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59.999999999Z&window=none",
		"from=2026-03-01T00:00:00.0000001Z&to=2026-03-02T00:00:00Z",
		"from=2026-06-30T23:59:60Z&to=2026-07-02T00:00:00Z",
		"from=2026-03-01T00:00:00+05:00&to=2026-03-03T00:00:00-05:00&window=day",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&limit=1.5",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&limit=-1",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&limit=1001",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&limit=99999999999999999999",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&group_by=" + strings.Join(gb, ","),
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&group_by=size.,state",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&quantity=size.flavor",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&as_of=now",
		"from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&cloud=a%00b",
		"from=2026-03-01T00:00:00Z&to=2026-03-01T00:00:00Z",
	} {
		req := httptest.NewRequest("GET", "/api/v1/usage", nil)
		req.URL.RawQuery = q
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		b := w.Body.String()
		if len(b) > 600 {
			b = b[:600]
		}
		t.Logf("%s\n  -> %d %s", q, w.Code, b)
	}
}
