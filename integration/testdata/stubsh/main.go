// Command stubsh stands in for /bin/sh in a static test image: it does
// what oci.StubScript does, and nothing else. Called as
// "/bin/sh -c SCRIPT sh ARGS...", it waits for one line on its standard
// input (none: it exits 0), then execs ARGS with /dev/null as standard
// input and the environment it got less PWD, OLDPWD and SHLVL.
package main

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 5 || os.Args[1] != "-c" {
		os.Exit(2)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(0)
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil || syscall.Dup2(null, 0) != nil {
		os.Exit(126)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "PWD" || k == "OLDPWD" || k == "SHLVL"
	})
	args := os.Args[4:]
	syscall.Exec(args[0], args, env)
	os.Exit(127)
}
