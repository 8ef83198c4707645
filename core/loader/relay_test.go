package loader

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/wophost/wophost/sdk/plugin"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// noInvoke is a plugin's gRPC client whose Invoke always fails, so that a
// call that succeeds did not take the gRPC connection.
type noInvoke struct{ wophostv1.CapabilityClient }

func (noInvoke) Invoke(context.Context, *wophostv1.InvokeRequest, ...grpc.CallOption) (*wophostv1.InvokeResponse, error) {
	return nil, errors.New("the call took the gRPC connection")
}

// EndRun fails as Invoke does: an end of run that succeeds did not take
// the gRPC connection.
func (noInvoke) EndRun(context.Context, *wophostv1.EndRunRequest, ...grpc.CallOption) (*wophostv1.EndRunResponse, error) {
	return nil, errors.New("the end of the run took the gRPC connection")
}

// The host's calls to a plugin that serves a direct channel, and the ends
// of runs, travel on the channel once the plugin is configured with direct
// channels on, and on the plugin's gRPC connection with them off.
func TestInvokeTakesTheChannelWhenThePluginServesOne(t *testing.T) {
	testcap := testbin.NewCache(t.TempDir()).MustBinary(t, "./test/plugins/testcap")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, on := range []bool{true, false} {
		var log syncBuffer
		opts := testOptions(30*time.Second, &log)
		opts.DirectChannels = on
		c, err := StartCapability("testcap", openExecutable(t, testcap), opts)
		if err != nil {
			t.Fatalf("start: %v\n%s", err, log.String())
		}
		defer c.Kill()
		if _, err := c.Describe(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ConfigSchema(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Configure(ctx, json.RawMessage(`{}`), t.TempDir(), plugin.Storage{}, nil, nil); err != nil {
			t.Fatal(err)
		}
		c.conn.Client = noInvoke{c.conn.Client}
		out, err := c.Invoke(ctx, "test.echo", "echo", []byte(`{"n":1}`), wop.CallContext{})
		switch {
		case on && (err != nil || string(out) != `{"n":1}`):
			t.Errorf("with direct channels: %s, %v; want the answer on the channel", out, err)
		case !on && (err == nil || !strings.Contains(err.Error(), "took the gRPC connection")):
			t.Errorf("without direct channels: %s, %v; want the gRPC connection's failure", out, err)
		}
		resp, err := c.EndRun(ctx, "run_1", time.Now().Add(time.Minute))
		switch {
		case on && (err != nil || resp == nil):
			t.Errorf("with direct channels, the end of a run: %v, %v; want it answered on the channel", resp, err)
		case !on && (err == nil || !strings.Contains(err.Error(), "took the gRPC connection")):
			t.Errorf("without direct channels, the end of a run: %v, %v; want the gRPC connection's failure", resp, err)
		}
	}
}
