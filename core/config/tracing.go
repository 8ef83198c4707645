package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wophost/wophost/sdk/tracing"
)

// DefaultServiceName is the service.name of the host's spans.
const DefaultServiceName = "wophost"

// Tracing holds the OpenTelemetry settings of the host block's tracing
// block. Tracing is off when the block is absent.
type Tracing struct {
	tracing.Settings
	// ServiceName is the host's service.name; plugins and packs use their
	// own names.
	ServiceName string

	DefRange hcl.Range
}

type rawTracing struct {
	Endpoint    *hcl.Attribute `hcl:"endpoint"`
	Protocol    *hcl.Attribute `hcl:"protocol"`
	Insecure    *hcl.Attribute `hcl:"insecure"`
	Headers     *hcl.Attribute `hcl:"headers"`
	SampleRatio *hcl.Attribute `hcl:"sample_ratio"`
	ServiceName *hcl.Attribute `hcl:"service_name"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

func isProtocol(s string) bool { return s == tracing.ProtocolGRPC || s == tracing.ProtocolHTTP }

// tracing validates the host block's tracing block, if any.
func (d *decoder) tracing(blocks []*rawTracing) *Tracing {
	if len(blocks) == 0 {
		return nil
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate tracing block",
			"A tracing block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	r := blocks[0]
	t := &Tracing{
		Settings:    tracing.Settings{Protocol: tracing.ProtocolGRPC, SampleRatio: 1},
		ServiceName: DefaultServiceName,
		DefRange:    r.DefRange,
	}
	if s, ok := d.stringAttr(r.Endpoint); ok {
		t.Endpoint = s
	} else if r.Endpoint == nil {
		d.errorf(r.DefRange, "Missing required argument",
			"The argument \"endpoint\" is required in a tracing block: the OTLP receiver's host:port (grpc) or URL (http/protobuf).")
	}
	if s, ok := d.oneOfAttr(r.Protocol, isProtocol, `"grpc" or "http/protobuf"`); ok {
		t.Protocol = s
	}
	d.attr(r.Insecure, &t.Insecure)
	var headers map[string]string
	if d.attr(r.Headers, &headers) {
		for k := range headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				d.errorf(r.Headers.Expr.Range(), "Invalid header name", "headers has the name %q, which is not a valid HTTP header name.", k)
			}
		}
		t.Headers = headers
	}
	var ratio float64
	if d.attr(r.SampleRatio, &ratio) {
		if ratio < 0 || ratio > 1 {
			d.errorf(r.SampleRatio.Expr.Range(), "Invalid sample_ratio", "sample_ratio must be between 0 and 1; got %g.", ratio)
		} else {
			t.SampleRatio = ratio
		}
	}
	if s, ok := d.stringAttr(r.ServiceName); ok {
		t.ServiceName = s
	}
	return t
}
