package console

import (
	"context"
	"net/url"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// agentInstances is the agent runtime's part of the agents page.
type agentInstances struct {
	Problem string
	Result  *agentruntime.InstancesResult
	// Next is the address of the following page of instances.
	Next string
}

// instancesPage is how many instances the agents page lists at once.
const instancesPage = 50

// listInstances asks the agent runtime for a page of its instances, as
// the operator.
func listInstances(ctx context.Context, b Backend, after string) *agentInstances {
	out := &agentInstances{}
	res := &agentruntime.InstancesResult{}
	err := operator{b}.Call(ctx, wop.FamilyAgentRuntime, agentruntime.MethodInstances,
		agentruntime.InstancesRequest{Limit: instancesPage, After: after}, res)
	if err != nil {
		out.Problem = wop.AsError(err).Message
		return out
	}
	out.Result = res
	if res.Next != "" {
		out.Next = Prefix + "agents?" + url.Values{"after": {res.Next}}.Encode()
	}
	return out
}
