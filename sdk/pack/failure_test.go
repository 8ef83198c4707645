package pack

import (
	"strings"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// A failed node's status carries the pack's account of its direct calls
// beside the envelope, which stays where a host reads it; an account over
// the bound of a status loses its latest calls.
func TestFailureCarriesTheAccount(t *testing.T) {
	we := wop.Errorf(wop.CodeNotFound, "no such key")
	calls := &wophostv1.DirectCallLog{Calls: []*wophostv1.DirectCall{{Family: "acme.kv", Method: "get", Result: []byte(`{}`), StartedUnixNano: 1}}}
	st := status.Convert(failure(we, calls))
	if got := wire.FromStatus(st.Err()); got.Code != wop.CodeNotFound {
		t.Fatalf("envelope %v", got)
	}
	var account *wophostv1.DirectCallLog
	for _, d := range st.Details() {
		if l, ok := d.(*wophostv1.DirectCallLog); ok {
			account = l
		}
	}
	if len(account.GetCalls()) != 1 || account.GetCalls()[0].GetMethod() != "get" {
		t.Fatalf("account %v", account)
	}
	if _, ok := st.Details()[0].(*wophostv1.ErrorDetail); !ok {
		t.Errorf("the first detail is %T, not the envelope", st.Details()[0])
	}

	big := &wophostv1.DirectCallLog{}
	for i := range 5 {
		big.Calls = append(big.Calls, &wophostv1.DirectCall{Family: "acme.kv", Method: "get", Result: []byte(strings.Repeat("r", 1<<20)), StartedUnixNano: int64(i + 1)})
	}
	st = status.Convert(failure(we, big))
	for _, d := range st.Details() {
		if l, ok := d.(*wophostv1.DirectCallLog); ok {
			account = l
		}
	}
	if proto.Size(account) > failureAccountBytes || len(account.GetCalls()) != 3 || account.GetDropped() != 2 || account.GetCutUnixNano() != 4 {
		t.Fatalf("%d bytes, %d calls, %d dropped from %d; want the first 3 within %d bytes",
			proto.Size(account), len(account.GetCalls()), account.GetDropped(), account.GetCutUnixNano(), failureAccountBytes)
	}
}
