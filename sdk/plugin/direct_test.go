package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// A plugin serves a direct channel when the host asks, unless it is
// RoutedOnly; one whose channel cannot open is still configured, and
// reached through the host.
func TestConfigureOpensTheDirectChannel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		routedOnly bool
		dir        string
		want       bool
	}{
		{"served", false, t.TempDir(), true},
		{"routed only", true, t.TempDir(), false},
		{"socket path too long", false, t.TempDir() + "/" + strings.Repeat("d", 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{Name: "p", Version: "1", Families: []*Family{{Name: "acme.p", Methods: map[string]Handler{}}}, RoutedOnly: tc.routedOnly}
			s := newServer(p, nil, hclog.NewNullLogger(), wire.DefaultMaxMessageBytes, noop.NewTracerProvider().Tracer(tracerName))
			if s.direct != nil {
				t.Cleanup(s.direct.Close)
			}
			desc, err := s.Describe(context.Background(), &wophostv1.DescribeRequest{})
			if err != nil || desc.GetDirectChannel() != !tc.routedOnly {
				t.Fatalf("Describe: direct_channel %v, %v", desc.GetDirectChannel(), err)
			}
			resp, err := s.Configure(context.Background(), &wophostv1.ConfigureRequest{
				Config:        []byte(`{}`),
				DirectChannel: &wophostv1.DirectChannelSettings{GrantKey: direct.NewKey(), SocketDir: tc.dir},
			})
			if err != nil || len(resp.GetDiagnostics()) > 0 {
				t.Fatalf("Configure: %v %v", resp.GetDiagnostics(), err)
			}
			if got := resp.GetDirectChannel().GetAddress() != ""; got != tc.want {
				t.Fatalf("direct channel served %v, want %v", got, tc.want)
			}
		})
	}
}
