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
	var out PayloadEnvelope
	if !s.payload(&out, nil) {
		return false
	}
	s.space()
	if s.i != len(b) {
		return false
	}
	*p = out
	return true
}

// payload reads the envelope object that starts at s.i, as scanPayload
// describes, and leaves s.i after it; p is set only when ok. With state
// not nil, a state given as a string is not copied: p.State is left
// unset, and *state is set to the span of its text in s.b (else left
// alone), for the caller to copy.
func (s *payloadScanner) payload(p *PayloadEnvelope, state *[2]int) (ok bool) {
	b := s.b
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
			a, z, ok := s.skipStr()
			if !ok {
				return false
			}
			name := b[a:z]
			s.space()
			if !s.byte(':') {
				return false
			}
			s.space()
			start := s.i
			switch string(name) {
			case "state":
				if hasState {
					return false
				}
				hasState = true
				switch {
				case s.lit("null"):
					out.State = NullState()
				case state != nil:
					a, z, ok := s.skipStr()
					if !ok {
						return false
					}
					*state = [2]int{a, z}
				default:
					v, ok := s.str()
					if !ok {
						return false
					}
					out.State = StateOf(v)
				}
			case "size", "provider":
				if string(name) == "size" && hasSize || string(name) == "provider" && hasPr {
					return false
				}
				if !s.value(0) {
					return false
				}
				if string(name) == "size" {
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

// scanSmallMembers is how many members of one object scanPayload checks
// for duplicates pairwise; past them it checks with a hash table
// (largeObject).
const scanSmallMembers = 16

// scanMaxMembers bounds the members of one object that scanPayload
// follows; larger objects go to the full decoder.
const scanMaxMembers = 128

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

// strStop marks the bytes that end skipStr's run of plain string bytes:
// the quote, the backslash, and every byte outside printable ASCII.
var strStop = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x7f
	}
	return t
}()

// skipStr is str without the text.
func (s *payloadScanner) skipStr() (start, end int, ok bool) {
	if !s.byte('"') {
		return 0, 0, false
	}
	start = s.i
	b := s.b
	i := s.i
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		s.i = i + 1
		return start, i, true
	}
	s.i = i
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
		var names [scanSmallMembers][2]int
		for n := 0; ; n++ {
			if n == scanSmallMembers {
				return s.largeObject(depth, &names)
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

// largeObject goes on with an object whose first scanSmallMembers member
// names (spans in s.b, no two alike) are read and whose next member starts
// at s.i, checking the names for duplicates with an open-addressing hash
// table rather than pairwise.
func (s *payloadScanner) largeObject(depth int, first *[scanSmallMembers][2]int) bool {
	if len(s.b) > 1<<31-1 {
		return false
	}
	// A slot holds a name's span; a name starts after its quote, so 0 is
	// no start and an all-zero slot is free.
	var table [2 * scanMaxMembers][2]int32
	const mask = len(table) - 1
	add := func(a, z int) bool {
		name := s.b[a:z]
		h := uint32(2166136261) // FNV-1a
		for _, c := range name {
			h = (h ^ uint32(c)) * 16777619
		}
		i := int(h) & mask
		for table[i][0] != 0 {
			if string(s.b[table[i][0]:table[i][1]]) == string(name) {
				return false
			}
			i = (i + 1) & mask
		}
		table[i] = [2]int32{int32(a), int32(z)}
		return true
	}
	for _, sp := range first {
		add(sp[0], sp[1])
	}
	for n := len(first); ; n++ {
		if n == scanMaxMembers {
			return false
		}
		a, z, ok := s.skipStr()
		if !ok {
			return false
		}
		if !add(a, z) {
			return false // a duplicate: the full decoder's error
		}
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
}
