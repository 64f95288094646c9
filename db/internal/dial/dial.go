// Package dial opens network connections wrapped in a connection of the
// caller's kind, through the three dial methods Postgres drivers ask of a
// dialer (lib/pq's Dialer and DialerContext). The store uses it for
// connections that give up on an answer, the listener for connections whose
// reads time out.
package dial

import (
	"context"
	"net"
	"time"
)

// Dialer dials connections and hands each to Wrap before returning it.
type Dialer struct {
	// Wrap returns the connection the caller uses in place of the one
	// dialled.
	Wrap func(net.Conn) net.Conn

	d net.Dialer
}

// Dial dials address on network and returns the wrapped connection.
func (d Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialTimeout is Dial that gives up after timeout.
func (d Dialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

// DialContext is Dial that gives up when ctx is done.
func (d Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return d.Wrap(c), nil
}
