package oslo

import (
	"fmt"
	"time"

	"github.com/tallyhq/tally/event"
)

// timeLayouts are the formats the corpus README lists ("Timestamp formats
// seen"), most specific first. When parsing, Go accepts a fractional second
// after the seconds field even where the layout has none, so each layout
// covers both the whole-second and the microsecond form.
var timeLayouts = [...]string{
	"2006-01-02T15:04:05Z07:00", // 2012-10-29T13:42:11Z, 2016-03-07T16:23:09.145721+00:00
	"2006-01-02 15:04:05Z07:00", // 2016-12-16 09:30:47+00:00
	"2006-01-02 15:04:05",       // 2012-05-08 20:23:48.028195 (every envelope), 2012-05-08 20:23:41
	"2006-01-02T15:04:05",       // 2012-05-08T20:23:41.425105, 2016-03-07T16:23:08
}

// ParseTime reads a time in any format oslo notifications carry and returns
// it as [event.Normalize] leaves it: in UTC, truncated to microseconds
// (what the server keeps, so that a deterministic event id computed from
// it matches). A time without a zone
// is read as UTC, which is what oslo writes ("2012-05-08 20:23:48.028195"
// is 2012-05-08T20:23:48.028195Z). Any other text, such as the damaged
// "2014-05-3107: 19: 43.463101" of the corpus, is an error that quotes at
// most 64 bytes of it.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return event.Normalize(t), nil
		}
	}
	q := s
	if len(q) > 64 {
		q = q[:64] + "…"
	}
	return time.Time{}, fmt.Errorf("%q is not a time in a format oslo writes (such as 2012-05-08 20:23:48.028195, read as UTC)", q)
}
