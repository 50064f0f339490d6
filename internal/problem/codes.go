package problem

import "net/http"

// Code is a problem's stable, machine-readable identifier, the code member
// of every problem body (its type is the Tally kind's URN, [Code.Kind]).
// Every code tally answers with is declared here, once, and listed by
// [Codes]; openapi.yaml's Problem.code enum and the code table of
// docs/http-api.md are checked against that list.
type Code string

// The codes, in the order of [Codes]: by status, then as documented.
const (
	// CodeInvalidParameter: 400, a query or path parameter breaks a rule.
	CodeInvalidParameter Code = "invalid_parameter"
	// CodeInvalidEvent: 400, a correlation request body breaks a rule.
	CodeInvalidEvent Code = "invalid_event"
	// CodeInvalidSizeSchema: 400, a size schema breaks a rule.
	CodeInvalidSizeSchema Code = "invalid_size_schema"
	// CodeInvalidBody: 400, an ingestion body is neither a JSON object nor an array.
	CodeInvalidBody Code = "invalid_body"
	// CodeInvalidBodyFraming: 400, the body's HTTP framing is malformed.
	CodeInvalidBodyFraming Code = "invalid_body_framing"
	// CodeBodyIncomplete: 400, the body ended early.
	CodeBodyIncomplete Code = "body_incomplete"
	// CodeInvalidContentEncoding: 400, the body is not valid in its content coding.
	CodeInvalidContentEncoding Code = "invalid_content_encoding"
	// CodeUnauthorized: 401, no or an unknown bearer token.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden: 403, a known credential that may not call the route.
	CodeForbidden Code = "forbidden"
	// CodeNotFound: 404, nothing stored under the path, or no such route.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed: 405, a method the path does not serve.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeBodyTimeout: 408, the body did not arrive within the read timeout,
	// or stalled for the body stall timeout.
	CodeBodyTimeout Code = "body_timeout"
	// CodeBodyTooLarge: 413, a body over the server's cap.
	CodeBodyTooLarge Code = "body_too_large"
	// CodeBatchTooLarge: 413, an ingestion batch of more than ingest.MaxBatch events.
	CodeBatchTooLarge Code = "batch_too_large"
	// CodeUnsupportedMediaType: 415, a body whose Content-Type is not read.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeUnsupportedContentEncoding: 415, a content coding the server does not decode.
	CodeUnsupportedContentEncoding Code = "unsupported_content_encoding"
	// CodeHistoryTooLong: 422, a resource history longer than ingest.MaxHistory.
	CodeHistoryTooLong Code = "history_too_long"
	// CodeResultTooLarge: 422, a usage query past the windows or items one answer may compute.
	CodeResultTooLarge Code = "result_too_large"
	// CodeRateLimited: 429, a credential past its rate limit.
	CodeRateLimited Code = "rate_limited"
	// CodeInternal: 500, a failure of the server.
	CodeInternal Code = "internal"
	// CodeStoreUnavailable: 503, the store could not be reached or did not answer in time.
	CodeStoreUnavailable Code = "store_unavailable"
	// CodeBusy: 503, the server holds as many request body bytes, or serves
	// as many feed subscribers, as it may.
	CodeBusy Code = "busy"
)

// codeInfo is what every problem of one code shares.
type codeInfo struct {
	code    Code
	status  int
	kind    string // Tally's problem kind, of its type urn:tally:error:<kind>
	title   string
	meaning string
}

