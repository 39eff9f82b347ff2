// Command hello is the only file of the image the pull test serves from
// its loopback registry: a static binary that needs no interpreter.
package main

import "fmt"

func main() {
	fmt.Println("pulled and ran")
}
