package dbtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on loopback in front of a Postgres store, for tests
// of a database that stops answering (Freeze, as a Postgres stopped with
// SIGSTOP or a dead network) or that drops its connections (Cut, as a
// Postgres that stopped or restarted).
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
	cut    bool
	conns  map[net.Conn]bool
}

// ThroughProxy returns a proxy in front of the Postgres store at rawURL and
// the URL that reaches the store through it. The proxy closes when the test
// ends.
func ThroughProxy(t testing.TB, rawURL string) (*Proxy, string) {
	t.Helper()
	return ThroughProxyAt(t, "127.0.0.1", rawURL)
}

// ThroughProxyAt is ThroughProxy listening on ip, for any server a URL
// names (a store, an HTTP server): what reaches this network namespace
// at ip reaches the server listening on loopback.
func ThroughProxyAt(t testing.TB, ip, rawURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, thaw: make(chan struct{}), conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		p.Thaw()
		ln.Close()
		p.closeAll()
	})
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// forward connects c to the store, or resets it while the proxy is cut.
func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		reset(c)
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(c)
		return
	}
	if !p.track(c, s) {
		reset(c)
		s.Close()
		return
	}
	go p.pipe(s, c)
	p.pipe(c, s)
}

// track remembers a pair of connections, unless the proxy is cut.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

// pipe copies from src to dst, holding every chunk while frozen.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		frozen, thaw := p.frozen, p.thaw
		p.mu.Unlock()
		if frozen {
			<-thaw
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops passing bytes either way: connections stay open and nothing
// answers.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw passes bytes again, those held while frozen first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
		p.thaw = make(chan struct{})
	}
}

// Cut resets every connection through the proxy, and every new one until
// Restore: the store's side sees its connections reset or closed.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.closeAll()
}

// Restore lets new connections through again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// closeAll resets every connection through the proxy.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		reset(c)
	}
}

// reset closes c with a TCP reset rather than an orderly close.
func reset(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	c.Close()
}
