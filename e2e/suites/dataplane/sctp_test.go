package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// TestSCTPChecksum checks the packet builder's CRC32c and its byte order against the test
// vectors of RFC 3720 section B.4: iSCSI uses the CRC32c of RFC 3309, as SCTP does, and the RFC
// lists the CRC bytes in the order they are sent.
func TestSCTPChecksum(t *testing.T) {
	fill := func(f func(i int) byte) []byte {
		b := make([]byte, 32)
		for i := range b {
			b[i] = f(i)
		}
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		want []byte
	}{
		{"zeros", fill(func(int) byte { return 0 }), []byte{0xaa, 0x36, 0x91, 0x8a}},
		{"ones", fill(func(int) byte { return 0xff }), []byte{0x43, 0xab, 0xa8, 0x62}},
		{"incrementing", fill(func(i int) byte { return byte(i) }), []byte{0x4e, 0x79, 0xdd, 0x46}},
		{"decrementing", fill(func(i int) byte { return byte(31 - i) }), []byte{0x5c, 0xdb, 0x3f, 0x11}},
	} {
		got := binary.LittleEndian.AppendUint32(nil, crc32c(c.data))
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: CRC32c bytes % x, want % x", c.name, got, c.want)
		}
	}
	// The 32 zero bytes are also an SCTP packet with a zero checksum field.
	if got := binary.LittleEndian.AppendUint32(nil, sctpChecksum(make([]byte, 32))); !bytes.Equal(got, []byte{0xaa, 0x36, 0x91, 0x8a}) {
		t.Errorf("checksum of 32 zero bytes: % x", got)
	}

	pkt := sctpInit(40000, 80, 0x01020304)
	if !sctpChecksumOK(pkt) {
		t.Fatalf("INIT % x: invalid checksum", pkt)
	}
	want := []byte{
		0x9c, 0x40, 0x00, 0x50, // ports 40000 -> 80
		0, 0, 0, 0, // verification tag
	}
	if !bytes.Equal(pkt[:8], want) || pkt[12] != sctpInitType || pkt[14] != 0 || pkt[15] != sctpInitLen ||
		binary.BigEndian.Uint32(pkt[16:20]) != 0x01020304 || len(pkt) != sctpHdrLen+sctpInitLen {
		t.Errorf("INIT % x", pkt)
	}
	for i := range pkt {
		bad := append([]byte(nil), pkt...)
		bad[i] ^= 0x10
		if sctpChecksumOK(bad) {
			t.Errorf("checksum still valid with byte %d changed", i)
		}
	}
}

// in is e for subtest t, so that its helpers fail t rather than the parent test.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// TestSCTP proves SCTP Services with real packets. This kernel has no SCTP sockets, so the
// client sends a hand-built INIT over a raw socket (see sctp_raw_test.go) and the backend reads
// what arrives over another; netfilter tracks and NATs SCTP all the same.
func TestSCTP(t *testing.T) { forModes(t, testSCTP) }

