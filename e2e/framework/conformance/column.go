package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/nodes"
)

// Column is one service proxy the specs run against.
type Column struct {
	// Name heads the table's column.
	Name string
	// KubeProxy is kube-proxy's mode in a kube-proxy column; empty for Portico's agent.
	KubeProxy KubeProxyMode
	// Short is the column's name for -columns and ColumnByName.
	Short string
	// BGP: in Portico's column (or an Announcer column), the agents announce Pool by BGP to a
	// bird2 router, which installs each VIP with every announcing node as a next hop (ECMP),
	// instead of by L2.
	BGP bool
	// Announcer: in a kube-proxy column, Portico's agents run beside kube-proxy in
	// announce-only mode (agent.mode none) and announce Pool (by L2, or by BGP with BGP):
	// kube-proxy programs every Service, Portico only announces the VIPs.
	Announcer bool
	// LoadBalancersOnly runs only the selection's LoadBalancers specs (Selection.LoadBalancers).
	LoadBalancersOnly bool
	// IPv6 runs the column on a dual-stack cluster whose primary family is IPv6
	// (nodes.DualStackIPv6): e2e.test takes the family of its Services from the kubernetes
	// Service's ClusterIP, so every spec runs over IPv6; the pool has Pool6 besides Pool.
	IPv6 bool
}

// Families are the IP families of the column's cluster, the primary first.
func (c Column) Families() []corev1.IPFamily {
	if c.IPv6 {
		return nodes.DualStackIPv6
	}
	return nodes.IPv4Only
}

// The columns of the comparison.
var (
	PorticoColumn = Column{Name: "Portico", Short: "portico"}
	// PorticoBGPColumn runs the LoadBalancers specs with the VIPs routed by BGP and ECMP:
	// the router spreads the tester's flows over every node that announces a VIP, which
	// one L2 announcer cannot do.
	PorticoBGPColumn = Column{Name: "Portico BGP+ECMP", Short: "portico-bgp", BGP: true, LoadBalancersOnly: true}
	IPTablesColumn   = Column{Name: "kube-proxy iptables", Short: "iptables", KubeProxy: IPTables}
	NFTablesColumn   = Column{Name: "kube-proxy nftables", Short: "nftables", KubeProxy: NFTables}
	// The IPv6 columns: the same proxies on an IPv6-first dual-stack cluster.
	PorticoIPv6Column  = Column{Name: "Portico IPv6", Short: "portico-ipv6", IPv6: true}
	IPTablesIPv6Column = Column{Name: "kube-proxy iptables IPv6", Short: "iptables-ipv6", KubeProxy: IPTables, IPv6: true}
	NFTablesIPv6Column = Column{Name: "kube-proxy nftables IPv6", Short: "nftables-ipv6", KubeProxy: NFTables, IPv6: true}
	// PorticoBGPIPv6Column is PorticoBGPColumn on the IPv6-first cluster: bird peers with
	// every node over IPv4 and IPv6, each session carrying its family's VIPs.
	PorticoBGPIPv6Column = Column{Name: "Portico BGP+ECMP IPv6", Short: "portico-bgp-ipv6", BGP: true, LoadBalancersOnly: true, IPv6: true}
	// The announce-only columns: kube-proxy programs the Services, Portico's agent
	// (agent.mode none) announces the VIPs, by L2 beside kube-proxy's iptables mode and by
	// BGP+ECMP beside its nftables mode, so that both announcers and both kube-proxy modes are
	// covered; the LoadBalancers specs only (the Services specs are kube-proxy's own columns').
	IPTablesAnnouncerColumn = Column{Name: "kube-proxy iptables + Portico announcer (L2)", Short: "iptables-announcer", KubeProxy: IPTables, Announcer: true, LoadBalancersOnly: true}
	NFTablesAnnouncerColumn = Column{Name: "kube-proxy nftables + Portico announcer (BGP+ECMP)", Short: "nftables-announcer", KubeProxy: NFTables, Announcer: true, BGP: true, LoadBalancersOnly: true}
	Columns                 = []Column{PorticoColumn, PorticoBGPColumn, IPTablesColumn, NFTablesColumn, PorticoIPv6Column, PorticoBGPIPv6Column, IPTablesIPv6Column, NFTablesIPv6Column, IPTablesAnnouncerColumn, NFTablesAnnouncerColumn}
)

