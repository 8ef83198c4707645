// Command sockecho is the other end of the benchmarks' physical floor: it
// connects to the unix socket named by its argument and writes back every
// byte it reads, until the connection closes. One write and one read on
// each side is the least a round trip between two processes can cost.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sockecho SOCKET")
		os.Exit(2)
	}
	conn, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sockecho: %v\n", err)
		os.Exit(1)
	}
	defer conn.Close()
	// io.Copy reads into one buffer and writes each read back at once.
	if _, err := io.Copy(conn, conn); err != nil {
		fmt.Fprintf(os.Stderr, "sockecho: %v\n", err)
		os.Exit(1)
	}
}
