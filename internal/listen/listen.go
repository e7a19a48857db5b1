package listen

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// InUseError is an address the flag named that another process already
// listens on.
type InUseError struct {
	// Flag is the flag that chose the address, without its dashes.
	Flag string
	// Address is the address as the flag gave it.
	Address string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("--%s %s: the address is already in use (another fleetlift running?)", e.Flag, e.Address)
}

// TCP listens on addr, which flag chose.
func TCP(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if taken := Explain(flag, addr, err); taken != err {
			return nil, taken
		}
		return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
	}
	return ln, nil
}

// Explain is err, from listening on addr for flag (or from starting what
// listens there), as the user should read it: an *InUseError when the
// address is taken, else err itself.
func Explain(flag, addr string, err error) error {
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		return &InUseError{Flag: flag, Address: addr}
	}
	return err
}
