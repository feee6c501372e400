// Package moto runs moto's AWS emulator (PyPI moto[server]==5.2.5, moto_server) on
// 127.0.0.1 for tests of the AWS provider, seeds it with a cluster's VPC, subnets, nodes and
// certificates, counts the API calls made, lists what is left by ownership tags, and injects
// throttling and dropped connections through a proxy.
//
// # Usage
//
//	func TestMain(m *testing.M) { moto.Main(m) }
//
//	func TestNLB(t *testing.T) {
//		srv := moto.Shared(t) // one server per test binary, reset for this test
//		f := srv.Seed(t, moto.SeedOptions{Cluster: "c1", AZs: 2, Nodes: 3})
//		cfg := srv.AWSConfig(ctx) // or srv.Proxy(t).AWSConfig(ctx) to inject faults
//		srv.Record(t)
//		// ... run the provider with cfg, f.ProviderNodes() (or f.KubeNodes() in a cluster),
//		//     f.Certificates[0].ARN ...
//		calls := srv.Calls(t)          // per operation; calls.Writes() must be empty on a no-op resync
//		inv := srv.Owned(t, "c1")      // everything tagged kubernetes.io/cluster/c1=owned
//		if d := inv.Duplicates(); len(d) > 0 { t.Errorf("duplicates: %v", d) }
//		// ... delete ...
//		if inv := srv.Owned(t, "c1"); len(inv) > 0 { t.Errorf("leaked:\n%s", inv) }
//	}
//
// Start(t) gives a test its own server instead. Binaries started by a test (portico-controller,
// portico-ccm) reach the server through Server.Env. Outside a test (the demo, e2e/tools/demo
// -provider=aws) StartServer, SeedContext and OwnedContext return errors instead of failing a
// test; LoadBalancers, LoadBalancerByDNS and SecurityGroups read what moto holds (listeners,
// target groups and their instances, attributes, rules, tags) for the demo to show and check
// and for e2e/suites/aws to compare.
//
// # Prerequisite
//
// moto_server is $PORTICO_MOTO_SERVER, else <cache>/moto-5.2.5/bin/moto_server, a virtualenv
// made by `make prereqs`; internal/prereq decides where the cache is ($PORTICO_CACHE, else
// $XDG_CACHE_HOME/portico, else ~/.cache/portico). Start and Shared fail the test, naming that
// command, when it is missing or its Python reports a moto other than 5.2.5.
//
// # Processes and files
//
// Each server runs in its own process group with Pdeathsig=SIGKILL, in a directory
// $TMPDIR/portico-moto-<test pid>-* holding its log, pid file and recorder file. Stop (a
// t.Cleanup of Start, or Main for Shared) terminates it and removes the directory; the next
// start kills servers of dead test processes (recognised by PORTICO_MOTO_DIR in their
// environment) and removes their directories.
//
// # What it counts
//
// Calls reads moto's recorder (/moto-api/recorder/...): one entry per HTTP request, SDK retries
// included, named by service (ec2, elb for Classic ELB, elbv2, acm) and action. The harness's
// own requests (Seed, Owned, AddNode) carry app/portico-moto-harness in their User-Agent and
// are left out. Requests the proxy faults never reach moto: Proxy.Calls counts those.
//
// Owned lists security groups and EIPs (by tag filter), Classic ELBs, ELBv2 load balancers and
// target groups (by their tags) tagged kubernetes.io/cluster/<cluster>=owned, plus the
// listeners of those load balancers; it leaves out what Seed created (the node security group
// is tagged owned, as on EKS).
//
// # Fault injection
//
// moto has none. Proxy is a reverse proxy on 127.0.0.1 that, per Rule, answers with the
// service's throttling error in its protocol (EC2: HTTP 503 RequestLimitExceeded, as AWS does
// for EC2; Classic ELB/ELBv2: HTTP 400 Throttling; JSON services: ThrottlingException) or
// closes the connection, for the next N matching calls or with a seeded probability; OnCall
// lets a test act (e.g. kill the controller) at a chosen call.
//
// # Measured (moto 5.2.5, aws-sdk-go-v2 v1.47.7, 2 cores)
//
//   - Start: moto_server answers in about 2 s; the first EC2 call then takes about 4 s (backend
//     load), later ones milliseconds. Reset takes about 0.4 s; Seed with 3 AZs and 3 nodes 0.5 s.
//   - EC2 has a default VPC (172.31.0.0/16) with one untagged default subnet per AZ (6 in
//     us-east-1), recreated after every reset: filter subnets by tags or VPC, never take "all".
//   - /moto-api/reset does not stop or clear the recorder (Server.Reset does both); the
//     recorder writes to moto's working directory unless MOTO_RECORDER_FILEPATH is set.
//   - Duplicate NLB names are accepted (cloud.md), but a duplicate target-group name is refused
//     with DuplicateTargetGroupName, as on AWS.
//   - RunInstances accepts TagSpecifications and gives instances private DNS names
//     ip-a-b-c-d.ec2.internal and addresses from the subnet (from .4).
//   - SDK, through the proxy: the standard retryer retries RequestLimitExceeded, Throttling,
//     ThrottlingException and dropped connections ("request send failed ... EOF"); with its
//     default backoff 3 throttles cost 4.5 to 8.8 s (jittered; three runs). Its client-side retry quota (500 tokens, 5 per
//     retry) runs out after 100 retries on one client and then fails calls at once with "retry
//     quota exceeded" until successes refill it: fault-heavy tests and long throttling storms
//     need a retryer without that quota (ratelimit.None) or fresh clients.
package moto
