package web

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/handlers"
)

// ParkingLot holds the connections of requests that wait for their task
// (GET /v1/tasks/{id}?wait=N), taken over from net/http once the request
// is read, and answers them. net/http keeps ~25 KB for each request it
// serves until the answer (the handler's goroutine, the connection's
// buffers and background reader, the request and its contexts); a parked
// connection keeps the connection, the task's watch, a timer, the headers
// the middleware set and a small goroutine that waits on them: 10,000
// waiters in a fraction of the memory (docs/benchmarks.md).
//
// An answer is written as net/http would write it (see writeAnswer), and
// the connection is then handed back to the server through Listener, with
// what its reader had buffered read first, for its next requests. The
// server must serve Listener too. At most maxParkedAnswering waiters read
// their task and answer at once.
//
// A parked connection is read while it waits, as net/http's background
// reader reads a connection whose request is being served: when its
// caller closes it (or sends more than parkedReadAhead bytes, which no
// HTTP client waiting for an answer does), it is closed at once, its watch
// stopped and its count given back, with nothing answered; what a caller
// pipelines behind its request is kept for the server's next read. Once
// shutdown closes, every parked request is answered with the task as it
// is and its connection closed (Connection: close), as net/http answers
// the waiters it serves while it shuts down; Wait waits for them. A
// request evicted (its Parked.Evicted closed: the connection limiter needs
// the connection) is answered the same way.
type ParkingLot struct {
	shutdown <-chan struct{}
	logger   *slog.Logger
	// answering holds a slot for each waiter reading and answering.
	answering chan struct{}
	// conns are the answered connections, to Listener's Accept.
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once

	// answerTime bounds the writing of an answer (parkedAnswerTime).
	answerTime time.Duration

	mu    sync.Mutex
	count int // parked requests, until their answers are written
	// none, when not nil, is closed when count comes to 0, for Wait.
	none chan struct{}
}

// maxParkedAnswering is how many parked waiters read their task and write
// their answer at once (see handlers' maxAnswering).
const maxParkedAnswering = 32

// parkedAnswerTime bounds the writing of a parked request's answer.
const parkedAnswerTime = 30 * time.Second

// parkedReadAhead bounds what a parked connection's reader keeps of what
// its caller sends while it waits (a pipelined request); past it, the
// connection is closed.
const parkedReadAhead = 64 << 10

// NewParkingLot returns a parking lot whose waiters are answered when
// shutdown closes (nil: never). Its failures are logged to logger.
func NewParkingLot(shutdown <-chan struct{}, logger *slog.Logger) *ParkingLot {
	if logger == nil {
		logger = slog.Default()
	}
	return &ParkingLot{
		shutdown: shutdown, logger: logger,
		answering:  make(chan struct{}, maxParkedAnswering),
		conns:      make(chan net.Conn),
		closed:     make(chan struct{}),
		answerTime: parkedAnswerTime,
	}
}

// parkedConn is a parked request.
type parkedConn struct {
	handlers.Parked
	conn net.Conn
	// buffered is what the server had read of the connection past the
	// request: a pipelined request, read first once it is handed back.
	buffered []byte
	// header is the answer's header as the middleware set it.
	header http.Header
	// gone is closed by the connection's reader (readCaller) when the
	// caller closed the connection; readDone once the reader has stopped.
	// readAhead is what it read meanwhile, the reader's until readDone.
	gone, readDone chan struct{}
	readAhead      []byte
}

// Park takes over w's connection and answers it when p's wait ends; see
// handlers.Parker. It parks only a GET without a body over HTTP/1.1 that
// keeps its connection, and nothing once the lot is closed or shutting
// down.
func (l *ParkingLot) Park(w http.ResponseWriter, r *http.Request, p handlers.Parked) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || r.Close || r.Method != http.MethodGet ||
		r.ContentLength != 0 || len(r.TransferEncoding) > 0 || l.stopping() {
		return false
	}
	header := w.Header().Clone()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	pc := &parkedConn{Parked: p, conn: conn, header: header}
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		pc.buffered = bytes.Clone(b)
	}
	// A connection handed back and parked again is unwrapped, so that
	// wrappers do not pile up on a keep-alive connection.
	if rc, ok := conn.(*resumedConn); ok {
		pc.conn, pc.buffered = rc.Conn, append(pc.buffered, rc.buffered...)
	}
	// The server's deadlines were for the request.
	_ = pc.conn.SetDeadline(time.Time{})
	pc.gone, pc.readDone = make(chan struct{}), make(chan struct{})
	l.mu.Lock()
	l.count++
	l.mu.Unlock()
	go l.readCaller(pc)
	go l.wait(pc)
	return true
}

