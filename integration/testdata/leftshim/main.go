// Command leftshim stands for a containerd shim that containerd lost
// track of: built as containerd-shim-runc-v2 and started with a shim's
// flags (-namespace NS -id ID -address ADDRESS), it serves nothing and
// waits for a signal, as such a shim does. It exits 0 on SIGTERM, the
// signal a shim shuts down on.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
}
