package event

import "strings"

// The members of the canonical event, in the order of wireEvent, as
// scanEvent numbers them.
const (
	memEventID = iota
	memTimestamp
	memEventType
	memPlatform
	memCloud
	memResourceType
	memResourceID
	memProjectID
	memSource
	memPayload
	memCount
	// memState is payload.state's slot among the texts scanEvent copies.
	memState = memCount
)

// memberIndex returns the number of the canonical event's member name, or
// -1 for any other name (case-sensitive, as the full decoder matches).
func memberIndex(name []byte) int {
	switch string(name) {
	case "event_id":
		return memEventID
	case "timestamp":
		return memTimestamp
	case "event_type":
		return memEventType
	case "platform":
		return memPlatform
	case "cloud":
		return memCloud
	case "resource_type":
		return memResourceType
	case "resource_id":
		return memResourceID
	case "project_id":
		return memProjectID
	case "source":
		return memSource
	case "payload":
		return memPayload
	}
	return -1
}

// scanEvent is the fast path of [Decode]'s json.Unmarshal into wireEvent:
// a single pass over the common event, an object whose members are among
// the ten of the canonical event, each at most once, every one but payload
// a string of printable ASCII without escapes, the timestamp one that
// [ParseTime] reads, and payload an object scanPayload takes. It decodes
// what json.Unmarshal into wireEvent decodes (the payload's size and
// provider copied as sent, every string a copy). ok is false, and w
// untouched, for anything else (an unknown or repeated member, null, an
// escape, a byte outside printable ASCII in a string, a timestamp
// ParseTime refuses, a payload the payload fast path does not take,
// invalid JSON): the caller then runs the full decoder, which accepts or
// refuses it with its own error. It never accepts what the full decoder
// refuses.
func scanEvent(b []byte, w *wireEvent) (ok bool) {
	s := payloadScanner{b: b}
	s.space()
	if !s.byte('{') {
		return false
	}
	var (
		spans   [memCount + 1][2]int // the text of each string member and payload.state, in b
		state   = [2]int{-1, -1}     // payload.state's text, when a string
		seen    uint16
		payload PayloadEnvelope
		total   int
	)
	s.space()
	if !s.byte('}') {
		for {
			a, z, ok := s.skipStr()
			if !ok {
				return false
			}
			m := memberIndex(b[a:z])
			if m < 0 || seen&(1<<m) != 0 {
				return false // unknown or repeated: the full decoder's error
			}
			seen |= 1 << m
			s.space()
			if !s.byte(':') {
				return false
			}
			s.space()
			if m == memPayload {
				if !s.payload(&payload, &state) {
					return false
				}
				if state[0] >= 0 {
					spans[memState] = state
					total += state[1] - state[0]
				}
			} else {
				a, z, ok := s.skipStr()
				if !ok {
					return false
				}
				spans[m] = [2]int{a, z}
				total += z - a
			}
			s.space()
			if s.byte('}') {
				break
			}
			if !s.byte(',') {
				return false
			}
			s.space()
		}
	}
	s.space()
	if s.i != len(b) {
		return false
	}
	// One string holds the text of every member; each member is a
	// substring of it (they live and die with the event together).
	var sb strings.Builder
	sb.Grow(total)
	for _, sp := range spans {
		sb.Write(b[sp[0]:sp[1]])
	}
	all := sb.String()
	var text [memCount + 1]string
	off := 0
	for m, sp := range spans {
		n := sp[1] - sp[0]
		text[m] = all[off : off+n]
		off += n
	}
	if state[0] >= 0 {
		payload.State = StateOf(text[memState])
	}
	var ts wireTime
	if seen&(1<<memTimestamp) != 0 {
		t, err := ParseTime(text[memTimestamp])
		if err != nil {
			return false // the full decoder names the problem
		}
		ts = wireTime{t: t, set: true}
	}
	*w = wireEvent{
		EventID: text[memEventID], Timestamp: ts, EventType: text[memEventType],
		Platform: text[memPlatform], Cloud: text[memCloud], ResourceType: text[memResourceType],
		ResourceID: text[memResourceID], ProjectID: text[memProjectID], Source: Source(text[memSource]),
		Payload: wirePayload(payload),
	}
	return true
}