// readCaller reads p's connection while it is parked, keeping what the
// caller sends (up to parkedReadAhead), until the caller closes it, which
// closes p.gone, or stopReading ends the read.
func (l *ParkingLot) readCaller(p *parkedConn) {
	defer close(p.readDone)
	var first [1]byte
	buf := first[:]
	for {
		n, err := p.conn.Read(buf)
		p.readAhead = append(p.readAhead, buf[:n]...)
		if len(p.readAhead) > parkedReadAhead {
			close(p.gone)
			return
		}
		if n > 0 && len(buf) == 1 {
			// Something is pipelined: read it in larger steps.
			buf = make([]byte, 4096)
		}
		if err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				close(p.gone)
			}
			return
		}
	}
}

// stopReading ends readCaller's read of p, before p is answered, and
// reports whether the caller is still there.
func stopReading(p *parkedConn) bool {
	_ = p.conn.SetReadDeadline(time.Unix(1, 0))
	<-p.readDone
	_ = p.conn.SetReadDeadline(time.Time{})
	select {
	case <-p.gone:
		return false
	default:
		return true
	}
}

// Parked returns how many requests are parked.
func (l *ParkingLot) Parked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// Wait waits until every parked request is answered, or until ctx ends.
func (l *ParkingLot) Wait(ctx context.Context) {
	for {
		l.mu.Lock()
		if l.count == 0 {
			l.mu.Unlock()
			return
		}
		if l.none == nil {
			l.none = make(chan struct{})
		}
		none := l.none
		l.mu.Unlock()
		select {
		case <-none:
		case <-ctx.Done():
			return
		}
	}
}

// stopping reports whether the server is shutting down or the lot's
// listener is closed: answered connections are closed then.
func (l *ParkingLot) stopping() bool {
	select {
	case <-l.shutdown:
		return true
	case <-l.closed:
		return true
	default:
		return false
	}
}

// wait answers p once its wait ends. It waits on a goroutine of its own,
// whose stack stays small: the reading and the answering are done on
// another, which reads and encodes in one of the lot's answering slots,
// and writes after it has given the slot back, so that callers slow to
// read their answers keep no one else's waiting.
func (l *ParkingLot) wait(p *parkedConn) {
	defer p.Stop()
	timer := time.NewTimer(p.Wait)
	defer timer.Stop()
	answered := make(chan bool, 1)
	for {
		last, evicted := false, false
		select {
		case <-p.Wake:
		case <-timer.C:
			last = true
		case <-l.shutdown:
			last = true
		case <-p.Evicted:
			last, evicted = true, true
		case <-p.gone:
			l.callerLeft(p)
			return
		}
		l.answering <- struct{}{}
		go l.answer(p, last, evicted, answered)
		done := <-answered
		<-l.answering
		if done {
			return
		}
	}
}

// callerLeft closes the connection of p, whose caller closed it, and
// counts p out.
func (l *ParkingLot) callerLeft(p *parkedConn) {
	<-p.readDone
	p.conn.Close()
	p.Answered(handlers.StatusCallerLeft, 0)
	l.leave()
}

// answer reads p's task and answers it, unless the task is not final and
// last is false; it sends whether it answers to answered once the answer
// is made, before writing it (the answering slot is given back then). A
// request answered leaves the lot's count once its answer is written. An
// evicted request's connection is closed after its answer.
func (l *ParkingLot) answer(p *parkedConn, last, evicted bool, answered chan<- bool) {
	sent := false
	defer func() {
		if v := recover(); v != nil {
			l.logger.Error("parked request", "panic", v)
			p.conn.Close()
			if !sent {
				p.Answered(http.StatusInternalServerError, 0)
				answered <- true
			}
			l.leave()
		}
	}()
	a, ok := p.Answer(last)
	if !ok {
		answered <- false
		return
	}
	if !stopReading(p) {
		sent = true
		answered <- true
		l.callerLeft(p)
		return
	}
	closing := l.stopping() || evicted
	out := writeAnswer(p.header, a, closing)
	sent = true
	answered <- true
	_ = p.conn.SetWriteDeadline(time.Now().Add(l.answerTime))
	_, err := p.conn.Write(out)
	p.Answered(a.Status, len(a.Body))
	l.leave()
	if err != nil || closing {
		p.conn.Close()
		return
	}
	_ = p.conn.SetWriteDeadline(time.Time{})
	l.handBack(&resumedConn{Conn: p.conn, buffered: append(p.buffered, p.readAhead...)})
}

