package console

import (
	"context"
	"net/url"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// agentInstances is the agent runtime's part of the agents page.
type agentInstances struct {
	Problem string
	Result  *agentruntime.InstancesResult
	// Rows are the page's instances, each with the pack whose manifest
	// it was spawned from when the registry holds that manifest.
	Rows []instanceRow
	// Next is the address of the following page of instances.
	Next string
}

// instanceRow is one agent instance and its manifest's pack.
type instanceRow struct {
	agentruntime.InstanceSummary
	Pack string
}

// instancesPage is how many instances the agents page lists at once.
const instancesPage = 50

// listInstances asks the agent runtime for a page of its instances, as
// the operator.
func listInstances(ctx context.Context, b Backend, after string) *agentInstances {
	// The runtime knows the manifest an instance was spawned from, the
	// registry which pack installed it.
	packOf := map[string]string{}
	for _, e := range b.Agents() {
		packOf[e.ID+" "+e.Digest] = e.Pack
	}
	out := &agentInstances{}
	res := &agentruntime.InstancesResult{}
	err := host.AsOperator(b).Call(ctx, wop.FamilyAgentRuntime, agentruntime.MethodInstances,
		agentruntime.InstancesRequest{Limit: instancesPage, After: after}, res)
	if err != nil {
		out.Problem = wop.AsError(err).Message
		return out
	}
	out.Result = res
	for _, in := range res.Instances {
		out.Rows = append(out.Rows, instanceRow{InstanceSummary: in, Pack: packOf[in.ManifestID+" "+in.ManifestDigest]})
	}
	if res.Next != "" {
		out.Next = Prefix + "agents?" + url.Values{"after": {res.Next}}.Encode()
	}
	return out
}
