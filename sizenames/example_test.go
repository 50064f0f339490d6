package sizenames_test

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/sizenames"
	"github.com/tallyhq/tally/store/memstore"
)

func Example() {
	ctx := context.Background()
	db, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	st := db.SizeNames()
	// A reconciliation run replaces the rows of its cloud.
	err = sizenames.ReplaceCloud(ctx, st, "c1", []sizenames.Row{
		{Cloud: "c1", ResourceType: "volume", Member: "type", Value: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203", Name: "ssd"},
	})
	if err != nil {
		panic(err)
	}
	rows, _ := st.SizeNames(ctx, "c1", "volume")
	size, replaced, err := sizenames.Resolve(rows, jsontext.Value(`{"size_gb": 100, "type": "7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(size))
	fmt.Println(replaced)
	// Output:
	// {"size_gb": 100, "type": "ssd"}
	// map[type:7a8b9c0d-1e2f-4a3b-8c4d-5e6f70819203]
}