// leave counts a parked request answered, for Wait.
func (l *ParkingLot) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count--
	if l.count == 0 && l.none != nil {
		close(l.none)
		l.none = nil
	}
}

// handBack gives an answered connection to the server, through Listener,
// or closes it when the listener is closed.
func (l *ParkingLot) handBack(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

// bufferBeforeChunking is net/http's: an answer whose body is larger is
// sent chunked, unless its handler set Content-Length.
const bufferBeforeChunking = 2048

// writeAnswer returns the bytes net/http writes for a (with header, the
// headers the middleware set) answering an HTTP/1.1 GET whose handler
// writes its body in one Write: the status line, the header sorted, then
// Date, Content-Length or chunking, and Connection: close when closing.
func writeAnswer(header http.Header, a handlers.Answer, closing bool) []byte {
	for k, v := range a.Header {
		header[k] = v
	}
	var b bytes.Buffer
	b.Grow(512 + len(a.Body))
	text := http.StatusText(a.Status)
	if text == "" {
		text = "status code " + strconv.Itoa(a.Status)
	}
	b.WriteString("HTTP/1.1 " + strconv.Itoa(a.Status) + " " + text + "\r\n")
	chunked := false
	_, hasLength := header["Content-Length"]
	if closing {
		delete(header, "Connection")
	}
	_ = header.Write(&b)
	if _, ok := header["Date"]; !ok {
		b.WriteString("Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n")
	}
	if !hasLength {
		if len(a.Body) <= bufferBeforeChunking {
			b.WriteString("Content-Length: " + strconv.Itoa(len(a.Body)) + "\r\n")
		} else {
			chunked = true
		}
	}
	if closing {
		b.WriteString("Connection: close\r\n")
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	b.WriteString("\r\n")
	if !chunked {
		b.Write(a.Body)
		return b.Bytes()
	}
	b.WriteString(strconv.FormatInt(int64(len(a.Body)), 16) + "\r\n")
	b.Write(a.Body)
	b.WriteString("\r\n0\r\n\r\n")
	return b.Bytes()
}

// Listener returns the listener of the answered connections, which the
// server serves too (http.Server.Serve), for their next requests. Closing
// it (the server's Shutdown does) closes the connections answered after.
func (l *ParkingLot) Listener() net.Listener { return (*lotListener)(l) }

// lotListener is a ParkingLot's Listener.
type lotListener ParkingLot

func (ln *lotListener) Accept() (net.Conn, error) {
	select {
	case c := <-ln.conns:
		return c, nil
	case <-ln.closed:
		return nil, net.ErrClosed
	}
}

func (ln *lotListener) Close() error {
	ln.closeOnce.Do(func() { close(ln.closed) })
	return nil
}

func (ln *lotListener) Addr() net.Addr { return lotAddr{} }

// lotAddr is the address of a ParkingLot's Listener.
type lotAddr struct{}

func (lotAddr) Network() string { return "parked" }
func (lotAddr) String() string  { return "parked" }

// resumedConn is a connection handed back after a parked answer: it reads
// what the server had buffered of it first.
type resumedConn struct {
	net.Conn
	buffered []byte
}

func (c *resumedConn) Read(p []byte) (int, error) {
	if len(c.buffered) == 0 {
		return c.Conn.Read(p)
	}
	n := copy(p, c.buffered)
	c.buffered = c.buffered[n:]
	if len(c.buffered) == 0 {
		c.buffered = nil
	}
	return n, nil
}

// NetConn returns the connection c wraps.
func (c *resumedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite shuts down the writing side when the connection can (see
// limitedConn.CloseWrite).
func (c *resumedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
