package ingesthttp

import (
	"errors"
	"net/http"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/reconcile"
	"github.com/tallyhq/tally/internal/problem"
)

// syncRunParams are the query parameters of GET /api/v1/sync-runs.
var syncRunParams = []string{"cloud", "limit", "cursor"}

// observationError is a refused observation: 400 invalid_body listing
// every problem.
type observationError struct{ *event.ValidationError }

func (e *observationError) Unwrap() error { return e.ValidationError }

// postSync serves POST /api/v1/clouds/{cloud}/sync (docs/reconciliation.md):
// the body is one [reconcile.Observation] of the cloud. The caller
// (ReconcilerFrom) must be scoped to the observation's platform and the
// path's cloud, else 403 naming the scope. It answers 200 with the
// [reconcile.Outcome] once the run is committed; 400 invalid_body naming
// every member and rule of a malformed observation (nothing changed); 401
// when ReconcilerFrom finds no caller; 413 for a body over the cap; 500
// when the store fails (nothing changed). A path cloud other than the
// scope's is refused before the body is read; a 400 counts an invalid
// run of the cloud ([reconcile.Service.Invalid]).
func (h *Handler) postSync(w http.ResponseWriter, r *http.Request) error {
	if err := noParams(r); err != nil {
		return err
	}
	caller, ok := h.opts.ReconcilerFrom(r)
	if !ok {
		return problem.ErrNoCaller
	}
	cloud := r.PathValue("cloud")
	if caller.Cloud != cloud {
		// Refused before the body is read: nothing of it is needed.
		problem.Write(w, problem.Forbidden("Credential "+quote(caller.Credential)+" may reconcile platform "+quote(caller.Platform)+
			" and cloud "+quote(caller.Cloud)+" only; this request names cloud "+quote(cloud)+"."))
		return nil
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	obs, err := reconcile.Decode(body)
	var ve *event.ValidationError
	if errors.As(err, &ve) {
		h.opts.Reconcile.Invalid(cloud)
		return &observationError{ve}
	}
	if err != nil {
		return err
	}
	if caller.Platform != obs.Platform {
		problem.Write(w, problem.Forbidden("Credential "+quote(caller.Credential)+" may reconcile platform "+quote(caller.Platform)+
			" and cloud "+quote(caller.Cloud)+" only; this observation names platform "+quote(obs.Platform)+" and cloud "+quote(cloud)+"."))
		return nil
	}
	out, err := h.opts.Reconcile.Run(r.Context(), caller.Credential, cloud, obs)
	if errors.As(err, &ve) {
		return &observationError{ve}
	}
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, out)
	return nil
}

func quote(s string) string { return `"` + s + `"` }

// listSyncRuns serves GET /api/v1/sync-runs: query parameters cloud (one
// cloud's runs; every cloud's when absent), limit (1..1000, default 100)
// and cursor. It answers {"items":[SyncRun…],"next_cursor":null|"…"},
// newest first, or 400 naming the malformed parameters.
func (h *Handler) listSyncRuns(w http.ResponseWriter, r *http.Request) error {
	var ps params
	f := reconcile.RunFilter{Cloud: r.URL.Query().Get("cloud")}
	f.Limit, f.Cursor = ps.limitCursor(r)
	if err := ps.err(nil, r, syncRunParams...); err != nil {
		return err
	}
	p, err := h.opts.Reconcile.Runs(r.Context(), f)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, p)
	return nil
}
