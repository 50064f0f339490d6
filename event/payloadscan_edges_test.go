package event

import (
	"strings"
	"testing"
)

func TestScanPayloadEdges(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat(`}`, n) }
	ins := []string{
		`{"size":` + deep(62) + `}`, `{"size":` + deep(63) + `}`, `{"size":` + deep(64) + `}`, `{"size":` + deep(65) + `}`,
		`{"size":` + deepObj(63) + `}`, `{"size":` + deepObj(64) + `}`,
		`{"size":` + deep(10001) + `}`,
		`{"size":{"a":1e999999999999}}`, `{"size":{"a":-0}}`, `{"size":{"a":-0.0}}`, `{"size":{"a":9223372036854775808}}`,
		`{"size":{"a":1E+}}`, `{"size":{"a":1e-}}`, `{"size":{"a":.5}}`, `{"size":{"a":+1}}`, `{"size":{"a":0x1}}`,
		"{\"size\":{\"a\":1}\u00a0}", "{\"size\":{\"a\":1}\f}", "{\"size\":{\"a\":1}\v}", "\ufeff{}", "{\"size\":{\"a\x00\":1}}",
		`{"size":{"a":1},"provider":{"a":1},"state":"x"}`, `{"provider":{},"provider":{}}`, `{"size":{"":1,"":2}}`,
		`{"size":{"a":[{"b":1,"b":2}]}}`, `{"size":{"a":[{"b":1},{"b":2}]}}`, `{"size":{"a":"\/"}}`,
		`{"state":"null"}`, `{"state":nul}`, `{"state":null,"state":null}`, `{"state" : "x" , "size" : 1 }`,
		"{\"state\":\"x\"}\r\n\t ", `{"size":{"a":1}}}`, `{"size":{"a":1}]`, `{"size":tRue}`, `{"size":{"a":"b"]}`,
		`{"size":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26,"A":27,"B":28,"C":29,"D":30,"E":31,"F":32,"a":33}}`,
		`{"size":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26,"A":27,"B":28,"C":29,"D":30,"E":31,"a":33}}`,
	}
	for _, in := range ins {
		checkPayloadScan(t, in)
	}
}
