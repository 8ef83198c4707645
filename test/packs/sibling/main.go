// Command sibling is a node pack that speaks the raw wire: built on plain
// go-plugin, it serves the Pack service itself and calls HostServices with
// the generated gRPC client, so it can send any call context it likes.
// Its forger node forges the call context of its holder node, a sibling
// in flight with a family the forger did not declare, and reports what
// the host answered.
package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

//go:embed pack.json
var manifest []byte

func main() {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: hostwire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			hostwire.ProtocolVersion: {hostwire.KindPack: packPlugin{}},
		},
		GRPCServer: goplugin.DefaultGRPCServer,
		Logger:     hclog.New(&hclog.LoggerOptions{Name: "sibling", Output: os.Stderr, JSONFormat: true}),
	})
}

// packPlugin serves the Pack service on go-plugin's own server, with
// go-plugin's AutoMTLS, as a pack built without the SDK does.
type packPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

// GRPCServer registers the Pack service.
func (packPlugin) GRPCServer(broker *goplugin.GRPCBroker, s *grpc.Server) error {
	wophostv1.RegisterPackServer(s, &server{broker: broker, conns: map[uint32]*grpc.ClientConn{}})
	return nil
}

// GRPCClient is the host's half, which a pack has no use for.
func (packPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("a pack dispenses nothing")
}

// server serves the Pack service without the pack SDK.
type server struct {
	wophostv1.UnimplementedPackServer
	broker *goplugin.GRPCBroker

	mu    sync.Mutex
	conns map[uint32]*grpc.ClientConn
}

func (s *server) Manifest(context.Context, *wophostv1.ManifestRequest) (*wophostv1.ManifestResponse, error) {
	return &wophostv1.ManifestResponse{PackJson: manifest}, nil
}

// hostServices dials the host's HostServices on broker id once; the
// host sends the connection information once, so every run shares it.
func (s *server) hostServices(id uint32) (wophostv1.HostServicesClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conn, ok := s.conns[id]
	if !ok {
		var err error
		if conn, err = s.broker.Dial(id); err != nil {
			return nil, fmt.Errorf("dial host services: %w", err)
		}
		s.conns[id] = conn
	}
	return wophostv1.NewHostServicesClient(conn), nil
}

func (s *server) Execute(ctx context.Context, req *wophostv1.ExecuteRequest) (*wophostv1.ExecuteResponse, error) {
	hs, err := s.hostServices(req.GetHostServicesBrokerId())
	if err != nil {
		return nil, hostwire.ToStatus(wop.Errorf(wop.CodeUnavailable, "%v", err))
	}
	var out any
	switch req.GetTypeId() {
	case "sibling.holder":
		out, err = holder(ctx, hs, req)
	case "sibling.forger":
		out, err = forger(ctx, hs, req)
	default:
		err = wop.Errorf(wop.CodeNotFound, "no node %q", req.GetTypeId())
	}
	if err != nil {
		return nil, hostwire.ToStatus(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, hostwire.ToStatus(wop.Errorf(wop.CodeInternal, "marshal output: %v", err))
	}
	return &wophostv1.ExecuteResponse{Output: b}, nil
}

// attempt is what the host answered one call.
type attempt struct {
	OK      bool   `json:"ok"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// call sends family.echo with call as the call context, as it is.
func call(ctx context.Context, hs wophostv1.HostServicesClient, family string, call *wophostv1.CallContext) attempt {
	_, err := hs.Call(ctx, &wophostv1.CallRequest{Family: family, Method: "echo", Payload: []byte(`{}`), Call: call})
	if err != nil {
		e := hostwire.FromStatus(err)
		return attempt{Code: e.Code, Message: e.Message}
	}
	return attempt{OK: true}
}

// holder writes its run id where the forger reads it (the run id is no
// secret: it is in logs, records and API answers), stays in flight until
// the test releases it, then makes its own declared call.
func holder(ctx context.Context, hs wophostv1.HostServicesClient, req *wophostv1.ExecuteRequest) (any, error) {
	var in struct {
		RunIDFile   string `json:"runIdFile"`
		ReleaseFile string `json:"releaseFile"`
	}
	if err := json.Unmarshal(req.GetInput(), &in); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "input: %v", err)
	}
	tmp := in.RunIDFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(req.GetCall().GetRunId()), 0o600); err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "write run id: %v", err)
	}
	if err := os.Rename(tmp, in.RunIDFile); err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "write run id: %v", err)
	}
	for {
		if _, err := os.Stat(in.ReleaseFile); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, wop.Errorf(wop.CodeDeadlineExceeded, "never released")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return map[string]attempt{"own": call(ctx, hs, "test.other", req.GetCall())}, nil
}

// forger names the holder's run in its calls, with its own token, none
// and a guessed one, on the family only the holder declared and on one
// both declared; and makes its own calls for comparison.
func forger(ctx context.Context, hs wophostv1.HostServicesClient, req *wophostv1.ExecuteRequest) (any, error) {
	var in struct {
		RunIDFile string `json:"runIdFile"`
	}
	if err := json.Unmarshal(req.GetInput(), &in); err != nil {
		return nil, wop.Errorf(wop.CodeValidation, "input: %v", err)
	}
	b, err := os.ReadFile(in.RunIDFile)
	if err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "read the holder's run id: %v", err)
	}
	holderRun := strings.TrimSpace(string(b))
	if holderRun == "" || holderRun == req.GetCall().GetRunId() {
		return nil, wop.Errorf(wop.CodeInternal, "no sibling run id to forge (%q)", holderRun)
	}
	own := req.GetCall()
	forged := func(token string) *wophostv1.CallContext {
		c := proto.Clone(own).(*wophostv1.CallContext)
		c.RunId, c.RunToken = holderRun, token
		c.Depth = 1
		return c
	}
	var guess [32]byte
	if _, err := rand.Read(guess[:]); err != nil {
		return nil, wop.Errorf(wop.CodeInternal, "guess a token: %v", err)
	}
	ownCall := proto.Clone(own).(*wophostv1.CallContext)
	ownCall.Depth = 1
	return map[string]any{
		"holderRunId":         holderRun,
		"own":                 call(ctx, hs, "test.echo", ownCall),
		"ownUndeclared":       call(ctx, hs, "test.other", ownCall),
		"siblingOwnToken":     call(ctx, hs, "test.other", forged(own.GetRunToken())),
		"siblingNoToken":      call(ctx, hs, "test.other", forged("")),
		"siblingGuessedToken": call(ctx, hs, "test.other", forged(hex.EncodeToString(guess[:]))),
		"siblingEcho":         call(ctx, hs, "test.echo", forged(own.GetRunToken())),
	}, nil
}
