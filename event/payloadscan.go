package event

// scanPayload is the fast path of [PayloadEnvelope.UnmarshalJSON]: a
// single pass over the common envelope, an object whose members are only
// state, size and provider, written in printable ASCII without string
// escapes. It decodes what json.Unmarshal into wirePayload decodes, byte
// for byte (size and provider copied as sent). ok is false, and p
// untouched, for anything else (another member, an escape, a byte outside
// printable ASCII in a string, a duplicate name at any depth, nesting past
// scanMaxDepth, invalid JSON): the caller then runs the full decoder, which
// accepts or refuses it with its own error. It never accepts what the full
// decoder refuses.
func scanPayload(b []byte, p *PayloadEnvelope) (ok bool) {
	s := payloadScanner{b: b}
	s.space()
	if !s.byte('{') {
		return false
	}
	var (
		out                      PayloadEnvelope
		hasState, hasSize, hasPr bool
		size, prov               [2]int // spans in b
	)
	s.space()
	if !s.byte('}') {
		for {
			name, ok := s.str()
			if !ok {
				return false
			}
			s.space()
			if !s.byte(':') {
				return false
			}
			s.space()
			start := s.i
			switch name {
			case "state":
				if hasState {
					return false
				}
				hasState = true
				switch {
				case s.lit("null"):
					out.State = NullState()
				default:
					v, ok := s.str()
					if !ok {
						return false
					}
					out.State = StateOf(v)
				}
			case "size", "provider":
				if name == "size" && hasSize || name == "provider" && hasPr {
					return false
				}
				if !s.value(0) {
					return false
				}
				if name == "size" {
					hasSize, size = true, [2]int{start, s.i}
				} else {
					hasPr, prov = true, [2]int{start, s.i}
				}
			default:
				return false // unknown members: the full decoder gathers them
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
	if hasSize || hasPr {
		// One copy holds both raw values: the caller may reuse b.
		lo, hi := len(b), 0
		for _, sp := range [][2]int{size, prov} {
			if sp[1] > sp[0] {
				lo, hi = min(lo, sp[0]), max(hi, sp[1])
			}
		}
		c := make([]byte, hi-lo)
		copy(c, b[lo:hi])
		if hasSize {
			out.Size = c[size[0]-lo : size[1]-lo : size[1]-lo]
		}
		if hasPr {
			out.Provider = c[prov[0]-lo : prov[1]-lo : prov[1]-lo]
		}
	}
	*p = out
	return true
}

// scanMaxDepth bounds the nesting scanPayload follows; deeper values go
// to the full decoder.
const scanMaxDepth = 64

// scanMaxMembers bounds the members of one object that scanPayload checks
// for duplicates (pairwise); larger objects go to the full decoder.
const scanMaxMembers = 32

type payloadScanner struct {
	b []byte
	i int
}

func (s *payloadScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *payloadScanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *payloadScanner) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes and returns its
// text.
func (s *payloadScanner) str() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", false
		}
		s.i++
	}
	return "", false
}

// skipStr is str without the text.
func (s *payloadScanner) skipStr() (start, end int, ok bool) {
	if !s.byte('"') {
		return 0, 0, false
	}
	start = s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return start, s.i - 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return 0, 0, false
		}
		s.i++
	}
	return 0, 0, false
}

// value skips one JSON value at depth, checking it as the full decoder
// would.
func (s *payloadScanner) value(depth int) bool {
	if s.i >= len(s.b) || depth >= scanMaxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.skipStr()
		return ok
	case c == '{':
		s.i++
		s.space()
		if s.byte('}') {
			return true
		}
		var names [scanMaxMembers][2]int
		for n := 0; ; n++ {
			if n == scanMaxMembers {
				return false
			}
			a, z, ok := s.skipStr()
			if !ok {
				return false
			}
			name := s.b[a:z]
			for _, o := range names[:n] {
				if string(s.b[o[0]:o[1]]) == string(name) {
					return false // a duplicate: the full decoder's error
				}
			}
			names[n] = [2]int{a, z}
			s.space()
			if !s.byte(':') {
				return false
			}
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.byte('}') {
				return true
			}
			if !s.byte(',') {
				return false
			}
			s.space()
		}
	case c == '[':
		s.i++
		s.space()
		if s.byte(']') {
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.byte(']') {
				return true
			}
			if !s.byte(',') {
				return false
			}
			s.space()
		}
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	default:
		return s.lit("true") || s.lit("false") || s.lit("null")
	}
}

// number skips a number of the JSON grammar.
func (s *payloadScanner) number() bool {
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.digits() > 0:
	default:
		return false
	}
	if s.byte('.') && s.digits() == 0 {
		return false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	// A number must end at a delimiter (the full decoder reads "0x" or
	// "1true" as invalid).
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default:
			return false
		}
	}
	return true
}

func (s *payloadScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}
