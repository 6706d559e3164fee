// Package replay runs mm2go's shipped deployments the way their platforms would: it reads the
// artifacts as a user applies them (kustomize build of deploy/kubernetes and deploy/keda, the
// ARM template through armeval with its parameters file), derives each workload (command, args,
// environment with the example secrets, trigger, concurrency policy, deadline), and the tests
// run those workloads as processes against the harness's real brokers on a compressed clock.
// Its tests need the brokers (test/run.sh starts them before the deploy module's tests).
package replay
