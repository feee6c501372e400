// Package install installs Portico on a cluster of real kubelets (e2e/framework/nodes) as a
// user does: its images, built here without Docker or a registry and imported on every node,
// and `helm install` of the chart deploy/chart/portico with Helm's Go packages (action.Install,
// server-side apply, releases stored as Secrets, as the helm CLI does).
//
// # API
//
//	r, err := install.Portico(ctx, cluster, install.Options{Pool: netip.MustParsePrefix("198.18.221.0/28")})
//	r := install.Must(t, cluster, opts)             // the same, failing t; Uninstall at cleanup
//	err = r.WaitReady(ctx)                           // agents Ready on every node, controller available
//	err = r.Stage(ctx, "e2e-next")                   // a tag's images imported on every node beforehand
//	err = r.Upgrade(ctx, "e2e-next", extraValues)    // helm upgrade to a new tag and/or values
//	err = r.Uninstall(ctx)                           // helm uninstall --wait --cascade foreground
//	err = r.Gone(ctx)                                // no pod of the release left
//	im, err := install.BuildImages(ctx, tag, logf)   // the three image archives of a tag
//	err = install.Import(ctx, cluster, im)           // ... imported on every node
//
// Options choose the agent or not (NoAgent: the controller alone, e.g. beside kube-proxy),
// the agent's proxy mode (iptables, nftables), the announcers and the AddressPool's
// announcement (Announce: l2, bgp), the pool's addresses, the loadBalancerClass and whether
// class-less Services are served too, the image tag, and any further chart values (Values,
// merged over the computed ones). Values returns what Portico installs with. With Registry,
// the images and the chart are pushed to a registry (internal/publish, what `make push` runs),
// the chart is pulled from oci:// and the kubelets pull the images (pull policy IfNotPresent):
// nothing is imported (the nodes trust the registry by nodes.Cluster.TrustRegistry).
//
// The values make the agent the cluster's service proxy (the nodes run no kube-proxy): it
// reaches the API server at its real address (agent.apiServer, the control plane's
// https://ADDRESS:PORT on the lab's root link), never through the kubernetes ClusterIP it
// programs itself; the controller runs the baremetal provider for the class and reaches the
// API server through that ClusterIP, as a user's pods do. Without Registry, images are named
// Repo/<binary>:TAG with pull policy Never: nothing can be pulled.
//
// # Images and their cache
//
// BuildImages builds with internal/images (what `make images` runs), stamped with the tag
// as the binaries' version. A build is kept under internal/prereq.CacheDir()/install-images/
// <source key>-<tag>, the source key (SourceKey) hashing the binaries' and the image builder's
// sources (gobuild.Key), and remembered per process: a second Portico or Upgrade with the same
// sources and tag builds nothing. The default tag is e2e-<source key>; an upgrade test asks
// for another tag, which builds binaries with another version and so images with other
// digests.
//
// # Uninstall
//
// Uninstall waits until Helm has deleted the release's objects and their pods. Each agent,
// stopping with its DaemonSet being deleted, withdraws its announcements and removes every
// chain and table it installed (nodeproxy/uninstall.go), on every node it ran on. The chart's
// CRDs stay (Helm never deletes CRDs), as do the Services users made.
package install
