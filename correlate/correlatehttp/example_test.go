package correlatehttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/correlate/correlatehttp"
	"github.com/tallyhq/tally/route"
	"github.com/tallyhq/tally/store/memstore"
)

// Mount the events API on a server's mux; the server authenticates.
func ExampleHandler() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		panic(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{
		CallerFrom: func(r *http.Request) (correlate.Caller, bool) {
			if r.Header.Get("Authorization") != "Bearer demo" {
				return correlate.Caller{}, false
			}
			return correlate.Caller{Organization: "acme", User: "alice"}, true
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })

	for _, body := range []string{
		`{"category":"connection","action":"connect","correlationKey":"prod-1/unreachable"}`,
		`{"category":"connection","action":"connect","correlationKey":"prod-1/unreachable"}`,
		`{"category":"connection","action":"connect","correlationKey":"prod-1/unreachable","resolvedAt":"2026-03-01T12:00:00Z"}`,
	} {
		req := httptest.NewRequest("POST", "/api/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer demo")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get(correlatehttp.DispositionHeader))
	}
	// Output:
	// 201 created
	// 200 incremented
	// 200 resolved
}

// Create events through the Go client: every create carries an automatic
// Idempotency-Key, so a retried create is replayed, never counted twice.
func ExampleClient() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		panic(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{
		CallerFrom: func(r *http.Request) (correlate.Caller, bool) {
			return correlate.Caller{Organization: "acme", User: "alice"}, r.Header.Get("Authorization") == "Bearer demo"
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: "demo"})
	if err != nil {
		panic(err)
	}
	p := correlate.Payload{Category: "connection", Action: "connect", CorrelationKey: "prod-1/unreachable"}
	for range 2 {
		e, d, err := c.Create(context.Background(), p)
		if err != nil {
			panic(err)
		}
		fmt.Println(d, *e.OccurrenceCount)
	}
	// Output:
	// created 1
	// incremented 2
}

// Read and change correlated events through the Go client: list them page
// after page, mark one read, and read the notification center's counts.
func ExampleClient_AllEvents() {
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	svc, err := correlate.New(db.Correlate(), correlate.Options{})
	if err != nil {
		panic(err)
	}
	h, err := correlatehttp.New(svc, correlatehttp.Options{
		CallerFrom: func(r *http.Request) (correlate.Caller, bool) {
			return correlate.Caller{Organization: "acme", User: "alice"}, r.Header.Get("Authorization") == "Bearer demo"
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	route.Mount(mux, h.Routes(), func(rt route.Route) http.Handler { return rt.Handler })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := correlatehttp.NewClient(srv.URL, correlatehttp.ClientOptions{Token: "demo"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, p := range []correlate.Payload{
		{Category: "audit", Action: "login"},
		{Category: "connection", Action: "connect", Severity: correlate.SeverityError},
	} {
		if _, _, err := c.Create(ctx, p); err != nil {
			panic(err)
		}
	}
	var first string
	for e, err := range c.AllEvents(ctx, correlate.Query{Order: correlate.OrderAsc, PageSize: 1}) {
		if err != nil {
			panic(err)
		}
		if first == "" {
			first = e.ID
		}
		fmt.Println(e.Category, e.Severity, e.Status)
	}
	if err := c.SetStatus(ctx, first, correlate.StatusRead); err != nil {
		panic(err)
	}
	unread, err := c.Aggregate(ctx, false)
	if err != nil {
		panic(err)
	}
	sum, err := c.Summary(ctx, correlate.Query{})
	if err != nil {
		panic(err)
	}
	fmt.Println("unread audit:", unread.Count("audit"), "unread connection:", unread.Count("connection"))
	fmt.Println(sum.Data[0].UserID, sum.Data[0].TotalCount, "events,", sum.Data[0].UnreadCount, "unread")
	// Output:
	// audit informational unread
	// connection error unread
	// unread audit: 0 unread connection: 1
	// alice 2 events, 1 unread
}