// ColumnByName finds a column by its Name or its Short name: portico, portico-bgp, iptables,
// nftables, portico-ipv6, portico-bgp-ipv6, iptables-ipv6, nftables-ipv6, iptables-announcer,
// nftables-announcer.
func ColumnByName(name string) (Column, error) {
	var shorts []string
	for _, c := range Columns {
		if strings.EqualFold(name, c.Name) || strings.EqualFold(name, c.Short) {
			return c, nil
		}
		shorts = append(shorts, c.Short)
	}
	return Column{}, fmt.Errorf("no column %q (%s)", name, strings.Join(shorts, ", "))
}

// ClusterNodes is the node count of every column's cluster: the specs need two schedulable
// nodes, "NodePort and HealthCheckNodePort ... ExternalTrafficPolicy changes" three.
const ClusterNodes = 3

// InstallProxy installs a column's service proxy (and the LoadBalancer implementation the
// LoadBalancer specs need) on a started cluster; it returns how the router reaches Pool.
type InstallProxy func(ctx context.Context, c *nodes.Cluster, col Column) (PoolRouting, error)

// ColumnOptions say how to run one column.
type ColumnOptions struct {
	Binaries  Binaries
	Images    Images
	Selection Selection
	// Dir receives the column's reports (a subdirectory per column).
	Dir   string
	Procs int
	// Install installs the service proxy; nil: kube-proxy columns only (InstallKubeProxy),
	// without a LoadBalancer implementation.
	Install InstallProxy
	Logf    func(string, ...any)
}

// RunColumn starts a cluster of real kubelets (ClusterNodes nodes in the column's families,
// CoreDNS, the lab's router for the tester), imports the images, installs the column's service proxy, adds the tester
// and runs the selection; the cluster is closed before it returns. Each column gets a fresh
// cluster, so that no proxy's leftovers meet the next one.
func RunColumn(ctx context.Context, col Column, o ColumnOptions) ColumnResult {
	res := ColumnResult{Column: col}
	begin := time.Now()
	c, err := nodes.Start(ctx, nodes.Options{Nodes: ClusterNodes, DNS: true, Router: true, IPFamilies: col.Families(), Logf: o.Logf})
	if c != nil {
		defer func() {
			if err := c.Close(); err != nil {
				o.Logf("conformance: closing the %s cluster: %v", col.Name, err)
			}
		}()
	}
	if err != nil {
		res.Err = fmt.Errorf("starting the cluster: %w", err)
		return res
	}
	for _, n := range c.Nodes {
		for _, img := range o.Images.All() {
			if err := n.ImportImage(ctx, img.Archive); err != nil {
				res.Err = err
				return res
			}
		}
	}
	routing := ViaEveryNode
	switch {
	case o.Install != nil:
		routing, err = o.Install(ctx, c, col)
	case col.KubeProxy != "":
		err = InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), o.Images.KubeProxy.Ref, col.KubeProxy, len(c.Nodes))
	default:
		err = fmt.Errorf("no installer for %s", col.Name)
	}
	if err != nil {
		res.Err = fmt.Errorf("installing %s: %w", col.Name, err)
		return res
	}
	tester, err := NewTester(ctx, c, routing)
	if err != nil {
		res.Err = err
		return res
	}
	res.Setup = time.Since(begin)
	focus := o.Selection.Focus
	if col.LoadBalancersOnly {
		focus = o.Selection.LoadBalancers
	}
	if col.IPv6 && !col.LoadBalancersOnly && !o.Selection.Exact {
		focus = "(" + focus + ")|(" + DualStackFocus + ")"
	}
	o.Logf("conformance: %s: cluster and installs ready after %s; running %s", col.Name, res.Setup.Round(time.Second), o.Selection.Name)
	run, err := Run(ctx, RunOptions{
		Binaries:   o.Binaries,
		Kubeconfig: c.ControlPlane.KubeconfigPath(),
		Tester:     tester,
		Nodes:      len(c.Nodes),
		Dir:        filepath.Join(o.Dir, strings.ReplaceAll(col.Name, " ", "-")),
		Procs:      o.Procs,
		Focus:      focus,
		Skip:       o.Selection.SkipFor(col.IPv6),
		Timeout:    o.Selection.Timeout,
	})
	res.Specs, res.SuiteFailures, res.Took, res.GinkgoExit, res.Err = run.Specs, run.SuiteFailures, run.Took, run.Exit, err
	res.Want = o.Selection.Want(col)
	// Kept beside the report for rendering the table later (the tool's -from).
	_ = os.WriteFile(filepath.Join(o.Dir, strings.ReplaceAll(col.Name, " ", "-"), "took"), []byte(fmt.Sprintf("%d %d\n", res.Took, res.Setup)), 0o644)
	return res
}
