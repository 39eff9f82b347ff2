// Command exitsh stands in for a /bin/sh that cannot wait for a program:
// it exits at once with the status of the stub's refusal under bash.
package main

import "os"

func main() {
	os.Exit(121)
}
