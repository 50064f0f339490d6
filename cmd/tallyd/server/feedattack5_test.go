package server

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/feed"
)

// A cursor's checksum is CRC-32C, no secret: a client can forge a cursor of
// any position. Forged extreme positions are never a 5xx on either store:
// 200 (a position the store may hold) or 400 naming /after.
func TestFeedAttackForgedCursors(t *testing.T) {
	forged := map[string]feed.Position{
		"tx max":          {Kind: feed.Current, TX: math.MaxUint64, Seq: 1},
		"tx 2^63":         {Kind: feed.Current, TX: 1 << 63, Seq: 1},
		"tx 2^63-1":       {Kind: feed.Current, TX: math.MaxInt64, Seq: math.MaxInt64},
		"seq max":         {Kind: feed.Current, TX: 1, Seq: math.MaxInt64},
		"current zero":    {Kind: feed.Current},
		"legacy far":      {Kind: feed.Legacy, Time: time.UnixMicro(math.MaxInt64), ID: "x"},
		"legacy min":      {Kind: feed.Legacy, Time: time.UnixMicro(math.MinInt64), ID: ""},
		"legacy long id":  {Kind: feed.Legacy, Time: time.Unix(1e9, 0), ID: strings.Repeat("\xff", 300)},
		"legacy nul id":   {Kind: feed.Legacy, Time: time.Unix(1e9, 0), ID: "a\x00b"},
		"legacy year 1":   {Kind: feed.Legacy, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), ID: "a"},
		"legacy 300000ad": {Kind: feed.Legacy, Time: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), ID: "a"},
	}
	for name, st := range attackStores {
		t.Run(name, func(t *testing.T) {
			a := newAtk(t, st(t), Options{})
			a.ingest("g", 0, 3)
			for fname, p := range forged {
				for _, c := range []struct {
					path, tok string
					tag       feed.Tag
				}{{"/api/v1/events/feed", atkReadA, feed.Lifecycle}, {"/api/events/feed", atkEvAU, feed.Correlated}} {
					cur := feed.Encode(c.tag, p)
					code, _, b := a.do("GET", c.path+"?after="+url.QueryEscape(cur), c.tok, "", nil)
					if code != 200 && !(code == 400 && strings.Contains(string(b), `"/after"`)) {
						t.Errorf("%s %s: %d %.300s", c.path, fname, code, b)
					}
				}
			}
		})
	}
}
