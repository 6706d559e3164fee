// Package e2e holds mm2go's end-to-end tests: real Kafka clusters from the harness, the
// functions as processes, and interoperability with genuine MirrorMaker 2.
package e2e

import "github.com/mm2go/mm2go/test/testkit"

// MM2Properties returns testkit.MM2Properties for the harness's two clusters.
func MM2Properties(c testkit.Clusters, topics ...string) string {
	return testkit.MM2Properties(c.Source.Bootstrap, c.Target.Bootstrap, topics...)
}
