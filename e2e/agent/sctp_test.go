package agent_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/netlab"
)

// The Go standard library has no SCTP; these helpers use one-to-one SCTP sockets
// (SOCK_STREAM, IPPROTO_SCTP) directly, IPv4 only.

// sctpSocket opens an SCTP socket inside h's namespace.
func sctpSocket(h *netlab.Host) (int, error) {
	fd := -1
	err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		return err
	})
	return fd, err
}

// sctpServe listens on port in pod and answers every association with "NAME ADDR:PORT\n", as
// the echo server does for TCP, until the test ends.
func sctpServe(t *testing.T, pod *netlab.Pod, port int) {
	t.Helper()
	fd, err := sctpSocket(&pod.Host)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Shutdown(fd, unix.SHUT_RDWR); unix.Close(fd) })
	go func() {
		for {
			c, sa, err := unix.Accept(fd)
			if err != nil {
				return
			}
			if in, ok := sa.(*unix.SockaddrInet4); ok {
				from := netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
				_, _ = unix.Write(c, []byte(pod.Name+" "+from.String()+"\n"))
			}
			unix.Close(c)
		}
	}()
}

// sctpRequest connects from h to dst and reads the server's line.
func sctpRequest(h *netlab.Host, dst netip.AddrPort) (netlab.Reply, error) {
	fd, err := sctpSocket(h)
	if err != nil {
		return netlab.Reply{}, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
		return netlab.Reply{}, fmt.Errorf("connecting to %s: %w", dst, err)
	}
	buf := make([]byte, 256)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return netlab.Reply{}, fmt.Errorf("reading from %s: %w", dst, err)
	}
	return netlab.ParseReply(string(buf[:n]))
}

func TestSCTP(t *testing.T) {
	e := newEnv(t)
	server := e.pod(e.node2, "sctp")
	if fd, err := sctpSocket(&server.Host); err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
			t.Skipf("this kernel cannot open SCTP sockets (%v): it is built without CONFIG_IP_SCTP "+
				"and cannot load the sctp module, so there is no SCTP endpoint to reach", err)
		}
		t.Fatal(err)
	} else {
		unix.Close(fd)
	}
	sctpServe(t, server, 8080)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sctp", Namespace: e.ns, Labels: map[string]string{"app": "sctp"}}}
	if _, err := shared.cluster.CreateReadyPod(e.ctx, pod, e.node2.Name, server.Addr, server.Addr6); err != nil {
		t.Fatal(err)
	}
	svc := e.service("sctp", "sctp", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = []corev1.ServicePort{{Name: "sctp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolSCTP}}
	})
	client := e.pod(e.node1, "client")
	for _, c := range []struct {
		from *netlab.Host
		dst  netip.AddrPort
	}{
		{&client.Host, addrPort(clusterIP(svc), 80)},
		{e.client, addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort)},
	} {
		e.eventually("SCTP to "+c.dst.String(), 30*time.Second, func() error {
			r, err := sctpRequest(c.from, c.dst)
			if err != nil {
				return err
			}
			if !strings.HasSuffix(r.Server, "-sctp") {
				return fmt.Errorf("answered by %q", r.Server)
			}
			return nil
		})
	}
}
