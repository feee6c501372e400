// Package aws is the end-to-end suite of the AWS provider: the real portico-controller and
// portico-ccm binaries, built by the tests, run against a real control plane (e2e/framework/cluster) and
// moto's AWS emulator (e2e/framework/moto) seeded with a VPC, tagged subnets, instances and certificates,
// with Nodes whose spec.providerID names those instances. The tests play kubelet (they write
// the Nodes) and read back what moto holds for each Service.
//
//   - lifecycle_test.go: create, annotation changes, mixed protocol, source ranges, node set,
//     Local <-> Cluster, replacement without a status gap, delete, for NLB and Classic ELB,
//     through portico-controller and portico-ccm.
//   - faults_test.go: throttling and dropped connections injected by moto.Proxy.
//   - crash_test.go: the controller SIGKILLed at a random write of create, update and delete
//     (-aws.trials, default 10; 50 for the full run), then restarted.
//   - bench_test.go: BenchmarkAWSCalls, AWS API calls per operation for 1 and 100 Services.
//
// moto_server 5.2.5 must be installed (`make prereqs`); without it every test fails, naming
// that command.
package aws