// codes is the one table of codes; [Codes] lists it in this order.
var codes = []codeInfo{
	{CodeInvalidParameter, http.StatusBadRequest, "validation", "Invalid parameter",
		"A query or path parameter is malformed, out of range, repeated or not one the route takes; `errors` lists every one."},
	{CodeInvalidEvent, http.StatusBadRequest, "validation", "Invalid event",
		"A correlation request body (createEvent, a status update, a bulk body) breaks the rules listed in `errors`; nothing was stored."},
	{CodeInvalidSizeSchema, http.StatusBadRequest, "validation", "Invalid size schema",
		"A size schema breaks the rules listed in `errors`; nothing was stored."},
	{CodeInvalidBody, http.StatusBadRequest, "validation", "Body is not JSON",
		"An ingestion body is neither one JSON object nor an array of them; or (PostgreSQL) its events fall in more than 24 months without a partition (`body.timestamp`, rule `maximum`, naming the span: send fewer months per batch); nothing was stored."},
	{CodeInvalidBodyFraming, http.StatusBadRequest, "validation", "Invalid body framing",
		"The body's HTTP framing is malformed (a chunk length, a trailer); nothing was stored."},
	{CodeBodyIncomplete, http.StatusBadRequest, "validation", "Body incomplete",
		"The body ended before its declared length or its last chunk; nothing was stored."},
	{CodeInvalidContentEncoding, http.StatusBadRequest, "validation", "Invalid content encoding",
		"The body is not valid in its `Content-Encoding`; nothing was stored."},
	{CodeUnauthorized, http.StatusUnauthorized, "unauthorized", "Unauthorized",
		"No bearer token, or one the credentials file does not hold; the answer carries `WWW-Authenticate`."},
	{CodeForbidden, http.StatusForbidden, "forbidden", "Forbidden",
		"The credential lacks the role the route needs, or (on the correlation routes) has no organization."},
	{CodeNotFound, http.StatusNotFound, "not_found", "Not found",
		"Nothing is stored under the path, or no route matches it."},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed",
		"The path does not serve the method; `Allow` lists those it serves."},
	{CodeBodyTimeout, http.StatusRequestTimeout, "validation", "Body timeout",
		"The body did not arrive within the server's read timeout, or no byte of it arrived for `--body-stall-timeout`; the connection is closed."},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", "Body too large",
		"The body is over the server's cap, as sent or decoded; nothing was stored."},
	{CodeBatchTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", "Batch too large",
		"An ingestion batch holds more events than `ingest.MaxBatch`; nothing was stored."},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, "validation", "Unsupported media type",
		"The body's `Content-Type` is not JSON (or, on createEvent, is a CloudEvents batch)."},
	{CodeUnsupportedContentEncoding, http.StatusUnsupportedMediaType, "validation", "Unsupported content encoding",
		"A `Content-Encoding` the server does not decode, or more than one; `Accept-Encoding` lists those it does."},
	{CodeHistoryTooLong, http.StatusUnprocessableEntity, "history_too_long", "History too long",
		"The resource has more stored events than a history answer holds; page them with `GET /api/v1/events`."},
	{CodeResultTooLarge, http.StatusUnprocessableEntity, "validation", "Result too large",
		"A usage query would compute more than 10,000 windows, span more than 400 days with `window=hour`, or hold more than 100,000 items or 64 MiB of group values; narrow it."},
	{CodeRateLimited, http.StatusTooManyRequests, "unavailable", "Rate limited",
		"The credential sends more requests, or more ingestion items, per second than its `rate_limit` in the credentials file allows; nothing was done; send it again after `Retry-After` seconds."},
	{CodeInternal, http.StatusInternalServerError, "internal", "Internal server error",
		"The server failed; the error is logged, the text is generic."},
	{CodeStoreUnavailable, http.StatusServiceUnavailable, "unavailable", "Store unavailable",
		"The store could not be reached or did not answer in time (`/readyz` too); send it again after `Retry-After` seconds."},
	{CodeBusy, http.StatusServiceUnavailable, "unavailable", "Server busy",
		"The server holds as many request body bytes, or serves as many feed subscribers, as it may; send it again after `Retry-After` seconds."},
}

// Codes returns every problem code tally answers with, each once, ordered
// by status and then as docs/http-api.md lists them. The slice is the
// caller's.
func Codes() []Code {
	out := make([]Code, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}

func (c Code) info() codeInfo {
	for _, ci := range codes {
		if ci.code == c {
			return ci
		}
	}
	return codeInfo{c, http.StatusInternalServerError, "internal", "Internal server error", ""}
}

// Status returns the HTTP status every problem of c answers with; 500 for
// a code not in [Codes].
func (c Code) Status() int { return c.info().status }

// Title returns the title of a problem of c (a handler may give a more
// precise one, such as "Invalid status update" for [CodeInvalidEvent]).
func (c Code) Title() string { return c.info().title }

// Kind is the problem kind of B42Labs/tally's Reporting API that c
// answers as, the <kind> of its type urn:tally:error:<kind>: validation,
// unauthorized, forbidden, not_found, method_not_allowed,
// payload_too_large, history_too_long, internal or unavailable (Tally's
// clients match on the type; docs/http-api.md, Problem codes).
func (c Code) Kind() string { return c.info().kind }

// Meaning returns one sentence on when tally answers c, as
// docs/http-api.md lists it ("" for a code not in [Codes]).
func (c Code) Meaning() string { return c.info().meaning }
