package host

import (
	"slices"
	"testing"

	"github.com/wophost/wophost/sdk/tracing"
)

func TestCollectorPorts(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    *tracing.Settings
		want []uint16
	}{
		{"off", nil, nil},
		{"grpc with a port", &tracing.Settings{Endpoint: "127.0.0.1:14317", Protocol: tracing.ProtocolGRPC}, []uint16{14317}},
		{"grpc without a port", &tracing.Settings{Endpoint: "collector", Protocol: tracing.ProtocolGRPC}, []uint16{4317}},
		{"http without a port", &tracing.Settings{Endpoint: "collector", Protocol: tracing.ProtocolHTTP}, []uint16{4318}},
		{"http URL", &tracing.Settings{Endpoint: "http://collector:9411/v1/traces", Protocol: tracing.ProtocolHTTP}, []uint16{9411}},
		{"https URL without a port", &tracing.Settings{Endpoint: "https://collector/v1/traces", Protocol: tracing.ProtocolHTTP}, []uint16{443}},
		{"port out of range", &tracing.Settings{Endpoint: "collector:65536", Protocol: tracing.ProtocolGRPC}, nil},
	} {
		if got := collectorPorts(tc.t); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
