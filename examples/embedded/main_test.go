package main

import (
	"context"
	"os"
)

func Example() {
	if err := run(context.Background(), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// result: {"accepted":3,"duplicates":1,"rejected":[{"index":3,"event_id":"e3","reason":"schema: /payload/state: required: is required on every event except a delete"}]}
	// resource instance/vm-1: state active, size {"vcpus":2,"ram_gb":4,"disk_gb":20,"flavor":"m1.small"}, project p1
	// resource volume/vol-1: state in-use, size {"size_gb":100,"type":"ssd"}, project p1
}