func testSCTP(t *testing.T) {
	e := newEnv(t)
	server := e.pod(e.node2, "sctp")
	if fd, err := rawSocket(&server.Host, protoSCTP); err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) ||
			errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipf("cannot send or receive SCTP packets: %v", err)
		}
		t.Fatal(err)
	} else {
		unix.Close(fd)
	}
	sniffer := sniffSCTP(t, &server.Host)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sctp", Namespace: e.ns, Labels: map[string]string{"app": "sctp"}}}
	if _, err := shared.cluster.CreateReadyPod(e.ctx, pod, e.node2.Name, server.Addr, server.Addr6); err != nil {
		t.Fatal(err)
	}
	sctpPort := func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = []corev1.ServicePort{{Name: "sctp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolSCTP}}
	}
	svc := e.service("sctp", "sctp", sctpPort)
	svcLocal := e.service("sctp-local", "sctp", sctpPort, local)
	client := e.pod(e.node1, "client")
	backend := netip.AddrPortFrom(server.Addr, 8080)

	// reach sends INITs from h to dst until one arrives at the backend, and checks that it was
	// DNATed to the pod's targetPort, came from src (the source port too, unless masqueraded to
	// a node address with a fresh port) and still carries a valid CRC32c after the rewrite.
	reach := func(t *testing.T, h *netlab.Host, dst netip.AddrPort, src netip.Addr, keepsPort bool) {
		t.Helper()
		e := e.in(t)
		var a sctpAssoc
		var got sctpArrival
		e.eventually(fmt.Sprintf("SCTP INIT %s -> %s arrives at %s", h.Name, dst, server.Name), 30*time.Second, func() error {
			a = newSCTPAssoc()
			if err := sendSCTPInit(h, dst, a); err != nil {
				return err
			}
			var ok bool
			var err error
			if got, ok, err = sniffer.wait(a.Tag, time.Second); err != nil {
				t.Fatalf("reading SCTP in %s: %v", server.Name, err)
			} else if !ok {
				return errors.New("nothing arrived")
			}
			return nil
		})
		t.Logf("INIT %s:%d -> %s arrived as %s -> %s", h.Addr, a.SrcPort, dst, got.Src, got.Dst)
		if got.Dst != backend {
			t.Errorf("arrived at %s, want the pod's targetPort %s", got.Dst, backend)
		}
		if got.Src.Addr() != src || keepsPort && got.Src.Port() != a.SrcPort {
			t.Errorf("arrived from %s, want %s (port %d kept: %v)", got.Src, src, a.SrcPort, keepsPort)
		}
		if got.VTag != 0 {
			t.Errorf("verification tag %#x, want 0", got.VTag)
		}
		if !got.ChecksumOK {
			t.Error("arrived with an invalid CRC32c: the NAT rewrite did not recompute it")
		}
	}

	t.Run("ClusterIP from a pod on another node", func(t *testing.T) {
		reach(t, &client.Host, addrPort(clusterIP(svc), 80), client.Addr, true)
	})
	t.Run("NodePort from a client", func(t *testing.T) {
		// externalTrafficPolicy Cluster, backend on the other node: masqueraded to node1.
		reach(t, e.client, addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort), e.node1.Addr, false)
	})
	t.Run("NodePort with externalTrafficPolicy Local", func(t *testing.T) {
		reach(t, e.client, addrPort(e.node2.Addr, svcLocal.Spec.Ports[0].NodePort), e.client.Addr, true)
	})

	t.Run("no ready endpoint", func(t *testing.T) {
		// The Service selects one pod, which is not Ready: its endpoint is listed but must get
		// nothing, and the agent rejects the INIT with ICMP port unreachable.
		e := e.in(t)
		idle := e.pod(e.node2, "sctp-idle")
		idleSniffer := sniffSCTP(t, &idle.Host)
		p, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sctp-idle", Namespace: e.ns, Labels: map[string]string{"app": "sctp-idle"}},
			Spec:       corev1.PodSpec{NodeName: e.node2.Name, Containers: []corev1.Container{{Name: "app", Image: "portico.invalid/none"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := shared.cluster.SetPodReady(e.ctx, p, false, idle.Addr, idle.Addr6); err != nil {
			t.Fatal(err)
		}
		none := e.service("sctp-none", "sctp-idle", sctpPort)
		e.eventually("the EndpointSlice lists the unready endpoint", 30*time.Second, func() error {
			s, err := e.cs.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=sctp-none"})
			if err != nil {
				return err
			}
			for _, sl := range s.Items {
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
						return nil
					}
				}
			}
			return fmt.Errorf("slices %+v", s.Items)
		})
		var tags []uint32
		for _, c := range []struct {
			name string
			from *netlab.Host
			dst  netip.AddrPort
		}{
			{"ClusterIP from a pod", &client.Host, addrPort(clusterIP(none), 80)},
			{"NodePort from a client", e.client, addrPort(e.node2.Addr, none.Spec.Ports[0].NodePort)},
		} {
			e.eventually(c.name+": ICMP port unreachable for "+c.dst.String(), 30*time.Second, func() error {
				a := newSCTPAssoc()
				tags = append(tags, a.Tag)
				u, err := awaitSCTPUnreachable(c.from, c.dst, a, time.Second)
				if err != nil {
					return err
				}
				if u.Code != 3 {
					return fmt.Errorf("ICMP unreachable code %d from %s, want 3 (port unreachable)", u.Code, u.From)
				}
				t.Logf("%s: INIT to %s rejected with ICMP port unreachable from %s", c.name, c.dst, u.From)
				return nil
			})
		}
		time.Sleep(500 * time.Millisecond)
		for _, tag := range tags {
			if a, ok, err := idleSniffer.wait(tag, 0); err != nil {
				t.Fatal(err)
			} else if ok {
				t.Errorf("INIT %#x reached the unready pod: %+v", tag, a)
			}
			if a, ok, _ := sniffer.wait(tag, 0); ok {
				t.Errorf("INIT %#x reached the other Service's pod: %+v", tag, a)
			}
		}
	})
}
