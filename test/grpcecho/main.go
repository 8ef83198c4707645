// Command grpcecho is the other end of the benchmarks' gRPC floor: it
// serves one unary method, /wophost.bench.Echo/Echo, that answers the
// bytes it is sent, on the unix socket named by its argument, and prints
// "ready" on stdout once it listens. It runs grpc-go with the flow-control
// windows and stream workers of the host's and plugins' connections but
// without TLS and without any of the host's own code, so a round trip to
// it is the least one gRPC hop costs between two processes here.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoService describes the echo method for grpc.Server.RegisterService.
var echoService = grpc.ServiceDesc{
	ServiceName: "wophost.bench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, _ context.Context, decode func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := decode(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcecho SOCKET")
		os.Exit(2)
	}
	ln, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "grpcecho: %v\n", err)
		os.Exit(1)
	}
	srv := grpc.NewServer(
		grpc.StaticStreamWindowSize(1<<20), grpc.StaticConnWindowSize(4<<20),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	)
	srv.RegisterService(&echoService, struct{}{})
	fmt.Println("ready")
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "grpcecho: %v\n", err)
		os.Exit(1)
	}
}
