package oslo_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tallyhq/tally/examples/openstack-collector/oslo"
)

// A cinder notification as an oslo listener receives it (shape L), and a
// neutron one whose timestamp is damaged: the first maps to a canonical
// volume event, the second is reported with its line number.
func ExampleMapper_NewReader() {
	input := `{"event_type":"volume.create.end","publisher_id":"volume.host1","ctxt":{"project_id":"p1","request_id":"req-1"},` +
		`"payload":{"volume_id":"f54b1d2f-4514-4688-8da7-4bc66767b6be","tenant_id":"p1","status":"available","size":100,"volume_type":"3706aa72-cb65-4971-83e8-48e1477efd1d"},` +
		`"metadata":{"message_id":"771e22da-cd5b-4ecd-8475-dc74e7b87e80","timestamp":"2016-03-07 16:23:09.259310"}}
{"message_id":"0ab6d71f","timestamp":"2014-05-3107: 19: 43.463101","event_type":"floatingip.delete.end","_context_project_id":"p2","payload":{"floatingip_id":"64262b2a"}}
`
	rd := oslo.Mapper{Cloud: "os-prod-eu1"}.NewReader(strings.NewReader(input))
	for {
		o, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if o.Err != nil {
			fmt.Printf("line %d: not sent: %v\n", o.Line, o.Err)
			continue
		}
		b, _ := o.Event.MarshalJSON()
		fmt.Printf("line %d (%s): %s\n", o.Line, o.Shape, b)
	}
	// Output:
	// line 1 (L): {"event_id":"771e22da-cd5b-4ecd-8475-dc74e7b87e80","timestamp":"2016-03-07T16:23:09.25931Z","event_type":"volume.create.end","platform":"openstack","cloud":"os-prod-eu1","resource_type":"volume","resource_id":"f54b1d2f-4514-4688-8da7-4bc66767b6be","project_id":"p1","source":"collector","payload":{"state":"available","size":{"size_gb":100,"type":"3706aa72-cb65-4971-83e8-48e1477efd1d"},"provider":{"oslo_event_type":"volume.create.end","envelope":"L","publisher_id":"volume.host1","message_id":"771e22da-cd5b-4ecd-8475-dc74e7b87e80","request_id":"req-1"}}}
	// line 2: not sent: timestamp: "2014-05-3107: 19: 43.463101" is not a time in a format oslo writes (such as 2012-05-08 20:23:48.028195, read as UTC)
}
